"""Execute one notebook top to bottom in a fresh kernel; exit non-zero on the first error, or
on any warning printed into an output (a page shows its outputs: a warning there is a defect).

Used by test_notebooks.py inside a network namespace with no route out, so a notebook that
reaches for the network fails.  Usage: python run_notebook.py NOTEBOOK
"""

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

path = Path(sys.argv[1])
nb = nbformat.read(path, as_version=4)
resources = {"metadata": {"path": str(path.parent)}}
NotebookClient(nb, timeout=120, kernel_name="python3", resources=resources).execute()
warnings = [
    (i, line)
    for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
    for out in cell.get("outputs", []) if out.get("output_type") == "stream"
    and out.get("name") == "stderr"
    for line in out.get("text", "").splitlines() if "Warning" in line
]
if warnings:
    for i, line in warnings:
        print(f"{path.name}: cell {i} prints a warning: {line[:300]}")
    sys.exit(1)
print(f"{path.name}: {sum(c.cell_type == 'code' for c in nb.cells)} code cells executed, no warning")
