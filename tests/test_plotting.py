"""The chapters' figures keep their text legible where the website shows them.

The site shows a figure at its drawn width, shrunk to the text column where it is wider:
about 730 px on a desktop, ``plotting.PHONE_COLUMN_PX`` (368 px) on a 400 px phone. Every
figure function draws ``plotting.PAGE_WIDTH`` wide in the book's style, and every visible
text of every figure (titles, labels, tick labels, legends, annotations) must measure at least
``plotting.MIN_TEXT_PX`` (9) CSS px in the phone's column.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from reference import message  # noqa: E402

from annotated_ssm.book import plotting  # noqa: E402
from annotated_ssm.book.display import BOOK_STYLE  # noqa: E402
from annotated_ssm.train import History  # noqa: E402

T = np.linspace(0, 4, 60)


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


def on_axes(draw):
    """A figure of the book's style with one Axes, drawn on by ``draw`` (the helpers that
    draw on a chapter's own Axes)."""
    with plt.rc_context(BOOK_STYLE):
        fig, ax = plt.subplots(layout="constrained")
        draw(ax)
    return fig


def _figures():
    """Every figure function of ``plotting`` (and its Axes helpers), with small inputs."""
    steps = 2.0 / 2.0 ** np.arange(4, 10)
    rules = {"euler": steps, "bilinear": steps**2, "zoh": np.full_like(steps, 1e-15)}
    lam = -0.5 + 1j * np.arange(1, 5)
    kernels = np.stack([np.exp(-s * np.arange(100)) for s in (0.01, 0.1)])
    waves = np.stack([np.sin(T), np.cos(T)])
    basis = np.stack([np.sin((n + 1) * T) for n in range(4)])  # (4, T), as Figure 3's
    history = History(epoch=[1, 2, 3], train_loss=[1.0, 0.5, 0.3], val_accuracy=[0.6, 0.8, 0.9], best_epoch=3)
    weights = {"a": np.linspace(1, 2, 32), "b": np.linspace(2, 1, 32)}
    return {
        "forced_response_figure": lambda: plotting.forced_response_figure(T, np.sin(T), np.cos(T), np.cos(T),
                                                                          rest=0.25),
        "signal_figure": lambda: plotting.signal_figure(T, np.sin(T), title="the test signal u(t)"),
        "discretization_error_figure": lambda: plotting.discretization_error_figure(
            steps, {"dense LegS (N = 8)": rules, "diagonal HiPPO-N (N = 4)": rules},
            {"on the grid": rules, "at mid-step": rules}, varying_title="u = sin 3t"),
        "s4_nodes_figure": lambda: plotting.s4_nodes_figure(lam, 64, 0.1, resolvent_poles=-np.arange(1.0, 9.0)),
        "kernel_fit_figure": lambda: plotting.kernel_fit_figure(waves, waves, waves, titles=["bump", "Hann"]),
        "dss_kernels_figure": lambda: plotting.dss_kernels_figure(
            {"exp": kernels, "softmax": -kernels, "growing": kernels}, labels=["Δ = 0.01", "Δ = 0.1"]),
        "skew_hippo_figure": lambda: plotting.skew_hippo_figure(lam, -np.arange(1.0, 9.0), T),
        "figure3": lambda: plotting.figure3(T, basis, basis / 2, {(256, "zoh"): -basis, (1024, "zoh"): basis,
                                                                  (1024, "bilinear"): basis}),
        "figure4": lambda: plotting.figure4({"S4D-LegS": lam, "S4D-Lin": lam * 2}, 8),
        "block_eigenvalues_figure": lambda: plotting.block_eigenvalues_figure(
            {"J = 1 block": lam, "J = 2 blocks": lam / 2, "J = 4 blocks": lam / 4}, title="S5 eigenvalues"),
        "scan_tree_figure": lambda: plotting.scan_tree_figure(SCAN_LEVELS_8, 8, level_labels=SCAN_LABELS_8,
                                                              title="jax.lax.associative_scan, L = 8"),
        "scan_timing_figure": lambda: plotting.scan_timing_figure(
            [64, 128], {"sequential": [1e-3, 2e-3], "parallel": [1e-3, 1e-3]},
            title="measured on cpu (P = 64 complex states, best of 3 calls)"),
        "irregular_sampling_figure": lambda: plotting.irregular_sampling_figure(
            T, np.cos(T), T[::3], np.sin(T[::3]), {"S5 given the times": np.cos(T[::3])}),
        "sequence_examples": lambda: plotting.sequence_examples(
            np.random.default_rng(0).standard_normal((10, 40, 1)), np.arange(10), title="one example per class"),
        "learning_curves": lambda: plotting.learning_curves({"S4D": [history, history]},
                                                            references={"GRU": 0.91}, target=0.9),
        "digit_completions": lambda: plotting.digit_completions(np.full((8, 64), 0.5), np.full((8, 64), 0.5)),
        "accuracy_bars_figure": lambda: plotting.accuracy_bars_figure(
            {"S4": [0.93, 0.94, 0.92], "DSS": [0.91, 0.95, 0.9]}, chance=0.1),
        "mode_survival_figure": lambda: plotting.mode_survival_figure(
            {"S4D-LegS": np.exp(-0.001 + 0.2j * np.arange(1, 9)), "S4D-Rand": np.exp(lam * 0.01)},
            steps=984, turn=2 * np.pi / 40),
        "delta_by_token_figure": lambda: plotting.delta_by_token_figure(np.linspace(0.05, 0.2, 32),
                                                                        np.full(32, 0.02)),
        "input_weights_figure": lambda: plotting.input_weights_figure(
            {"S4D (LTI)": weights, "S6 (selective)": weights}, ylabel=r"$|\partial y_{31} / \partial u_s|$"),
        "mamba_block_figure": lambda: plotting.mamba_block_figure(expand=2, d_conv=4),
        "kernel_lengths_figure": lambda: plotting.kernel_lengths_figure(
            {"DSS-exp": (kernels[0], kernels[0]), "DSS-softmax: 34% apart": (kernels[0], kernels[1]),
             "S4D": (kernels[1], kernels[1])}, short=100, long=200),
        # The helpers that draw on a chapter's Axes, in the book's default figure.
        "complex_plane": lambda: on_axes(lambda ax: plotting.complex_plane(ax, lam, unit_circle=True, label="λ")),
        "basis_functions": lambda: on_axes(lambda ax: plotting.basis_functions(ax, T, waves, title="basis")),
        "history_reconstruction": lambda: on_axes(lambda ax: plotting.history_reconstruction(
            ax, T, np.sin(T), {"N = 8": np.sin(T)}, title="history")),
        "figure3_panel": lambda: on_axes(lambda ax: plotting.figure3_panel(ax, T, basis, exact=basis, title="(a)")),
        "stability_map_figure": lambda: plotting.stability_map_figure(
            np.linspace(-4, 1, 41), np.linspace(-3, 3, 49),
            {rule: np.abs(1 + np.linspace(-4, 1, 41) + 1j * np.linspace(-3, 3, 49)[:, None])
             for rule in ("euler", "bilinear", "zoh")},
            points=lam / 4, points_label="Δλ",
            stable={rule: np.abs(1 + lam / 4) < 1 for rule in ("euler", "bilinear", "zoh")},
            inset=(np.linspace(-0.1, 0.1, 9), np.linspace(-0.5, 0.5, 11),
                   np.abs(1 + np.linspace(-0.1, 0.1, 9)
                          + 1j * np.linspace(-0.5, 0.5, 11)[:, None]))),
        "s4_init_kernels_figure": lambda: plotting.s4_init_kernels_figure(
            {"Δ = 0.001": kernels[0], "Δ = 0.1": np.cos(np.arange(100.0)) * kernels[1]},
            {"Δ = 0.001": 99, "Δ = 0.1": 46}),
        "folded_kernel_figure": lambda: plotting.folded_kernel_figure(
            kernels[1], 25, kernels[1][:25], kernels[1][:25]),
        "c_tilde_gap_figure": lambda: plotting.c_tilde_gap_figure(
            T + 0.1, {"Δ = 0.001": np.exp(-T), "Δ = 0.1": np.exp(-T)},
            marked={"L = 64, Δ = 0.1": (2.0, 0.1), "L = 1024": (3.5, 0.01)}),
    }


