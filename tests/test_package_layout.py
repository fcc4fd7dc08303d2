"""The package's two wings: the library (everything in annotated_ssm/ but annotated_ssm/book/)
is what ``pip install annotated-ssm`` gives, without the ``[book]`` extra. Checked by what a
user of the core install does: import any library module first, on its own, and train a
model on the default data set, MNIST-1D, with the book's libraries not installed; the book
wing is never loaded.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "annotated_ssm"
BOOK_WING = "annotated_ssm.book"
#: What only the book installs (the ``[book]`` extra and what it brings): the library must
#: not need them. (test_cli.py blocks these and the data sets' packages too.)
BOOK_LIBRARIES = ("matplotlib", "ipywidgets", "PIL")
#: The ``[book]`` extra's data-set package (and mnist1d, whose generator the core carries
#: itself): a core install lacks them as well.
BOOK_DATA_LIBRARIES = ("sklearn", "mnist1d")


def library_modules() -> list[str]:
    """Every module of the library (the package but its book wing), by its file's name."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if name != BOOK_WING and not name.startswith(BOOK_WING + "."):
            names.append(name)
    return names


# BLOCK_IMPORTS (a str.format template: blocked=) makes the modules named in BLOCKED, and
# their submodules, fail to import, as if they were not installed.
BLOCK_IMPORTS = textwrap.dedent("""
    import sys

    BLOCKED = {blocked!r}

    class NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
""")
# Each library module is imported first, on a fresh package (the package's modules are
# forgotten before each; jax and flax stay loaded): an import of the book, of its libraries
# or an import cycle that breaks when a user starts from that module fails here.
CORE_INSTALL = BLOCK_IMPORTS + textwrap.dedent("""
    import importlib

    def loaded_book():
        return sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED or m.startswith("{book}"))

    for name in {modules!r}:
        for module in [m for m in sys.modules if m == "annotated_ssm" or m.startswith("annotated_ssm.")]:
            del sys.modules[module]
        importlib.import_module(name)
        assert not loaded_book(), (name, loaded_book())

    import numpy as np
    from annotated_ssm.config import TrainConfig
    from annotated_ssm.data import load_dataset
    from annotated_ssm.train import build_model, fit

    data = load_dataset("mnist1d", num_samples=100)  # the default data set: in the core
    model = build_model("s4d", data, d_model=8, n_layers=1, state_size=4)
    history = fit(model, data, TrainConfig(epochs=1, batch_size=8, max_steps=4, progress=False))
    assert history.steps[-1] == 4, history.steps
    assert np.isfinite(history.train_loss[-1]) and np.isfinite(history.test_loss)
    assert not loaded_book(), loaded_book()
    print("trained", history.steps[-1], "steps without", ", ".join(BLOCKED))
""")


def test_the_library_imports_and_trains_without_the_book():
    modules = library_modules()
    assert {"annotated_ssm", "annotated_ssm.layers", "annotated_ssm.train"} <= set(modules)
    code = CORE_INSTALL.format(blocked=BOOK_LIBRARIES + BOOK_DATA_LIBRARIES, modules=modules,
                               book=BOOK_WING)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "trained 4 steps" in result.stdout


def test_the_block_is_seen():
    """The blocked packages fail to import in the child, as if not installed (else the test
    above would pass whatever the library imports)."""
    code = BLOCK_IMPORTS.format(blocked=BOOK_LIBRARIES) + "import matplotlib.pyplot\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "No module named 'matplotlib" in result.stderr, result.stderr
