# Two commands do everything on a fresh machine with Python 3.11+, node 20 and npm:
#   make book     build the website into _build/html (MathJax served by the site, no CDN)
#   make test     in .venv (the newest versions allowed): the package tests and every chapter
#                 under nbval, every math span typeset by MathJax 3; then `make test-floors`:
#                 in .venv-floors (the oldest versions pyproject.toml declares, ipywidgets
#                 7.7.1 as in Colab) every chapter again under nbval on another CPU code path,
#                 and the package tests that use flax, optax, orbax and ipywidgets
# Both create the virtual environment .venv first (again when requirements.txt changes).
# Other targets: execute (refresh the chapters' outputs), check-site (open every built page
# in headless Chromium), node, floors, venv, clean.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export PYTHONHASHSEED := 0
# The environments are filled by uv (from PyPI, like pip): it downloads and installs in
# parallel, 4 s for requirements.txt where pip took 46 s.
UV     := uv>=0.9,<1

# MathJax 3 for node (tests/test_mathjax.py) and for the website, from npm into .node/.
MATHJAX_VERSION := 3.2.2
# Drives Chromium for `make check-site` (a 10 MB package, no browser download).
PLAYWRIGHT_VERSION := 1.65.1
NODE_DIR        := .node
NODE_STAMP      := $(NODE_DIR)/.installed-$(MATHJAX_VERSION)-$(PLAYWRIGHT_VERSION)
# The floors environment: jax, flax, optax and ipywidgets at the versions pyproject.toml
# declares as the oldest supported (tools/floors.py reads them).
FLOORS       := .venv-floors
FLOORS_STAMP := $(FLOORS)/.installed
# The floors environment runs the chapters (is each floor enough for the book, and are the
# stored outputs independent of the machine?) and the package tests that call flax, optax,
# orbax or ipywidgets (is each floor enough for the package's use of those APIs?).
FLOORS_TESTS := book tests/test_layer_contract.py tests/test_model.py tests/test_train.py \
	tests/test_checkpoint.py tests/test_cli.py tests/test_widgets.py tests/test_readme.py \
	$(wildcard tests/test_hostile_*.py tests/test_static_explorer.py)
# Another CPU code path for that run: XLA compiles for AVX only (256-bit vectors, no FMA)
# and OpenBLAS runs its Sandy Bridge kernels, so sums round differently than in the main run.
# (Not SSE4.2: jax 0.8's XLA aborts converting to bfloat16 without F16C.) A chapter output
# whose digits depend on the CPU then fails here, on the machine that made it, instead of
# on a reader's machine. (x86-64 only: the flags mean nothing elsewhere.)
ifeq ($(shell uname -m),x86_64)
OTHER_CPU := XLA_FLAGS=--xla_cpu_max_isa=AVX OPENBLAS_CORETYPE=Sandybridge
endif
NBVAL := --nbval --nbval-current-env --nbval-cell-timeout=900 \
	--nbval-sanitize-with tools/nbval_sanitize.cfg

# Tests run on every core (pytest-xdist), a file or a chapter per worker at a time: nbval runs
# a chapter's cells in order in one kernel. The tests' time is mostly XLA compiling small
# programs, so the workers share a persistent compilation cache (every program, however
# quick to compile), one per environment since the key holds the jax version.
WORKERS      ?= auto
PYTEST_XDIST := -n $(WORKERS) --dist loadfile
JAX_CACHE    := JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0

.PHONY: book test test-floors execute check-site venv node floors clean

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q "$(UV)"
	$(BIN)/python -m uv pip install -q --python $(BIN)/python -r requirements.txt
	$(BIN)/python -m uv pip install -q --python $(BIN)/python --no-deps -e .
	touch $(STAMP)

node: $(NODE_STAMP)

# The folder ignores itself (its own .gitignore), like .venv-floors.
$(NODE_STAMP):
	mkdir -p $(NODE_DIR) && echo '*' > $(NODE_DIR)/.gitignore
	npm install --prefix $(NODE_DIR) --no-save --no-audit --no-fund --loglevel=error \
		mathjax-full@$(MATHJAX_VERSION) mathjax@$(MATHJAX_VERSION) playwright-core@$(PLAYWRIGHT_VERSION)
	touch $@

floors: $(FLOORS_STAMP)

$(FLOORS_STAMP): pyproject.toml tools/floors.py Makefile
	rm -rf $(FLOORS)
	$(PYTHON) -m venv $(FLOORS)
	echo '*' > $(FLOORS)/.gitignore
	$(FLOORS)/bin/python -m pip install -q "$(UV)"
	$(FLOORS)/bin/python -m uv pip install -q --python $(FLOORS)/bin/python \
		$$($(PYTHON) tools/floors.py --pins) "pytest>=8,<10" "pytest-xdist>=3.6,<4" \
		"nbval>=0.11,<0.12" "ipykernel>=6.29,<8"
	$(FLOORS)/bin/python -m uv pip install -q --python $(FLOORS)/bin/python --no-deps -e .
	touch $@

# The website loads MathJax from _build/html/_static/mathjax (mathjax_path in _config.yml),
# copied in after the build: a _static folder in the sources would make Jupyter Book add
# each of MathJax's 70 scripts to every page.
book: $(STAMP) $(NODE_STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going
	rm -rf _build/html/_static/mathjax
	cp -r $(NODE_DIR)/node_modules/mathjax/es5 _build/html/_static/mathjax

test: $(STAMP) $(NODE_STAMP) $(FLOORS_STAMP)
	$(JAX_CACHE) JAX_COMPILATION_CACHE_DIR=$(CURDIR)/.cache/jax-venv $(BIN)/python -m pytest $(PYTEST_XDIST) \
		tests book $(NBVAL) -p no:cacheprovider
	$(MAKE) test-floors

test-floors: $(FLOORS_STAMP)
	$(JAX_CACHE) JAX_COMPILATION_CACHE_DIR=$(CURDIR)/.cache/jax-floors $(OTHER_CPU) \
		$(FLOORS)/bin/python -m pytest $(PYTEST_XDIST) $(FLOORS_TESTS) $(NBVAL) -q \
		-p no:cacheprovider

# Re-execute every chapter in place, refreshing the outputs stored in the notebooks.
execute: $(STAMP)
	$(BIN)/python tools/execute_notebooks.py book/*.ipynb

# Every page of _build/html in headless Chromium, offline: MathJax errors, console
# exceptions, horizontal overflow. Needs /usr/bin/chromium (Debian: apt-get install chromium).
check-site: $(NODE_STAMP)
	$(BIN)/python tools/check_site.py

clean:
	rm -rf _build .cache
