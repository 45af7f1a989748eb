# The two commands of the README: `make book` builds the website, `make test` runs every test.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HTML   := _build/html

.PHONY: book test lab student clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: requirements.txt pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements-dev.txt $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

## book: build the static website (every notebook executed, warnings as errors)
book: $(VENV)/.installed
	$(BIN)/jupyter-book build . --builder html --warningiserror --nitpick --keep-going
	@echo "The book is at $(abspath $(HTML)/index.html)"

## test: the whole test suite (library, notebooks, the built book in headless Chromium)
test: $(VENV)/.dev-installed
	$(BIN)/python -m pytest

## lab: run the chapter notebooks interactively in JupyterLab
lab: $(VENV)/.installed
	$(BIN)/jupyter lab notebooks/

## student: the student edition of every notebook (solutions removed) in _build/student
student: $(VENV)/.installed
	$(BIN)/python -m llm_roofline.student notebooks _build/student

clean:
	rm -rf _build
