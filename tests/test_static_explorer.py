"""The static explorers, measured: their palette frames keep every line colour, and a
control that changes nothing for a setting is disabled there, live and on the page.

Each test builds real explorers (tests/test_widgets.py checks their display and speed) on
a small grid, so that it draws few frames.
"""

import io
import itertools
import re

import ipywidgets
import numpy as np
import pytest
from matplotlib.colors import to_rgba
from PIL import Image

from annotated_ssm.book import static_explorer, widgets
from test_widgets import EXPLORERS  # the explorers as test_widgets builds them

#: How far (0-255, per channel) a decoded pixel may be from a drawn colour.
TOLERANCE = 2

#: Two or three values per grid control, the explorer's default among them: enough to
#: see a control act or do nothing.
SMALL_GRIDS = {
    "eigenvalue": {"imag": [0.0, 3.0], "states": [1, 4]},
    "hippo": {"N": [8, 32], "measure": ["legs", "legt", "lagt"], "theta": [0.05, 2.0]},
    "discretization": {"log10_step": [-1.0, 0.0], "method": ["bilinear", "zoh"]},
    "s4d": {"init": ["legs", "real"], "N": [16, 64], "log10_step": [-2.0, -1.0]},
    "figure3": {"N": [16, 256], "discretization": ["zoh", "bilinear"]},
    "s5": {"P": [16, 32], "J": [1, 4], "log10_step": [(-3.0, -1.0), (-2.0, 0.0)]},
    "selective": {"position": [24, 8], "gate": [4.0, -8.0]},
    "duality": {"A": [-1.0, -4.0], "token_step": [10.0, 0.001]},
}


def _pixels(png: bytes) -> np.ndarray:
    """(M, 3) the distinct RGB colours of a decoded PNG, as ints."""
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
    return np.unique(rgb, axis=0).astype(int)


def _over_white(color, alpha=None) -> np.ndarray:
    """(3,) a matplotlib colour as 8-bit RGB, drawn over white."""
    r, g, b, a = to_rgba(color, alpha)
    return np.round(255 * (np.array([r, g, b]) * a + 1 - a))


def _missing(colors, png: bytes) -> list:
    """The colours (rows of ``colors``) that no pixel of ``png`` shows within TOLERANCE."""
    pixels = _pixels(png)
    return [tuple(int(v) for v in c) for c in colors
            if np.abs(pixels - c).max(axis=1).min() > TOLERANCE]


@pytest.mark.parametrize("name", ["figure3", "s5", "eigenvalue", "hippo"])
def test_static_frame_keeps_every_legend_colour(name):
    """The website's frame (a palette PNG) shows each legend line in its own colour (a
    32-colour median-cut palette draws Figure 3's K_0 (blue) in another colour and S5's
    three impulse responses in merged ones)."""
    explorer = EXPLORERS[name]()
    explorer.grid = {}  # one grid point: the default frame
    png = explorer.frames().images[0]
    fig = explorer.figure()
    handles = [h for ax in fig.axes if ax.get_legend() for h in ax.get_legend().legend_handles]
    colors = np.unique([_over_white(h.get_color(), h.get_alpha()) for h in handles], axis=0)
    assert len(colors) >= 2 and len(colors) == len(handles)  # distinct lines to tell apart
    assert not _missing(colors, png), f"legend colours {_missing(colors, png)} are lost"


def test_static_frame_keeps_s5_block_colours():
    """S5's eigenvalues are coloured by block: with J = 8 the frame shows all 8 colours."""
    explorer = EXPLORERS["s5"]()
    explorer.grid = {"J": [4, 8]}  # the default J = 4 must be on the grid
    static = explorer.frames()
    png = static.images[static.frames[1]]
    points = explorer.figure(J=8).axes[0].collections[-1]
    colors = np.unique([_over_white(c) for c in points.get_facecolor()], axis=0)
    assert len(colors) == 8
    assert not _missing(colors, png), f"block colours {_missing(colors, png)} are lost"


def test_palette_frames_stay_small():
    """The palette keeps the frames several times smaller than full colour."""
    explorer = EXPLORERS["s5"]()
    assert 3 * len(explorer.render(palette=widgets.STATIC_COLORS)) < len(explorer.render())


@pytest.mark.parametrize("palette", [0, 256, 2.5, True])
def test_bad_palette(palette):
    explorer = EXPLORERS["figure3"]()
    with pytest.raises(ValueError, match="palette"):
        widgets.figure_image(explorer.figure(), palette=palette)


