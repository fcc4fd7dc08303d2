"""pytest configuration for the whole repository: the package tests and the chapters."""


def pytest_collection_modifyitems(config, items):
    """Chapters first, the last chapter first, then the package tests.

    ``make test`` spreads files over the cores (pytest-xdist, ``--dist loadfile``) in this
    order. Chapter 8 trains twelve models and takes the longest of any file: started last,
    it would leave the other cores idle at the end. The order of the cells within a chapter
    is kept (nbval runs them in one kernel, one after another)."""
    chapters = sorted({item.path for item in items if item.path.suffix == ".ipynb"}, reverse=True)
    rank = {path: i for i, path in enumerate(chapters)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))  # stable: order within a file kept
