# Two commands do all the set-up on a fresh Linux machine with Python 3 (>= 3.11) and g++:
#   make site   build the book into _build/html
#   make test   run the notebooks (nbval) and the unit tests, on the CPU or on a GPU
# Both create .venv if it is missing and install requirements.txt into it.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.requirements.stamp

# The notebooks and tests import gemmlab from the repository root.
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: site test venv clean help

help:
	@echo "make site   build the book into _build/html (creates .venv if missing)"
	@echo "make test   pytest --nbval-lax book/ tests/ (creates .venv if missing)"
	@echo "make colab-lane  every chapter as on Colab: Colab's packages (.venv-colab), the course pip-installed from a snapshot of the working tree, CPU emulator"
	@echo "make clean  remove _build (keeps .venv)"

venv: $(STAMP)

# Re-install whenever requirements.txt changes.
$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

site: $(STAMP)
	$(BIN)/jupyter-book build --warningiserror --nitpick .
	@echo "The book is in _build/html/index.html"

test: $(STAMP)
	$(BIN)/python -m pytest --nbval-lax book/ tests/

# Issue 40: every chapter top to bottom in Colab's environment (tests/colab/lane.py; it makes .venv-colab itself).
.PHONY: colab-lane
colab-lane:
	$(PYTHON) tests/colab/lane.py

clean:
	rm -rf _build
