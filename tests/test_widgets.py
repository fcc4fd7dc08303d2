"""The explorers: live widget on ipywidgets 7.7 and 8.x, static HTML for the website, no
recompilation when a control moves.

`make test` runs this twice: in .venv (the newest allowed versions) and in .venv-floors (every
dependency at its declared floor, ipywidgets at 7.7.1, the version Colab ships), so every
explorer is built and displayed with both. Building an explorer's full static page takes
many figures, so most tests shrink the grid to a few points; the chapters build the full
pages (nbval), and tools/check_explorers.py checks their sizes on the built site.
"""

import ast
import base64
import logging
import pathlib
import re
import subprocess
import sys

import ipywidgets
import jax
import matplotlib.pyplot as plt
import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell

from annotated_ssm.book import static_explorer, widgets

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_STATIC_BYTES = 1_500_000


def _signal(t):
    return np.sin(t) + 0.5 * np.cos(3.1 * t)


EXPLORERS = {
    "eigenvalue": lambda: widgets.eigenvalue_explorer(),
    "hippo": lambda: widgets.hippo_explorer(_signal),
    "discretization": lambda: widgets.discretization_explorer(
        -0.3 + 1j * np.pi * np.arange(4), np.ones(4), np.ones(4)),
    "s4d": lambda: widgets.s4d_explorer(),
    "figure3": lambda: widgets.figure3_explorer(),
    "s5": lambda: widgets.s5_explorer(),
    "selective": lambda: widgets.selective_explorer(),
    "duality": lambda: widgets.duality_explorer(),
}


def _shrink_grid(explorer):
    """Keep two values (the first one and one other) of the first two grid controls."""
    names = list(explorer.grid)[:2]
    explorer.grid = {name: [explorer.initial[name]]
                     + [v for v in explorer.grid[name] if v != explorer.initial[name]][:1]
                     for name in names}
    return explorer


@pytest.fixture(scope="module")
def explorers():
    return {name: make() for name, make in EXPLORERS.items()}


def test_every_public_explorer_is_exercised():
    public = {name for name in widgets.__all__ if name.endswith("_explorer")}
    assert public == {f"{name}_explorer" for name in EXPLORERS}


@pytest.mark.parametrize("name", EXPLORERS)
def test_display_bundle_has_widget_html_and_text(name, explorers):
    """IPython's display formatter (what Jupyter and Colab call) gets the live widget's view,
    the static HTML and a short text form, with ipywidgets 7 and 8 alike."""
    explorer = _shrink_grid(explorers[name])
    # IPython prints and swallows an exception raised while formatting (Colab's ipywidgets 7
    # once raised AttributeError there): the bundle then lacks the keys checked below.
    data, _ = InteractiveShell.instance().display_formatter.format(explorer)
    assert {"text/html", "text/plain", widgets.WIDGET_VIEW_MIMETYPE} <= set(data), sorted(data)
    view = data[widgets.WIDGET_VIEW_MIMETYPE]
    assert view["model_id"] == explorer.widget.model_id
    assert view["version_major"] == 2
    assert data["text/plain"].startswith("<") and len(data["text/plain"]) < 200
    html = data["text/html"]
    frames = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)
    assert len(frames) >= 3  # the default frame plus >= 2 distinct images
    assert all(base64.b64decode(frame).startswith(b"\x89PNG\r\n\x1a\n") for frame in frames)
    assert "<script>" in html and "<script src" not in html
    assert not re.search(r"https?://", html)  # no CDN, no network


def test_widget_view_without_repr_mimebundle(monkeypatch, explorers):
    """ipywidgets 7 widgets have no _repr_mimebundle_: the explorer builds the view itself."""
    explorer = explorers["figure3"]
    for cls in type(explorer.widget).__mro__:
        if "_repr_mimebundle_" in vars(cls):
            monkeypatch.delattr(cls, "_repr_mimebundle_")
    assert not hasattr(explorer.widget, "_repr_mimebundle_")
    bundle = explorer._repr_mimebundle_(include={widgets.WIDGET_VIEW_MIMETYPE})
    assert bundle == {widgets.WIDGET_VIEW_MIMETYPE: {"version_major": 2, "version_minor": 0,
                                                      "model_id": explorer.widget.model_id}}


