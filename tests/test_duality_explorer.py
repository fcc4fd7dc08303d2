"""Chapter 10's duality explorer: SSD's decay mask (checked against a product of decays
written out), what a token's Δ does to it, the figure and the widget.

tests/test_widgets.py and tests/test_static_explorer.py also run it through the checks
every explorer gets (display bundle, redraws, frames, disabled controls)."""

import logging

import jax
import numpy as np
import pytest

from annotated_ssm.book import explorer_figures, plotting, widgets
from annotated_ssm.book.explorer_numerics import decay_mask


def test_mask_is_the_product_of_the_decays():
    """L[t, s] = a_{s+1} ⋯ a_t with a_k = exp(Δ_k A), 1 on the diagonal, 0 above it."""
    step = np.random.default_rng(0).uniform(0.01, 0.5, size=20)
    A = -1.7
    expected = np.zeros((20, 20))
    for t in range(20):
        for s in range(t + 1):
            expected[t, s] = np.prod(np.exp(step[s + 1:t + 1] * A))
    mask = decay_mask(step, A)
    assert mask.dtype == np.float64 and mask.shape == (20, 20)
    assert np.all(np.triu(mask, 1) == 0) and np.all(np.diag(mask) == 1)
    np.testing.assert_allclose(mask, expected, rtol=1e-5)


def test_one_tokens_step_cuts_or_passes_the_past():
    """Equal steps: constant along the diagonals (a convolution). A large Δ at token k: every
    entry with s < k <= t falls by exp(Δ_k A); a tiny one: they pass almost unchanged."""
    step = np.full(32, 0.1)
    equal = decay_mask(step, -1.0)
    np.testing.assert_allclose(equal[1:, 1:], equal[:-1, :-1], rtol=1e-5)
    step[12] = 10.0
    cut = decay_mask(step, -1.0)
    assert cut[12:, :12].max() <= np.exp(-10.0) * 1.0001
    np.testing.assert_allclose(cut[12:, 12:], equal[12:, 12:], rtol=1e-5)  # after it: as before
    np.testing.assert_allclose(cut[:12, :12], equal[:12, :12], rtol=1e-5)  # before it: too
    step[12] = 1e-3
    passed = decay_mask(step, -1.0)
    np.testing.assert_allclose(passed[13:, :12], equal[12:-1, :12] * np.exp(-1e-3), rtol=1e-5)


@pytest.mark.parametrize("step, A, message", [
    (np.ones((2, 2)), -1.0, "step must be a non-empty 1-D array"),
    (np.array([0.1, 0.0]), -1.0, "step must be a non-empty 1-D array of finite numbers > 0"),
    (np.array([0.1, np.nan]), -1.0, "finite numbers > 0"),
    (np.ones(3), 0.0, r"A must be a finite number in \[-inf, 0.0\); got 0.0"),
    (np.ones(3), np.inf, "A must be a finite number"),
])
def test_bad_arguments(step, A, message):
    with pytest.raises(ValueError, match=message):
        decay_mask(step, A)


def test_figure_fits_the_page_with_readable_text():
    fig = explorer_figures.DecayMaskFigure().update(decay_mask(np.full(32, 0.1), -1.0),
                                                    position=12, title="t")
    assert fig.get_size_inches()[0] == pytest.approx(plotting.PAGE_WIDTH)
    assert plotting.smallest_text(fig)[0] >= plotting.MIN_TEXT_PX


def test_figure_rejects_mismatched_data():
    figure = explorer_figures.DecayMaskFigure()
    with pytest.raises(ValueError, match="mask must be a square"):
        figure.update(np.ones((4, 5)), position=1)
    with pytest.raises(ValueError, match="position"):
        figure.update(np.ones((5, 5)), position=5)


def test_explorer_moves_without_compiling(caplog):
    explorer = widgets.duality_explorer()
    before = explorer.image.value
    with jax.log_compiles(True), caplog.at_level(logging.DEBUG):
        explorer.controls["A"].value = -0.25
        explorer.controls["token_step"].value = 0.001
    compiled = [r.getMessage() for r in caplog.records if "Compiling" in r.getMessage()]
    assert not compiled, compiled[:3]
    assert explorer.image.value != before


def test_both_controls_act_on_the_static_page():
    explorer = widgets.duality_explorer()
    explorer.grid = {"A": [-1.0, -4.0], "token_step": [10.0, 0.001]}
    _, images, frames, disabled = explorer.frames()
    assert len(set(frames)) == 4 and disabled == [()] * 4
