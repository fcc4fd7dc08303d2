"""pytest configuration for the whole repository: the package tests and the chapters."""

# What the longest files take, in CPU seconds on one core (the chapters: their cells' times
# as `make execute` stored them; the package test files: --durations on one process),
# longest first. `make test` starts them in this order; files not listed come after them.
SECONDS = {"08_training.ipynb": 640, "09_selective.ipynb": 570, "10_duality.ipynb": 250,
           "02_hippo.ipynb": 145, "test_hostile_training.py": 130, "test_layer_contract.py": 120,
           "test_run_folder.py": 100, "test_model.py": 90, "07_s5.ipynb": 78,
           "04_s4.ipynb": 75, "test_checkpoint.py": 70, "06_s4d.ipynb": 50,
           "05_dss.ipynb": 46, "03_discretization.ipynb": 35, "01_continuous_time.ipynb": 14}


def pytest_configure(config):
    """Keep the order below when the files are spread over workers.

    pytest-xdist 3.7 and later (``--dist loadfile``) hand out the files with the most tests
    first, which put chapter 8 (29 cells, the longest file) behind twenty test files: CI's
    main run ended with one worker alone on it for minutes."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """The longest files first, by ``SECONDS``; the others after them, as collected.

    ``make test`` spreads files over the cores (pytest-xdist, ``--dist loadfile``) in this
    order, and the longest first leaves the least idle time at the end: a long chapter
    started last would leave the other cores idle for minutes. The order within a file is
    kept (nbval runs a chapter's cells in one kernel, one after another)."""
    items.sort(key=lambda item: -SECONDS.get(item.path.name, 0))  # stable
