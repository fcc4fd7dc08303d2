"""Chapter 9's selective explorer: the hand-set S6 layer, its time-varying impulse
responses (checked against the layer itself), the figure and the widget.

tests/test_widgets.py and tests/test_static_explorer.py also run it through the checks
every explorer gets (display bundle, redraws, frames, disabled controls)."""

import logging

import jax
import numpy as np
import pytest
from flax import nnx

from annotated_ssm.book import explorer_figures, plotting, widgets
from annotated_ssm.book.explorer_numerics import gated_s6_layer, selective_responses
from annotated_ssm.layers import S6Layer


def _gated_input(gates, seed=0):
    content = np.random.default_rng(seed).standard_normal(len(gates))
    return np.stack([content, gates, np.ones(len(gates))], axis=1).astype(np.float32)


def test_responses_reproduce_the_layer_for_any_s6_layer():
    """y_t = Σ_s K[t, s] u_s + D u_t, with K from the selection of this very input."""
    layer = S6Layer(4, 8, rngs=nnx.Rngs(1))
    u = np.asarray(jax.random.normal(jax.random.key(2), (40, 4)), np.float32)
    y = np.asarray(layer(u), np.float64)
    D = np.asarray(layer.D[...], np.float64)
    for h in range(4):
        data = selective_responses(layer, u, channel=h)
        assert np.all(np.triu(data.responses, 1) == 0)  # causal: nothing from the future
        rebuilt = data.responses @ u[:, h] + D[h] * u[:, h]
        assert np.max(np.abs(rebuilt - y[:, h])) / np.max(np.abs(y[:, h])) < 1e-5
        np.testing.assert_allclose(data.step, np.asarray(layer.selection(u)[0])[:, h],
                                   rtol=1e-6)


def test_gated_layer_selects_by_its_gate():
    """Gate 0: the base step; very negative: Δ ≈ 0, the token is ignored (its response is
    ~0 and the earlier responses pass it unchanged); large: the state is reset (earlier
    responses drop by at least exp(-Δ))."""
    layer = gated_s6_layer(state_size=4, base_step=0.1)
    gates = np.zeros(24)
    gates[8], gates[16] = -12.0, 6.0
    data = selective_responses(layer, _gated_input(gates))
    np.testing.assert_allclose(data.step[[0, 7, 23]], 0.1, rtol=1e-5)
    assert data.step[8] < 1e-5 and data.step[16] > 3.0
    K = data.responses
    assert K[8, 8] < 1e-5 * K[7, 7]  # ignored token: almost no weight
    np.testing.assert_allclose(K[8, 0], K[7, 0], rtol=1e-4)  # and the past passes unchanged
    assert K[16, 0] < np.exp(-data.step[16]) * K[15, 0] * 1.0001  # reset: the past falls away
    assert K[16, 16] > 10 * K[15, 15]  # and the gated token is stored strongly
    # The layer's own output is what the responses say.
    u = _gated_input(gates)
    np.testing.assert_allclose(K @ u[:, 0], np.asarray(layer(u))[:, 0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kwargs, message", [
    (dict(u=np.zeros((5, 2))), r"u must have shape \(L, 3\)"),
    (dict(channel=3), r"channel must be an integer in \[0, 3\)"),
])
def test_bad_arguments(kwargs, message):
    arguments = dict(layer=gated_s6_layer(), u=np.zeros((5, 3)), channel=0) | kwargs
    with pytest.raises(ValueError, match=message):
        selective_responses(**arguments)


def test_figure_fits_the_page_with_readable_text():
    L = 20
    fig = explorer_figures.SelectiveFigure([1, 5]).update(
        np.full(L, 0.1), np.tril(np.ones((L, L))) * 0.1, position=7, title="t")
    assert fig.get_size_inches()[0] == pytest.approx(plotting.PAGE_WIDTH)
    assert plotting.smallest_text(fig)[0] >= plotting.MIN_TEXT_PX


def test_figure_rejects_mismatched_data():
    figure = explorer_figures.SelectiveFigure([1])
    with pytest.raises(ValueError, match="responses must have shape"):
        figure.update(np.ones(5), np.ones((4, 4)), position=1)
    with pytest.raises(ValueError, match="position"):
        figure.update(np.ones(5), np.ones((5, 5)), position=5)


def test_explorer_moves_without_compiling(caplog):
    explorer = widgets.selective_explorer()
    before = explorer.image.value
    with jax.log_compiles(True), caplog.at_level(logging.DEBUG):
        explorer.controls["position"].value = 10
        explorer.controls["gate"].value = -6.0
    compiled = [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
    assert not compiled, compiled[:3]
    assert explorer.image.value != before


def test_gate_and_position_both_act_on_the_static_page():
    explorer = widgets.selective_explorer()
    explorer.grid = {"position": [24, 8], "gate": [4.0, -8.0]}
    _, images, frames, disabled = explorer.frames()
    assert len(set(frames)) == 4 and disabled == [()] * 4


def test_chapter_9_first_figure_fits_the_page():
    """plotting.input_weights_figure is chapter 9's first figure: at most PAGE_WIDTH wide as
    the notebook stores it, its text at least MIN_TEXT_PX on a phone."""
    import io

    import matplotlib.pyplot as plt
    from PIL import Image

    weights = {"a": np.linspace(1, 2, 32), "b": np.linspace(2, 1, 32)}
    fig = plotting.input_weights_figure({"S4D (LTI)": weights, "S6 (selective)": weights},
                                        ylabel=r"$|\partial y_{31} / \partial u_s|$")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi, bbox_inches="tight")
    width = Image.open(io.BytesIO(buffer.getvalue())).size[0]
    assert width <= plotting.PAGE_WIDTH * plotting.FIGURE_DPI
    assert plotting.smallest_text(fig)[0] >= plotting.MIN_TEXT_PX
    plt.close(fig)


def test_title_names_the_base_step_even_when_the_first_token_is_gated():
    explorer = widgets.selective_explorer(position=0, gate=6.0)
    figure = explorer.draw(position=0, gate=6.0)
    title = figure.get_suptitle()
    assert title.startswith("gate 6 at token 0") and title.endswith("0.1 elsewhere"), title
