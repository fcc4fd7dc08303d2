"""The explorers' figures: as wide as the page at 100 dpi, with text a phone can still show."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from annotated_ssm import explorer_figures  # noqa: E402

T = np.linspace(0, 4, 50)


def _figures():
    basis = np.stack([np.cos(k * T) for k in range(4)])
    A = -0.5 + 1j * np.arange(8)
    return {
        "diagonal_ssm": lambda: explorer_figures.diagonal_ssm_figure(A[:4], T),
        "hippo": lambda: explorer_figures.hippo_explorer_figure(T, basis, np.sin(T), np.sin(T) + 0.01, measure="legt", N=4,
                                                        theta=2.0),
        "discretization": lambda: explorer_figures.discretization_explorer_figure(np.exp(0.1 * A), T, np.cos(T), np.cos(T[::5]),
                                                                          step=0.1, method="zoh"),
        "s4d": lambda: explorer_figures.s4d_explorer_figure(A, np.exp(0.1 * A), basis, np.cos(T), step=0.1, title="t"),
        "figure3": lambda: explorer_figures.figure3_explorer_figure(T, basis, basis, N=64, discretization="zoh"),
        "s5": lambda: explorer_figures.s5_system_figure(A, np.full(8, 0.1), np.exp(0.1 * A), {"out 0 ← in 0": np.cos(T)},
                                                blocks=2, title="t"),
    }


@pytest.mark.parametrize("name", list(_figures()))
def test_explorer_figures_fit_the_page_with_readable_text(name):
    fig = _figures()[name]()
    try:
        width_px = fig.get_size_inches()[0] * fig.dpi
        assert width_px == pytest.approx(750)  # 7.5 in at 100 dpi: the text column, no downscaling on a desktop
        sizes = [text.get_fontsize() for text in fig.findobj(matplotlib.text.Text) if text.get_text().strip()]
        assert sizes and min(sizes) >= 11, sorted(sizes)[:5]
    finally:
        plt.close(fig)


def test_page_style_does_not_leak():
    """The explorers' font sizes apply inside their figures only."""
    before = dict(plt.rcParams)
    plt.close(explorer_figures.figure3_explorer_figure(T, np.zeros((4, T.size)), np.zeros((4, T.size)), N=16,
                                               discretization="zoh"))
    assert plt.rcParams["font.size"] == before["font.size"]
