"""pytest configuration for the whole repository: the package tests and the chapters."""

# The chapters, longest first (chapter 8 trains 30 models, 9 trains 8, 10 three with their
# seeds side by side; chapter 2's cells take 145 s as `make execute` stored them, the others
# under 80).
CHAPTERS = ("08_training.ipynb", "09_selective.ipynb", "10_duality.ipynb", "02_hippo.ipynb",
            "07_s5.ipynb", "04_s4.ipynb", "06_s4d.ipynb", "05_dss.ipynb",
            "03_discretization.ipynb", "01_continuous_time.ipynb")
# The package test files that take longest, longest first (measured with --durations on the
# 2-core machine: test_hostile_training.py starts real processes and kills them; 25-130 s each
# on one worker).
SLOWEST_TEST_FILES = ("test_hostile_training.py", "test_run_folder.py", "test_layer_contract.py",
                      "test_model.py", "test_checkpoint.py", "test_discretize.py",
                      "test_lengths.py", "test_cli.py", "test_kernels.py", "test_train.py",
                      "test_s4d.py", "test_readme.py", "test_ssd.py", "test_mamba_model.py",
                      "test_hippo.py", "test_s5.py", "test_s6.py", "test_blocks.py",
                      "test_widgets.py", "test_precision.py", "test_s4.py")
RANK = {name: i for i, name in enumerate(CHAPTERS + SLOWEST_TEST_FILES)}


def pytest_configure(config):
    """Keep the order below when the files are spread over workers.

    pytest-xdist 3.7 and later (``--dist loadfile``) hand out the files with the most tests
    first, which put chapter 8 (29 cells, the longest file) behind twenty test files."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """The chapters first, longest first, then the package tests, the slowest first.

    ``make test`` spreads files over the cores (pytest-xdist, ``--dist loadfile``) in this
    order, and the longest first leaves the least idle time at the end: chapter 8 trains
    30 models and takes the longest of any file, and started last it would leave the other
    cores idle for minutes. The order within a file is kept (nbval runs a chapter's cells in
    one kernel, one after another)."""
    items.sort(key=lambda item: RANK.get(item.path.name, len(RANK)))  # stable
