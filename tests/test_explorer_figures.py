"""The explorers' figures: as wide as the page, with text a phone can still show (>= 9 px when
the 400 px phone's 368 px column shrinks them)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from annotated_ssm.book import explorer_figures, plotting  # noqa: E402

T = np.linspace(0, 4, 50)


def _figures():
    """Each explorer's figure, built and updated once with small made-up data."""
    basis = np.stack([np.cos(k * T) for k in range(4)])
    A = -0.5 + 1j * np.arange(8)
    return {
        "diagonal_ssm": lambda: explorer_figures.DiagonalSSMFigure().update(
            A[:4], T, np.cos(T), basis.T),
        "hippo": lambda: explorer_figures.HiPPOFigure().update(
            T, basis, np.sin(T), np.sin(T) + 0.01, measure="legt", N=4, theta=2.0),
        "discretization": lambda: explorer_figures.DiscretizationFigure().update(
            np.exp(0.1 * A), T, np.cos(T), np.cos(T[::5]), step=0.1, method="zoh"),
        "s4d": lambda: explorer_figures.S4DFigure().update(
            A, np.exp(0.1 * A), basis, np.cos(T), step=0.1, title="t"),
        "figure3": lambda: explorer_figures.Figure3Figure(T, basis).update(
            basis, N=64, discretization="zoh"),
        "s5": lambda: explorer_figures.S5Figure(["out 0 ← in 0"]).update(
            A, np.full(8, 0.1), np.exp(0.1 * A), np.cos(T)[None], blocks=2, title="t"),
        "selective": lambda: explorer_figures.SelectiveFigure([1, 5, 20]).update(
            np.logspace(-5, 1, 48), np.tril(np.full((48, 48), 0.01)), position=24, title="t"),
        "decay_mask": lambda: explorer_figures.DecayMaskFigure(chunk_size=8).update(
            np.tril(np.full((32, 32), 0.5)), position=12, title="t"),
    }


def test_every_explorer_figure_is_measured():
    assert len(explorer_figures.__all__) == len(_figures())


@pytest.mark.parametrize("name", list(_figures()))
def test_explorer_figures_fit_the_page_with_readable_text(name):
    fig = _figures()[name]()
    # The page's width, drawn unscaled on a desktop; the website's frames are not cropped, so
    # nothing may be drawn outside the figure.
    assert fig.get_size_inches()[0] == pytest.approx(plotting.PAGE_WIDTH)
    fig.draw_without_rendering()
    content, whole = fig.get_tightbbox(), fig.bbox_inches
    assert content.x0 >= 0 and content.y0 >= 0 and content.x1 <= whole.x1 and content.y1 <= whole.y1
    # The tick labels are made when the figure is drawn, outside the page style as the
    # widget's PNG is: they keep the style's sizes all the same.
    px, text = plotting.smallest_text(fig)
    assert px >= plotting.MIN_TEXT_PX, f"{text.get_text()!r}: {px:.1f} px on a phone"


def test_page_style_does_not_leak():
    """The explorers' font sizes apply inside their figures only."""
    before = dict(plt.rcParams)
    zeros = np.zeros((4, T.size))
    explorer_figures.Figure3Figure(T, zeros).update(zeros, N=16, discretization="zoh")
    assert plt.rcParams["font.size"] == before["font.size"]


def test_figures_stay_out_of_pyplot():
    """pyplot does not hold the explorers' figures (it would keep them alive, and Jupyter's
    inline backend would show each one under the cell that made its explorer)."""
    before = plt.get_fignums()
    _figures()["s5"]()
    assert plt.get_fignums() == before


@pytest.mark.parametrize("points", [np.exp(0.1 * (-0.5 + 1j * np.arange(8))),
                                    np.array([0.5 + 12j, 3.0 - 0.2j])])
def test_unit_circle_stays_round(points):
    """The discrete eigenvalue panels set equal-aspect limits themselves (from the points
    alone): one unit is as long on both axes, and matplotlib's own aspect adjustment,
    which would depend on earlier data, finds nothing to change."""
    fig = explorer_figures.DiscretizationFigure().update(points, T, np.cos(T), np.cos(T[::5]),
                                                         step=0.1, method="zoh")
    ax = fig.axes[0]
    limits = ax.get_xlim(), ax.get_ylim()
    fig.canvas.draw()
    assert (ax.get_xlim(), ax.get_ylim()) == limits
    box = ax.get_window_extent()
    x_per_pixel, y_per_pixel = np.ptp(ax.get_xlim()) / box.width, np.ptp(ax.get_ylim()) / box.height
    assert x_per_pixel == pytest.approx(y_per_pixel, rel=1e-3)
    for z in (*points, 1, -1, 1j, -1j):  # the points and the whole circle are in view
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert x0 < z.real < x1 and y0 < np.imag(z) < y1
