# Two commands do everything on a fresh machine with Python 3.11+, node 20 and npm:
#   make book     build the website into _build/html (MathJax served by the site, no CDN)
#   make test     in .venv (the newest versions allowed): the package tests and every chapter
#                 under nbval, every math span typeset by MathJax 3; then `make test-floors`:
#                 in .venv-floors (every dependency at the oldest version pyproject.toml
#                 declares, ipywidgets 7.7.1 as in Colab) every chapter but 8, 9, 10 again under
#                 nbval on another CPU code path, and the package tests that use flax, optax,
#                 orbax and ipywidgets
# Both create the virtual environment .venv first (again when requirements.txt changes).
# Other targets: execute (refresh the chapters' outputs), check-site (open every built page
# in headless Chromium and move every explorer), test-gpu (the package tests and every
# chapter on this machine's GPU), node, floors, venv, clean.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export PYTHONHASHSEED := 0
# The environments are filled by uv (from PyPI, like pip): it downloads and installs in
# parallel, several times faster than pip.
UV     := uv>=0.9,<1

# MathJax 3 for node (tests/test_mathjax.py, the book's one MathJax check) and for the
# website, from npm into .node/.
MATHJAX_VERSION := 3.2.2
NODE_DIR        := .node
NODE_STAMP      := $(NODE_DIR)/.installed-$(MATHJAX_VERSION)
# The floors environment: every dependency pyproject.toml declares (core and `book`) at its
# floor, the oldest version it declares, by uv's `--resolution lowest-direct` (what those
# need comes at the newest version that fits); ipywidgets at Colab's version, 7.7.1. uv takes
# a newer version where a floor cannot be installed with the others, so tools/floors.py
# --check then fails on any package above its floor (raise that floor). What was installed
# is listed in .venv-floors/floors.txt; the test tools come after, constrained to it.
FLOORS       := .venv-floors
FLOORS_STAMP := $(FLOORS)/.installed
COLAB_IPYWIDGETS := 7.7.1
# The floors environment runs the chapters (is each floor enough for the book, and are the
# stored outputs independent of the machine?) and the package tests that call flax, optax,
# orbax or ipywidgets (is each floor enough for the package's use of those APIs?): flax NNX
# modules and their state (the layer contract; the models are built, trained, saved and
# restored by the tests that follow, so tests/test_model.py runs in the main run only), optax
# training, orbax checkpoints (train, checkpoint, the CLI, the README's example), the explorers on ipywidgets 7.7 and 8 (widgets,
# static explorer). Every chapter but 8, 9 and 10, the three that train: their trained scores are
# not compared (they depend on the CPU) and they are the longest chapters (about three
# quarters of the chapters' time). Chapter 8's training is the package's (fit, optax, orbax:
# the tests above run it at the floors); chapter 9's layer, S6, trains at the floors through
# the CLI (test_cli.py), and its own loop uses optax's oldest transforms (chain, adam,
# clip_by_global_norm, scale_by_schedule); chapter 10 passed there once (113 s, by hand). Not
# tests/test_hostile_training.py (two minutes):
# it tests the package's own saving and resuming under Ctrl-C, crashes and lost files; the
# orbax calls it makes (save, restore, an interrupted save, a bit-identical resume) run at the
# floors in test_checkpoint.py and test_train.py.
FLOORS_TESTS := $(filter-out book/08_training.ipynb book/09_selective.ipynb book/10_duality.ipynb,$(wildcard book/*.ipynb)) \
	tests/test_layer_contract.py tests/test_train.py \
	tests/test_checkpoint.py tests/test_cli.py tests/test_compiled_memory.py \
	tests/test_widgets.py tests/test_static_explorer.py tests/test_readme.py
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
# quick to compile), one per environment since the key holds the jax version. One worker
# more than the cores: with one per core the cores sat idle 9 % of the time (starting
# interpreters and kernels, writing checkpoints, waiting on child processes); on CI's two
# cores the floors run took 314 s at 182 % CPU with two workers, 293 s at 196 % with three.
# The longest files start first (conftest.py: the three training chapters, then the others
# by their measured time), since a long chapter started last leaves the other cores idle;
# conftest.py also turns off pytest-xdist's own order (3.7+: most tests first), which
# started chapter 8 behind twenty test files.
WORKERS      ?= $(shell echo $$(( $$(nproc) + 1 )))
PYTEST_XDIST := -n $(WORKERS) --dist loadfile
JAX_CACHE    := JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0

.PHONY: book test test-floors test-gpu execute check-site venv node floors clean

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
		mathjax-full@$(MATHJAX_VERSION) mathjax@$(MATHJAX_VERSION)
	touch $@

floors: $(FLOORS_STAMP)

$(FLOORS_STAMP): pyproject.toml tools/floors.py Makefile
	rm -rf $(FLOORS)
	$(PYTHON) -m venv $(FLOORS)
	echo '*' > $(FLOORS)/.gitignore
	$(FLOORS)/bin/python -m pip install -q "$(UV)"
	$(FLOORS)/bin/python -m uv pip install -q --python $(FLOORS)/bin/python \
		--resolution lowest-direct -r pyproject.toml --extra book \
		"ipywidgets==$(COLAB_IPYWIDGETS)"
	$(FLOORS)/bin/python tools/floors.py --check
	$(FLOORS)/bin/python -m uv pip freeze -q --python $(FLOORS)/bin/python > $(FLOORS)/floors.txt
	$(FLOORS)/bin/python -m uv pip install -q --python $(FLOORS)/bin/python \
		-c $(FLOORS)/floors.txt "pytest>=8,<10" "pytest-xdist>=3.6,<4" "nbval>=0.11,<0.12" \
		"ipykernel>=6.29,<8"
	$(FLOORS)/bin/python -m uv pip install -q --python $(FLOORS)/bin/python --no-deps -e .
	touch $@

# The website loads MathJax from _build/html/_static/mathjax (mathjax_path in _config.yml),
# copied in after the build: a _static folder in the sources would make Jupyter Book add
# each of MathJax's 70 scripts to every page. Only the parts the site loads (3.6 MB of the
# distribution's 24 MB): tex-chtml.js (TeX input, CommonHTML output and the menu in one
# file), the TeX extensions it loads when a page uses them (\boldsymbol), the CommonHTML
# fonts, and what the menu's accessibility settings load when a reader turns them on
# (a11y, and sre, the speech rule engine).
MATHJAX_PARTS := tex-chtml.js input/tex/extensions output/chtml/fonts/woff-v2 a11y sre
book: $(STAMP) $(NODE_STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going
	rm -rf _build/html/_static/mathjax
	for part in $(MATHJAX_PARTS); do mkdir -p $$(dirname _build/html/_static/mathjax/$$part) && \
		cp -r $(NODE_DIR)/node_modules/mathjax/es5/$$part _build/html/_static/mathjax/$$part || exit 1; done

test: $(STAMP) $(NODE_STAMP) $(FLOORS_STAMP)
	$(JAX_CACHE) JAX_COMPILATION_CACHE_DIR=$(CURDIR)/.cache/jax-venv $(BIN)/python -m pytest $(PYTEST_XDIST) \
		tests book $(NBVAL) -p no:cacheprovider
	$(MAKE) test-floors

test-floors: $(FLOORS_STAMP)
	$(JAX_CACHE) JAX_COMPILATION_CACHE_DIR=$(CURDIR)/.cache/jax-floors $(OTHER_CPU) \
		$(FLOORS)/bin/python -m pytest $(PYTEST_XDIST) $(FLOORS_TESTS) $(NBVAL) -q \
		-p no:cacheprovider

# The package tests and every chapter under nbval (the same sanitiser) on the GPU, in the
# current Python environment (CUDA jax and requirements.txt; it creates no environment and
# downloads nothing; another interpreter: `make test-gpu PYTHON=/path/to/python`). It
# refuses a machine where jax's default backend is not the GPU, runs files in parallel on
# GPU_WORKERS workers with memory taken as needed, and prints one line per chapter and the
# counts (tools/test_gpu.py).
GPU_WORKERS ?= 4
test-gpu:
	$(PYTHON) tools/test_gpu.py --workers $(GPU_WORKERS)

# Re-execute every chapter in place, refreshing the outputs stored in the notebooks, with
# nbclient (what `jupyter execute --inplace` runs; its command line cannot set these options):
# consecutive prints stored as one output (coalesce_streams: how the kernel splits them into
# messages depends on timing), and no widget state (store_widget_state off, and any that
# Jupyter saved removed: nothing reads it, the website shows each explorer's static frames).
# Each chapter's wall time is printed (the budget: under 2 minutes on the 2-core CI machine).
EXECUTE := import sys, nbclient, nbformat; path = sys.argv[1]; \
	notebook = nbclient.execute(nbformat.read(path, 4), cwd="book", kernel_name="python3", \
	timeout=900, coalesce_streams=True, store_widget_state=False); \
	notebook.metadata.pop("widgets", None); nbformat.write(notebook, path)
# `make execute CHAPTERS="book/03_discretization.ipynb book/04_s4.ipynb"` refreshes some only.
CHAPTERS ?= book/*.ipynb
execute: $(STAMP)
	for notebook in $(CHAPTERS); do start=$$(date +%s); \
		$(BIN)/python -c '$(EXECUTE)' $$notebook || exit 1; \
		echo "$$notebook: executed in $$(( $$(date +%s) - start )) s"; done

# Every page of _build/html (`make book` first) in headless Chromium, offline: console
# exceptions, horizontal overflow, lines and buttons (tools/check_site.py), then every
# explorer moved control by control (tools/check_explorers.py). Python's playwright drives
# the system Chromium, /usr/bin/chromium (Debian: apt-get install chromium); no download.
check-site: $(STAMP)
	$(BIN)/python tools/check_site.py
	$(BIN)/python tools/check_explorers.py

clean:
	rm -rf _build .cache book/reference
