"""The chapter notebooks opened in JupyterLab (as `make lab` and Binder open them), in headless Chromium.

JupyterLab is started on a free localhost port with no token and no browser, opens each notebook
(running nothing), and the rendered markdown is read: jupyterlab-myst must have rendered the MyST
markup, so no raw ``{term}``, ``{cite}``, exercise fence or glue placeholder is visible. A screenshot
of each notebook at 1280 px goes to _build/screenshots/lab__<notebook>-1280.png (its top, as a reader
first sees it) and lab__<notebook>-1280-NN.png for each further window's height of the notebook.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, SCREENSHOTS, notebooks
from test_browser import CHROMIUM_ARGS, _chromium

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in view (Lab may keep earlier ones open)
RAW_MYST = ("{term}", "{cite}", "{doc}", "{glue", "{exercise", "{solution", "````", ":label:")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The reader's environment, as `make lab` runs it (.venv: requirements.txt alone). The tests run in
# .venv-dev, whose JupyterLab also holds nbgrader's extensions: a reader must not see them.
READER_BIN = ROOT / ".venv" / "bin"
COURSE_TOOLS = ("nbgrader", "playwright", "torch", "transformers", "pytest", "hypothesis")


def reader_bin() -> Path:
    """The reader's .venv/bin (built by `make test` before the tests run); this interpreter's outside CI
    when it is missing, with a skip of the checks that need it."""
    if (READER_BIN / "jupyter").exists():
        return READER_BIN
    if os.environ.get("CI") == "true":
        pytest.fail(f"{READER_BIN} is missing: `make test` builds the reader's environment first")
    return Path(sys.executable).parent


def lab_command(port: int) -> list[str]:
    """JupyterLab from the reader's environment on 127.0.0.1:port, no token, no browser;
    --allow-root when running as root."""
    cmd = [str(reader_bin() / "jupyter"), "lab", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
           f"--ServerApp.root_dir={ROOT}", "--LabApp.news_url=",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    settings = tmp_path_factory.mktemp("lab-settings")
    tracker = settings / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    # Render every cell, not only those in view, so that the whole notebook can be read.
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    notification = settings / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    port = _free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path_factory.mktemp("lab-workspaces"))}
    log = (tmp_path_factory.mktemp("lab-log") / "lab.log").open("w")
    proc = subprocess.Popen(lab_command(port), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"JupyterLab did not start:\n{Path(log.name).read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_the_readers_jupyterlab_holds_the_book_and_nothing_else():
    if reader_bin() != READER_BIN:
        pytest.skip(f"{READER_BIN} is missing (make lab builds it)")
    listed = subprocess.run([str(READER_BIN / "jupyter"), "labextension", "list"],
                            capture_output=True, text=True)
    text = listed.stdout + listed.stderr
    assert "jupyterlab-myst" in text and "not compatible" not in text and " X" not in text, text
    assert "nbgrader" not in text.lower(), text
    pip = subprocess.run([str(READER_BIN / "python"), "-m", "pip", "list", "--format=freeze"],
                         capture_output=True, text=True, check=True).stdout.lower()
    installed = {line.split("==")[0] for line in pip.splitlines()}
    assert not installed & set(COURSE_TOOLS), f"course tools in the reader's environment: " \
        f"{sorted(installed & set(COURSE_TOOLS))}"


def test_lab_command_allows_root_only_as_root():
    assert ("--allow-root" in lab_command(8888)) == (os.geteuid() == 0)
    assert "--IdentityProvider.token=" in lab_command(8888)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_notebook_reads_right_in_jupyterlab(lab, path):
    from playwright import sync_api

    cells = json.loads(path.read_text())["cells"]
    n_markdown = sum(c["cell_type"] == "markdown" for c in cells)
    source = "\n".join("".join(c["source"]) for c in cells)
    # jupyterlab-myst shows a {glue} role it cannot fill as its key ("scale_cost:.1%"): look for the keys
    glue_keys = set(re.findall(r"\{glue(?::\w+)?\}`([\w]+)", source))
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{lab}/lab/tree/{path.relative_to(ROOT).as_posix()}", wait_until="load")
            page.wait_for_selector(f"{PANEL} .jp-MarkdownCell", timeout=60000)
            # jupyterlab-myst renders each markdown cell into a .myst element
            page.wait_for_function(
                f"n => document.querySelectorAll('{PANEL} .jp-MarkdownCell .myst').length >= n",
                arg=n_markdown, timeout=60000)
            page.wait_for_timeout(3000)  # let the MyST renderer finish
            # JupyterLab may re-render the cells meanwhile (one run in three CI runs read 0 .myst
            # elements here): wait for them again before reading them
            page.wait_for_function(
                f"n => document.querySelectorAll('{PANEL} .jp-MarkdownCell .myst').length >= n",
                arg=n_markdown, timeout=60000)
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"lab__{path.stem}-1280.png"))
            text = page.evaluate(
                f"() => [...document.querySelectorAll('{PANEL} .jp-MarkdownCell .myst')]"
                ".map(e => e.innerText).join('\\n')"
            )
            myst = page.evaluate(f"() => document.querySelectorAll('{PANEL} .myst').length")
            # then the rest of the notebook, one window at a time (the notebook scrolls in its panel)
            scroller = f"{PANEL} .jp-WindowedPanel-outer"
            height = page.evaluate(f"() => document.querySelector('{scroller}').scrollHeight")
            for k, top in enumerate(range(800, min(int(height), 60 * 800), 800), start=1):
                page.evaluate(f"() => document.querySelector('{scroller}').scrollTo(0, {top})")
                page.wait_for_timeout(150)
                page.screenshot(path=str(SCREENSHOTS / f"lab__{path.stem}-1280-{k:02d}.png"))
        finally:
            browser.close()
    raw = sorted({t for t in RAW_MYST if t in text} | {k for k in glue_keys if re.search(rf"\b{k}\b", text)})
    lines = [line.strip()[:100] for line in text.splitlines() if any(t in line for t in raw)]
    assert myst > 0, "jupyterlab-myst did not render the markdown (no .myst element): is it installed?"
    assert not raw, f"{path.name}: raw MyST visible in JupyterLab: {raw}\n  " + "\n  ".join(lines[:15])
