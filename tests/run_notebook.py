"""Execute one notebook top to bottom in a fresh kernel; exit non-zero on the first error.

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
print(f"{path.name}: {sum(c.cell_type == 'code' for c in nb.cells)} code cells executed")