#: The names in plotting.__all__ that are not figures: the style and the measuring helpers.
NOT_FIGURES = {"PAGE_WIDTH", "FIGURE_DPI", "PHONE_COLUMN_PX", "MIN_TEXT_PX", "MIN_FONT_PT", "PAGE_STYLE",
               "page_style", "page_figure", "shown_text_px", "smallest_text"}


def test_every_figure_function_is_measured():
    assert set(plotting.__all__) - NOT_FIGURES == set(_figures())


def assert_readable_on_a_phone(fig):
    """Every visible text of ``fig`` is at least MIN_TEXT_PX in the phone's column."""
    px, text = plotting.smallest_text(fig)
    assert px >= plotting.MIN_TEXT_PX, (
        f"{text.get_text()!r} at {text.get_fontsize():g} pt is {px:.1f} px at "
        f"{plotting.PHONE_COLUMN_PX} px (at least {plotting.MIN_TEXT_PX})")


@pytest.mark.parametrize("name", list(_figures()))
def test_figure_text_is_readable_on_a_phone(name):
    fig = _figures()[name]()
    try:
        assert_readable_on_a_phone(fig)
        # Drawn for the page: not shrunk on a desktop, and the style's resolution.
        assert fig.get_size_inches()[0] == pytest.approx(plotting.PAGE_WIDTH)
        assert fig.dpi == plotting.FIGURE_DPI
    finally:
        plt.close(fig)


