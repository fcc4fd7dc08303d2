"""Every explorer builds and displays through IPython, with ipywidgets 7 and 8.

`make test` runs this twice: in .venv (newest allowed versions) and in .venv-floors (the
declared floors of jax, flax, optax and ipywidgets 7.7.1, the version Colab ships). It calls
each explorer the way its chapter does and asks IPython's display formatter for the bundle a
notebook would receive: a live widget view plus the static explorer the website shows (HTML
with precomputed PNG frames and inline controls).
"""

import base64
import re

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from annotated_ssm import widgets  # noqa: E402

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

EXPLORERS = {
    "eigenvalue_explorer": lambda: widgets.eigenvalue_explorer(),
    "hippo_explorer": lambda: widgets.hippo_explorer(lambda t: np.sin(t) + np.cos(2.3 * t),
                                                     T=4.0, dt=0.02),
    "discretization_explorer": lambda: widgets.discretization_explorer(
        np.array([-0.5 + 1j, -0.2 + 3j]), np.ones(2), np.array([1.0, 0.5 - 0.5j])),
    "s4d_explorer": lambda: widgets.s4d_explorer(),
    "figure3_explorer": lambda: widgets.figure3_explorer(),
    "s5_explorer": lambda: widgets.s5_explorer(),
}


def test_every_public_explorer_is_exercised():
    public = {name for name in widgets.__all__ if name.endswith("_explorer")}
    assert public == set(EXPLORERS)


@pytest.mark.parametrize("name", EXPLORERS)
def test_explorer_displays_as_widget_and_static_html(name):
    explorer = EXPLORERS[name]()
    # IPython prints and swallows an exception raised while formatting (Colab's ipywidgets 7
    # once raised AttributeError there): the bundle then lacks the keys checked below.
    data, _ = InteractiveShell.instance().display_formatter.format(explorer)
    assert {"text/html", "text/plain", WIDGET_VIEW} <= set(data), f"display gave {sorted(data)}"
    frames = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", data["text/html"])
    assert len(frames) >= 2, "the static explorer needs at least two frames to move between"
    assert all(base64.b64decode(frame).startswith(PNG_MAGIC) for frame in frames)
    assert data["text/plain"].startswith("<")
    assert data[WIDGET_VIEW]["model_id"] == explorer.widget.model_id
