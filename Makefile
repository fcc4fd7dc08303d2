# Two commands do everything on a fresh machine with Python 3.11+:
#   make book     build the website into _build/html
#   make test     run the package tests and every chapter under nbval
# Both create the virtual environment .venv first (again when requirements.txt changes).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export PYTHONHASHSEED := 0

.PHONY: book test execute venv clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going

test: $(STAMP)
	$(BIN)/python -m pytest tests book --nbval --nbval-current-env --nbval-cell-timeout=900 --nbval-sanitize-with tools/nbval_sanitize.cfg -p no:cacheprovider

# Re-execute every chapter in place, refreshing the outputs stored in the notebooks.
execute: $(STAMP)
	$(BIN)/python tools/execute_notebooks.py book/*.ipynb

clean:
	rm -rf _build
