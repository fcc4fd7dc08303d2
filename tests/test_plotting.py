"""The chapters' figures keep their text legible where the website shows them.

The site scales every figure down to its text column: about 730 px on a desktop and about
368 px on a 400 px phone. Two kinds of figure:

- page-width figures (each chapter's first figure): 7.5 in at 100 dpi = 750 px, every text
  at least 11 pt (15 px, still ~7.5 px at the phone's 368 px column, like the explorers);
- the other figures, drawn in the book's style (``BOOK_STYLE``, 90 dpi): wherever the
  column shrinks them, their smallest text stays at least 9 px on a desktop.
"""

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from annotated_ssm.book import plotting  # noqa: E402
from annotated_ssm.book.display import BOOK_STYLE  # noqa: E402
from annotated_ssm.train import History  # noqa: E402

DESKTOP_COLUMN = 730  # px: the narrowest text column of the site on a desktop
MIN_DESKTOP_TEXT = 9  # px: the smallest text we accept there
T = np.linspace(0, 4, 60)


def _texts(fig):
    return [text for text in fig.findobj(matplotlib.text.Text) if text.get_text().strip()]


def _stored_width(fig) -> int:
    """The width in px of the PNG a notebook stores (cropped to the content, 0.1 in margin)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi, bbox_inches="tight")
    return Image.open(io.BytesIO(buffer.getvalue())).size[0]


# The combinations jax.lax.associative_scan makes for L = 8 (chapter 7 records them from JAX):
# three levels up, two down.
SCAN_LEVELS_8 = [
    [((0, 0), (1, 1)), ((2, 2), (3, 3)), ((4, 4), (5, 5)), ((6, 6), (7, 7))],
    [((0, 1), (2, 3)), ((4, 5), (6, 7))],
    [((0, 3), (4, 7))],
    [((0, 3), (4, 5))],
    [((0, 1), (2, 2)), ((0, 3), (4, 4)), ((0, 5), (6, 6))],
]
SCAN_LABELS_8 = ["up 1", "up 2", "up 3", "down 1", "down 2"]


def _page_figures():
    steps = 2.0 / 2.0 ** np.arange(4, 10)
    rules = {"euler": steps, "bilinear": steps**2, "zoh": np.full_like(steps, 1e-15)}
    lam = -0.5 + 1j * np.arange(1, 5)
    kernels = np.stack([np.exp(-s * np.arange(100)) for s in (0.01, 0.1)])
    basis = np.stack([np.sin((n + 1) * T) for n in range(4)])  # (4, T), as Figure 3's
    return {
        "forced_response": lambda: plotting.forced_response_figure(T, np.sin(T), np.cos(T), np.cos(T),
                                                                   rest=0.25),
        "signal": lambda: plotting.signal_figure(T, np.sin(T), title="the test signal u(t)"),
        "discretization_error": lambda: plotting.discretization_error_figure(
            steps, {"dense LegS (N = 8)": rules, "diagonal HiPPO-N (N = 4)": rules},
            {"on the grid": rules, "at mid-step": rules}, varying_title="u = sin 3t"),
        "s4_nodes": lambda: plotting.s4_nodes_figure(lam, 64, 0.1, resolvent_poles=-np.arange(1.0, 9.0)),
        "dss_kernels": lambda: plotting.dss_kernels_figure({"exp": kernels, "softmax": -kernels, "growing": kernels},
                                                           labels=["Δ = 0.01", "Δ = 0.1"]),
        "figure3": lambda: plotting.figure3(T, basis, basis / 2, {(256, "zoh"): -basis, (1024, "zoh"): basis,
                                                                  (1024, "bilinear"): basis}),
        "scan_tree": lambda: plotting.scan_tree_figure(SCAN_LEVELS_8, 8, level_labels=SCAN_LABELS_8,
                                                       title="jax.lax.associative_scan, L = 8"),
        "block_eigenvalues": lambda: plotting.block_eigenvalues_figure(
            {"J = 1 block": lam, "J = 2 blocks": lam / 2, "J = 4 blocks": lam / 4}, title="S5 eigenvalues"),
        "sequence_examples": lambda: plotting.sequence_examples(np.random.default_rng(0).standard_normal((10, 40, 1)),
                                                                np.arange(10), title="one example per class"),
    }


@pytest.mark.parametrize("name", list(_page_figures()))
def test_page_figures_fit_the_page_with_readable_text(name):
    fig = _page_figures()[name]()
    try:
        assert fig.get_size_inches()[0] * fig.dpi == pytest.approx(750)  # the column: no downscaling
        assert _stored_width(fig) <= 750  # what the notebook stores, cropped with its margin
        sizes = [text.get_fontsize() for text in _texts(fig)]
        assert sizes and min(sizes) >= 11, sorted(sizes)[:5]
    finally:
        plt.close(fig)


def _book_figures():
    history = History(epoch=[1, 2, 3], train_loss=[1.0, 0.5, 0.3], val_accuracy=[0.6, 0.8, 0.9], best_epoch=3)

    def on_axes(draw, figsize):
        fig, ax = plt.subplots(figsize=figsize)
        draw(ax)
        return fig

    kernels = np.stack([np.sin(T), np.cos(T)])
    lam = -0.5 + 1j * np.arange(1, 5)
    return {
        "basis_functions": lambda: on_axes(lambda ax: plotting.basis_functions(ax, T, kernels, title="basis"),
                                           (9, 2.8)),
        "history_reconstruction": lambda: on_axes(
            lambda ax: plotting.history_reconstruction(ax, T, np.sin(T), {"N = 8": np.sin(T)}, title="history"),
            (10, 3.4)),
        "kernel_fit": lambda: plotting.kernel_fit_figure(kernels, kernels, kernels, titles=["bump", "Hann"]),
        "skew_hippo": lambda: plotting.skew_hippo_figure(lam, -np.arange(1.0, 9.0), T),
        "figure4": lambda: plotting.figure4({"S4D-LegS": lam, "S4D-Lin": lam * 2}, 8),
        "scan_timing": lambda: plotting.scan_timing_figure([64, 128], {"sequential": [1e-3, 2e-3],
                                                                       "parallel": [1e-3, 1e-3]}),
        "irregular_sampling": lambda: plotting.irregular_sampling_figure(
            T, np.cos(T), T[::3], np.sin(T[::3]), {"S5 given the times": np.cos(T[::3])}),
        "learning_curves": lambda: plotting.learning_curves({"S4D": [history, history]}, references={"GRU": 0.91},
                                                            target=0.9),
        "digit_completions": lambda: plotting.digit_completions(np.full((8, 64), 0.5), np.full((8, 64), 0.5)),
    }


@pytest.mark.parametrize("name", list(_book_figures()))
def test_book_style_figures_stay_legible_in_the_desktop_column(name):
    with plt.rc_context(BOOK_STYLE):
        fig = _book_figures()[name]()
        try:
            shrink = min(1.0, DESKTOP_COLUMN / _stored_width(fig))
            smallest = min(text.get_fontsize() for text in _texts(fig)) * fig.dpi / 72 * shrink
            assert smallest >= MIN_DESKTOP_TEXT, f"smallest text {smallest:.1f} px at the desktop column"
        finally:
            plt.close(fig)


def test_page_style_does_not_leak():
    """Page-width figures change the font sizes inside themselves only."""
    before = plt.rcParams["font.size"], plt.rcParams["figure.dpi"]
    plt.close(plotting.signal_figure(T, np.sin(T)))
    assert (plt.rcParams["font.size"], plt.rcParams["figure.dpi"]) == before


def test_scan_tree_figure_draws_what_each_position_holds():
    """The last row of a complete scan holds every prefix c_0 • … • c_ℓ; bad ranges are refused."""
    fig = plotting.scan_tree_figure(SCAN_LEVELS_8, 8, level_labels=SCAN_LABELS_8)
    try:
        boxes = [text.get_text() for text in fig.axes[0].texts if text.get_text()]  # not the arrows
        assert len(boxes) == 8 * 6
        assert boxes[-8:] == ["0"] + [f"0–{i}" for i in range(1, 8)]
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="cannot combine"):
        plotting.scan_tree_figure([[((0, 1), (3, 3))]], 4)  # c_2 is missing between them
    with pytest.raises(ValueError, match="level labels"):
        plotting.scan_tree_figure(SCAN_LEVELS_8, 8, level_labels=["up"])


def test_figure3_takes_three_panels():
    basis = np.ones((4, len(T)))
    with pytest.raises(ValueError, match="three"):
        plotting.figure3(T, basis, basis, {(256, "zoh"): basis})