@pytest.mark.parametrize("name", EXPLORERS)
def test_disabled_exactly_where_a_control_changes_nothing(name):
    """On a small grid, drawn at every point (no rules), a control gives one image for all
    of its values (others fixed) exactly where the static page disables it; and the page's
    frames, which draw a disabled control at its first value only, are those images."""
    explorer = EXPLORERS[name]()
    explorer.grid = SMALL_GRIDS[name]
    controls, images, frames, disabled = explorer.frames()
    explorer.inactive = {}  # every point drawn at its own values: what the controls do
    _, drawn_images, drawn, _ = explorer.frames()
    assert [images[i] for i in frames] == [drawn_images[i] for i in drawn]
    assert len(images) == len(set(images))  # each image stored once
    sizes = [len(c.labels) for c in controls]
    for point in itertools.product(*map(range, sizes)):
        for k, size in enumerate(sizes):
            line = {drawn[static_explorer.frame_index(controls, point[:k] + (i,) + point[k + 1:])]
                    for i in range(size)}
            idle = k in disabled[static_explorer.frame_index(controls, point)]
            assert (len(line) == 1) == idle, (controls[k].name, point, line)


@pytest.mark.parametrize("name, control, values, idle, active", [
    ("hippo", "theta", (0.05, 2.0), {"measure": "legs"}, {"measure": "legt"}),
    ("hippo", "theta", (0.05, 2.0), {"measure": "legs"}, {"measure": "lagt"}),
    ("eigenvalue", "imag", (0.0, 6.0), {"states": 1}, {"states": 2}),
    ("s4d", "real_part", (-0.5, -2.0), {"init": "real"}, {"init": "inv"}),
    ("s4d", "imag_scale", (1.0, 10.0), {"init": "real"}, {"init": "legs"}),
])
def test_live_control_disabled_where_it_changes_nothing(name, control, values, idle, active):
    """The live widget disables a control where it changes nothing, and enables it again
    where it acts (ipywidgets 7.7 and 8: the ``disabled`` trait)."""
    explorer = EXPLORERS[name]()
    widget = explorer.controls[control]
    for setting, disabled in ((idle, True), (active, False), (idle, True)):
        for other, value in setting.items():
            explorer.controls[other].value = value
        assert widget.disabled is disabled
        images = {explorer.render(**{control: v}) for v in values}
        assert (len(images) == 1) is disabled  # the control does change nothing there


def test_controls_that_always_act_are_never_disabled():
    explorer = EXPLORERS["hippo"]()
    for measure in ("legs", "legt", "lagt"):
        explorer.controls["measure"].value = measure
        assert not explorer.controls["N"].disabled and not explorer.controls["measure"].disabled


def test_static_page_writes_the_default_frames_disabled_controls():
    """HiPPO opens on LegS: the page's θ slider is disabled before any script runs, N and the
    measure are not, and the data lists θ as disabled at each LegS point."""
    explorer = EXPLORERS["hippo"]()
    explorer.grid = SMALL_GRIDS["hippo"]
    html = explorer.static_html()
    tags = dict(re.findall(r'<(?:input|select)[^>]*data-control="(\d)"([^>]*)>', html))
    assert " disabled" in tags["2"] and " disabled" not in tags["0"] + tags["1"]
    assert static_explorer.IDLE_NOTE in html
    _, _, _, disabled = explorer.frames()
    assert disabled == [(2,) if measure == "legs" else ()
                        for _, measure, _ in itertools.product(*SMALL_GRIDS["hippo"].values())]


def test_static_html_without_disabled_controls_carries_no_list():
    control = static_explorer.StaticControl("a", "a", ("1", "2"), 0, True)
    html = static_explorer.static_html("t", [control], [b"x", b"y"], [0, 1], mime="image/png")
    assert "disabled" not in html.split("<script>")[0]


@pytest.mark.parametrize("disabled", [[(0,)], [(0,), (1,)], [(), (-1,)]])
def test_bad_disabled(disabled):
    control = static_explorer.StaticControl("a", "a", ("1", "2"), 0, True)
    with pytest.raises(ValueError, match="disabled must hold"):
        static_explorer.static_html("t", [control], [b"x", b"y"], [0, 1], disabled,
                                    mime="image/png")


def test_bad_inactive():
    with pytest.raises(ValueError, match="inactive must name controls"):
        widgets.Explorer(lambda a: None, {"a": ipywidgets.IntSlider()}, "t",
                         inactive={"b": lambda values: True})


def test_the_note_says_what_the_static_page_moves_and_what_it_keeps_fixed():
    from annotated_ssm.book.static_explorer import StaticControl, static_html

    controls = [StaticControl("n", "N", ("16", "64"), 0, True),
                StaticControl("dt", "Δ", ("0.01", "0.1"), 0, True)]
    page = static_html("S4D", controls, [b"a"], [0] * 4, mime="image/png",
                       fixed=["Re A = -0.5", "method = zoh"])
    assert ("On this page only N and Δ move, over frames precomputed on a grid; Re A = -0.5 "
            "and method = zoh stay fixed. Run the notebook to change those and to move every "
            "control freely.") in page
    free = static_html("S4D", controls, [b"a"], [0] * 4, mime="image/png")
    assert ("Precomputed on a grid of values; run the notebook to move every control "
            "freely.") in free  # an explorer with nothing fixed: unchanged