@pytest.mark.parametrize("name, control, value", [
    ("eigenvalue", "states", 2), ("hippo", "N", 16), ("discretization", "method", "zoh"),
    ("s4d", "N", 128), ("figure3", "N", 64), ("s5", "P", 16), ("selective", "gate", -8.0),
    ("duality", "token_step", 0.001),
])
def test_moving_a_control_redraws(name, control, value, explorers):
    explorer = explorers[name]
    before = explorer.image.value
    explorer.controls[control].value = value
    assert explorer.image.value != before
    assert explorer.image.value[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name, moves", [
    # Widens the eigenvalue axes, adds curves.
    ("eigenvalue", {"states": 8, "real": 0.4, "imag": 10.0}),
    ("hippo", {"measure": "legt", "N": 128, "theta": 0.05}),  # shows LegT's window line
    # Eigenvalues far outside the circle.
    ("discretization", {"method": "euler", "log10_step": 0.5}),
    ("s4d", {"init": "lin", "N": 256, "log10_step": -1.0}),
    ("figure3", {"N": 1024, "discretization": "bilinear"}),
    ("s5", {"P": 64, "J": 8, "log10_step": (-2.0, 0.0)}),
    ("selective", {"position": 40, "gate": -8.0}),
    ("duality", {"A": -0.25, "token_step": 0.001}),
])
def test_image_depends_on_the_values_only(name, moves):
    """Each explorer updates one figure in place: after its controls move and come back, the
    live image is byte for byte the one a new explorer opens on, and the website's frames
    are those of a new explorer."""
    fresh, moved = EXPLORERS[name](), EXPLORERS[name]()
    start = moved.image.value
    for control, value in moves.items():
        moved.controls[control].value = value
    assert moved.image.value != start
    for control in moves:
        moved.controls[control].value = moved.initial[control]
    assert moved.image.value == fresh.image.value
    assert _shrink_grid(moved).frames() == _shrink_grid(fresh).frames()


def test_static_html_is_deterministic():
    """Two explorers built alike give the same bytes (nbval compares the HTML), and the
    frames of different grid points differ."""
    first, second = (_shrink_grid(EXPLORERS["discretization"]()) for _ in range(2))
    assert first.static_html() == second.static_html()
    _, images, frames, _ = first.frames()
    assert len(images) == len(frames) == 4


def test_full_static_page_size():
    """The discretisation explorer's full page: one frame per grid point, within the budget."""
    explorer = EXPLORERS["discretization"]()
    html = explorer.static_html()
    assert len(html.encode()) <= MAX_STATIC_BYTES
    assert html.count("data:image/png;base64,") == 1 + len(explorer.frames().images)


def test_frames_follow_the_grid_order():
    """Frame k belongs to the k-th point of itertools.product over the grid, which is what the
    page's script computes (mixed radix, first control most significant)."""
    explorer = widgets.Explorer(lambda a, b: _text_figure(f"{a}-{b}"),
                                {"a": ipywidgets.IntSlider(value=1, min=0, max=3, description="a"),
                                 "b": ipywidgets.Dropdown(options=["x", "y"], value="y",
                                                          description="b")},
                                "test", grid={"a": [0, 1, 2], "b": ["x", "y"]})
    controls, images, frames, disabled = explorer.frames()
    assert [c.labels for c in controls] == [("0", "1", "2"), ("x", "y")]
    assert [c.default for c in controls] == [1, 1] and [c.slider for c in controls] == [True, False]
    assert len(images) == 6 and frames == list(range(6)) and disabled == [()] * 6
    for i in range(3):
        for j in range(2):
            k = static_explorer.frame_index(controls, [i, j])
            expected = explorer.render(palette=widgets.STATIC_COLORS, a=i, b="xy"[j])
            assert images[frames[k]] == expected


def _text_figure(text):
    fig = plt.figure(figsize=(1, 0.5), dpi=50)
    fig.text(0.1, 0.5, text)
    return fig


def test_bad_grid_and_frames():
    with pytest.raises(ValueError, match="grid must name controls"):
        widgets.Explorer(lambda a: _text_figure(a),
                         {"a": ipywidgets.Dropdown(options=["x"], value="x")}, "t",
                         grid={"b": [1]})
    control = static_explorer.StaticControl("a", "a", ("1", "2"), 0, True)
    with pytest.raises(ValueError, match="one entry per grid point"):
        static_explorer.static_html("t", [control], [b"x"], [0], mime="image/png")
    with pytest.raises(ValueError, match="frames must index images"):
        static_explorer.static_html("t", [control], [b"x"], [0, 1], mime="image/png")


@pytest.mark.parametrize("name, control, values", [
    ("s4d", "N", [16, 128, 256, 4]), ("figure3", "N", [16, 1024, 128]), ("s5", "P", [16, 64]),
    ("s5", "J", [1, 8]),
    ("hippo", "N", [2, 128, 64]),
])
def test_no_compilation_when_a_control_moves(name, control, values, explorers, caplog):
    """Padded to a fixed size, the explorers compile nothing when N, P or J moves."""
    explorer = explorers[name]
    explorer.figure()  # warm: the current setting is compiled
    with jax.log_compiles(True), caplog.at_level(logging.DEBUG):
        for value in values:
            explorer.controls[control].value = value
    compiled = [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
    assert not compiled, compiled[:3]


def test_explorer_numerics_imports_no_plotting_library():
    """The explorers' numbers need no matplotlib or ipywidgets (the library's modules are
    checked by tests/test_package_layout.py)."""
    code = ("import sys, annotated_ssm.book.explorer_numerics; "
            "bad = sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('matplotlib', 'ipywidgets', 'PIL')); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("module", ["widgets.py", "plotting.py", "explorer_figures.py",
                                    "static_explorer.py", "explorer_numerics.py"])
def test_imports_at_module_level(module):
    tree = ast.parse((ROOT / "annotated_ssm" / "book" / module).read_text())
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    functions = [f for f in ast.walk(tree) if isinstance(f, kinds)]
    inner = [node.lineno for function in functions
             for node in ast.walk(function) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert not inner, f"imports inside functions at lines {inner}"
