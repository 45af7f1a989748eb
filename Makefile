# The two commands of the README: `make book` builds the website, `make test` runs every test.
# `make check` is the contributor's fast loop: the fast tests and ruff (no notebooks, book or browser).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HTML   := _build/html
JB     := $(BIN)/jupyter-book build .
# The PDF edition's file, and the student edition's (no worked solutions), built under _build/student.
PDF         := _build/latex/physics-of-llm-inference.pdf
STUDENT_PDF := _build/student/_build/latex/physics-of-llm-inference-student.pdf

.PHONY: book html test check lab student assignments slides pdf pdf-student clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements-dev.txt $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

## book: the website and its PDF edition (needs TeX Live: see `pdf`). The PDF is built first, which
## executes the notebooks into the cache the website then reads; the website serves the PDF and
## links it from the sidebar (_ext/pdfedition.py). tests/conftest.py builds the book the same way.
book: $(VENV)/.installed
	$(JB) --builder pdflatex --warningiserror --keep-going
	$(JB) --builder html --warningiserror --nitpick --keep-going
	@echo "The PDF is at $(abspath $(PDF))"
	@echo "The book is at $(abspath $(HTML)/index.html)"

## html: the website alone (every notebook executed, warnings as errors), for a machine without TeX:
## the sidebar then has no PDF link
html: $(VENV)/.installed
	$(JB) --builder html --warningiserror --nitpick --keep-going
	@echo "The book is at $(abspath $(HTML)/index.html)"

## pdf: the PDF edition alone (warnings as errors), _build/latex/physics-of-llm-inference.pdf
## (XeLaTeX: Debian's texlive-xetex, texlive-latex-extra, latexmk, xindy, fonts-freefont-otf)
pdf: $(VENV)/.installed
	$(JB) --builder pdflatex --warningiserror --keep-going
	@echo "The PDF is at $(abspath $(PDF))"

## pdf-student: the PDF without the worked solutions, for students to print (_ext/printform.py)
pdf-student: $(VENV)/.installed
	BOOK_EDITION=student $(JB) --builder pdflatex --warningiserror --keep-going --path-output _build/student
	@echo "The student PDF is at $(abspath $(STUDENT_PDF))"

## test: the whole test suite (library, notebooks, the built book in headless Chromium)
test: $(VENV)/.dev-installed
	$(BIN)/python -m pytest --durations=15

## check: the fast loop while editing (seconds): fast tests and ruff; not the notebooks, book or browser
check: $(VENV)/.dev-installed
	$(BIN)/python -m pytest -q -m "not slow and not browser"
	$(BIN)/ruff check lib tests benchmarks _ext

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
assignments: $(VENV)/.dev-installed
	$(BIN)/python -m llm_roofline.course.assignments notebooks _build/nbgrader

## slides: a reveal.js deck per chapter in _build/slides (tagged cells; reveal.js from npm, no CDN)
# Each chapter with tagged code cells runs in a fresh kernel first; needs npm for reveal.js.
slides: $(VENV)/.dev-installed
	$(BIN)/python -m llm_roofline.course.slides notebooks _build/slides

clean:
	rm -rf _build
