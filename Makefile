# Two commands do all the set-up on a fresh Linux machine with Python 3 (>= 3.11) and g++:
#   make site   build the book into _build/html: installs requirements-book.txt only (the book build)
#   make test   run the notebooks (nbval) and the unit tests, on the CPU or on a GPU: installs requirements.txt
#   make venv   requirements.txt without running anything (JupyterLab, the command line, the exercises)
# Each creates .venv if it is missing.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.requirements.stamp
BOOK_STAMP := $(VENV)/.requirements-book.stamp

# The notebooks and tests import gemmlab from the repository root.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: site test venv clean help

help:
	@echo "make site   build the book into _build/html (creates .venv if missing; installs requirements-book.txt only)"
	@echo "make venv   .venv with requirements.txt: JupyterLab, the command line, the exercises, the tests"
	@echo "make test   pytest --nbval-lax book/ tests/ (creates .venv if missing)"
	@echo "make colab-lane  every chapter as on Colab: Colab's packages (.venv-colab), the course pip-installed from a snapshot of the working tree, CPU emulator"
	@echo "make clean  remove _build (keeps .venv)"

venv: $(STAMP)

# Re-install whenever a requirements file changes. The full set includes the book's, so it stamps both.
$(STAMP): requirements.txt requirements-book.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@ $(BOOK_STAMP)

$(BOOK_STAMP): requirements-book.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements-book.txt
	touch $@

site: $(BOOK_STAMP)
	$(BIN)/jupyter-book build --warningiserror --nitpick .
	@echo "The book is in _build/html/index.html"

test: $(STAMP)
	$(BIN)/python -m pytest --nbval-lax book/ tests/

# Issue 40: every chapter top to bottom in Colab's environment (tools/colab/lane.py; it makes .venv-colab itself).
.PHONY: colab-lane
colab-lane:
	$(PYTHON) tools/colab/lane.py

clean:
	rm -rf _build
