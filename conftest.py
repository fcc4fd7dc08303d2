"""pytest configuration for the whole repository: the package tests and the chapters."""

# The package test files that take longest, longest first (measured with --durations on the
# 2-core machine: test_hostile_training.py starts real processes and kills them; 25-130 s each
# on one worker).
SLOWEST_TEST_FILES = ("test_hostile_training.py", "test_run_folder.py", "test_layer_contract.py",
                      "test_model.py", "test_checkpoint.py", "test_discretize.py",
                      "test_lengths.py", "test_cli.py", "test_kernels.py", "test_train.py",
                      "test_s4d.py", "test_readme.py", "test_ssd.py", "test_mamba_model.py",
                      "test_hippo.py", "test_s5.py", "test_s6.py", "test_blocks.py",
                      "test_widgets.py", "test_precision.py", "test_s4.py")


def pytest_collection_modifyitems(config, items):
    """Chapters first, the last chapter first, then the package tests, the slowest first.

    ``make test`` spreads files over the cores (pytest-xdist, ``--dist loadfile``) in this
    order, and the longest first leaves the least idle time at the end: chapter 8 trains
    twelve models and takes the longest of any file, and started last it would leave the
    other core idle for minutes. The order within a file is kept (nbval runs a chapter's
    cells in one kernel, one after another)."""
    chapters = sorted({item.path for item in items if item.path.suffix == ".ipynb"}, reverse=True)
    rank = {path: i for i, path in enumerate(chapters)}
    rank.update({name: len(chapters) + i for i, name in enumerate(SLOWEST_TEST_FILES)})
    last = len(rank)
    items.sort(key=lambda item: rank.get(item.path, rank.get(item.path.name, last)))  # stable
