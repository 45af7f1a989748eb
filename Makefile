# The two commands of the README: `make book` builds the website, `make test` runs every test.
# `make check` is the contributor's fast loop: the fast tests and ruff (no notebooks, book or browser).
# Two virtual environments: the reader's (.venv: requirements.txt; make book, make lab), and the tests'
# and course tools' (.venv-dev: requirements.txt and requirements-dev.txt; make test, make assignments,
# make slides), so that JupyterLab shows a reader the book and nothing of nbgrader, playwright or torch.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEV    := .venv-dev
DEVBIN := $(DEV)/bin
HTML   := _build/html
JB     := $(BIN)/jupyter-book build .
# The PDF edition's file, and the student edition's (no worked solutions), built under _build/student.
PDF         := _build/latex/physics-of-llm-inference.pdf
STUDENT_PDF := _build/student/_build/latex/physics-of-llm-inference-student.pdf

.PHONY: book html test check lab student assignments slides pdf pdf-student clean

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(DEV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	test -x $(DEVBIN)/python || $(PYTHON) -m venv $(DEV)
	$(DEVBIN)/python -m pip install --quiet --upgrade pip
	$(DEVBIN)/python -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	touch $@

## book: the website and its PDF edition (needs TeX Live: see `pdf`). The PDF is built first, which
## executes the notebooks into the cache the website then reads; the website serves the PDF and
## links it from the sidebar (_ext/pdfedition.py). tests/conftest.py builds the book the same way.
book: $(VENV)/.installed
	$(BIN)/python tools/pdf.py
	$(JB) --builder html --warningiserror --nitpick --keep-going
	@echo "The PDF is at $(abspath $(PDF))"
	@echo "The book is at $(abspath $(HTML)/index.html)"

## html: the website alone (every notebook executed, warnings as errors), for a machine without TeX:
## the sidebar then has no PDF link
html: $(VENV)/.installed
	$(JB) --builder html --warningiserror --nitpick --keep-going
	@echo "The book is at $(abspath $(HTML)/index.html)"

## pdf: the PDF edition alone (warnings as errors), _build/latex/physics-of-llm-inference.pdf
## (XeLaTeX and the rest of apt.txt). tools/pdf.py starts afresh after a failed build and names the file
## and the Debian package a failed TeX run lacked.
pdf: $(VENV)/.installed
	$(BIN)/python tools/pdf.py
	@echo "The PDF is at $(abspath $(PDF))"

## pdf-student: the PDF without the worked solutions, for students to print (_ext/printform.py)
pdf-student: $(VENV)/.installed
	$(BIN)/python tools/pdf.py --student
	@echo "The student PDF is at $(abspath $(STUDENT_PDF))"

## test: the whole test suite (library, notebooks, the built book in headless Chromium)
# It builds the reader's environment too: tests/test_lab.py opens JupyterLab from it, as `make lab` does.
test: $(DEV)/.installed $(VENV)/.installed
	$(DEVBIN)/python -m pytest --durations=15

## check: the fast loop while editing (seconds): fast tests and ruff; not the notebooks, book or browser
check: $(DEV)/.installed
	$(DEVBIN)/python -m pytest -q -m "not slow and not browser"
	$(DEVBIN)/ruff check lib tests benchmarks _ext tools

## lab: run the chapter notebooks interactively in JupyterLab (MyST rendered by jupyterlab-myst)
# As root (a container, a CI machine) JupyterLab refuses to start without --allow-root.
LAB_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)
lab: $(VENV)/.installed
	$(BIN)/jupyter lab $(LAB_ROOT) notebooks/

## student: the student edition of every notebook (solutions removed) in _build/student
# --force: _build/student is the build's own folder, rewritten each time (the writer never touches notebooks/).
student: $(VENV)/.installed
	$(BIN)/python -m llm_roofline.course.student notebooks _build/student --force

## assignments: an nbgrader course in _build/nbgrader (source with solutions, release for students)
# Each numeric exercise becomes an autograded answer; nbgrader's own generate_assignment writes release/.
assignments: $(DEV)/.installed
	$(DEVBIN)/python -m llm_roofline.course.assignments notebooks _build/nbgrader

## slides: a reveal.js deck per chapter in _build/slides, from its source slides/NN.md (reveal.js from npm, no CDN)
# Each chapter runs once in a fresh kernel for the figures its deck shows; needs npm for reveal.js.
slides: $(DEV)/.installed
	$(DEVBIN)/python -m llm_roofline.course.slides slides notebooks _build/slides

clean:
	rm -rf _build