def test_a_small_legend_is_caught():
    """A planted 8 pt legend (5.4 px at 368 px in a 6 in figure) fails the check."""
    fig = plotting.signal_figure(T, np.sin(T))
    try:
        assert_readable_on_a_phone(fig)
        fig.axes[0].plot(T, np.cos(T), label="planted")
        fig.axes[0].legend(fontsize=8)
        px, text = plotting.smallest_text(fig)
        assert text.get_text() == "planted" and px == pytest.approx(8 / 72 * 368 / 6.0, rel=0.02)
        with pytest.raises(AssertionError, match="planted"):
            assert_readable_on_a_phone(fig)
    finally:
        plt.close(fig)


def test_shown_text_px_follows_the_column():
    """A text of p pt in a W in figure is p / 72 * 368 / W px in the phone's column whatever
    the dpi (the issue's measurement: 8 pt in a 750 px figure is ~5.5 px), and its drawn size
    in a column wider than the figure."""
    for dpi in (72, 100, 200):
        fig = Figure(figsize=(7.5, 2), dpi=dpi)
        fig.text(0.5, 0.5, "label", fontsize=8)  # inside the figure: drawn 7.5 in wide
        assert plotting.shown_text_px(fig, 8) == pytest.approx(8 / 72 * 368 / 7.5)
        assert plotting.shown_text_px(fig, 8, column_px=10_000) == pytest.approx(8 * dpi / 72)


def test_the_style_follows_its_rule():
    """MIN_FONT_PT at PAGE_WIDTH gives MIN_TEXT_PX on the phone, and no font of the style is
    smaller."""
    assert plotting.MIN_FONT_PT / 72 * plotting.PHONE_COLUMN_PX / plotting.PAGE_WIDTH >= plotting.MIN_TEXT_PX
    sizes = {key: value for key, value in plotting.PAGE_STYLE.items() if "size" in key and "fig" not in key}
    assert min(sizes.values()) >= plotting.MIN_FONT_PT, sizes
    assert BOOK_STYLE["figure.figsize"][0] == plotting.PAGE_WIDTH


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
    with pytest.raises(ValueError, match=message("(0, 1)", "(3, 3)")):
        plotting.scan_tree_figure([[((0, 1), (3, 3))]], 4)  # c_2 is missing between them
    with pytest.raises(ValueError, match=message("level labels", "1")):
        plotting.scan_tree_figure(SCAN_LEVELS_8, 8, level_labels=["up"])


def test_figure3_takes_three_panels():
    basis = np.ones((4, len(T)))
    with pytest.raises(ValueError, match=message("panels", "three", "1")):
        plotting.figure3(T, basis, basis, {(256, "zoh"): basis})



def test_accuracy_bars_draw_mean_and_sample_deviation():
    fig = plotting.accuracy_bars_figure({"a": [0.9, 0.92, 0.94], "b": [0.8, 0.8, 0.8]})
    bars = fig.axes[0].patches
    assert [round(b.get_height(), 6) for b in bars] == [92.0, 80.0]
    plt.close(fig)


def test_mode_survival_counts_the_useful_modes():
    # two modes that keep their amplitude, one turning fast enough, one not; one that fades
    A_bar = np.array([np.exp(0.5j), np.exp(0.01j), 0.5 * np.exp(0.5j)])
    fig = plotting.mode_survival_figure({"x": A_bar}, steps=100, turn=0.1)
    assert fig.axes[0].get_title() == "x: 1 of 3 modes useful"
    plt.close(fig)


def test_delta_by_token_counts_the_opened_channels():
    fig = plotting.delta_by_token_figure([0.4, 0.05, 0.1], [0.1, 0.1, 0.01])
    assert fig.axes[0].get_title().startswith("2 of 3 channels")
    plt.close(fig)


def test_mamba_block_figure_draws_the_blocks_settings():
    fig = plotting.mamba_block_figure(expand=3, d_conv=5)
    texts = [text.get_text() for text in fig.axes[0].texts]
    assert any("E = 3H" in text for text in texts)
    assert any("W = 5" in text and "last 4 inputs (B, 4, E)" in text for text in texts)
    plt.close(fig)


def test_key_figure_is_glued_as_myst_nb_reads_it():
    """display.key_figure's output is what myst-nb's glue extracts under KEY_FIGURE."""
    pytest.importorskip("myst_nb")
    import nbformat
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from myst_nb.ext.glue import extract_glue_data_cell

    from annotated_ssm.book.display import KEY_FIGURE, key_figure

    from matplotlib_inline.backend_inline import set_matplotlib_formats

    InteractiveShell.instance()
    set_matplotlib_formats("png")  # what a notebook's inline backend registers
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    with capture_output() as captured:
        key_figure(fig)
    (output,) = captured.outputs
    cell = nbformat.from_dict({"cell_type": "code", "outputs": [
        {"output_type": "display_data", "data": output.data, "metadata": output.metadata}]})
    ((name, glued),) = extract_glue_data_cell(cell)
    assert name == KEY_FIGURE and "image/png" in glued["data"]
    assert not plt.fignum_exists(fig.number)  # closed: the notebook does not draw it again
