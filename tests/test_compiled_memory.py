"""annotated_ssm.memory: XLA's planned temporaries of a layer (compiled, never run).

The plans' figures depend on the backend and the jax version (a GPU's compiler fuses more
than the CPU's, and adds workspaces of its own), so these tests compare plans of one
backend with each other: how a plan grows when the state size N or the length L grows.
Fixed workspaces cancel in a difference and only lower a ratio, and fusion only lowers a
plan, so the upper bounds below hold on any backend; each still fails if the layer starts
holding what the test says it does not.
"""

import functools
import re

import pytest
from flax import nnx

from annotated_ssm.layers import S4DLayer, S6Layer
from annotated_ssm.book.compiled_memory import planned_temp_bytes

B, H = 2, 16


@functools.cache
def plans(layer_class, N: int, L: int) -> tuple[int, int]:
    """(forward, training) planned temporary bytes of a layer for a float32 (B, L, H) input
    (each is a compilation: the tests share them)."""
    layer = layer_class(H, N, rngs=nnx.Rngs(0))
    return (planned_temp_bytes(layer, (B, L, H)),
            planned_temp_bytes(layer, (B, L, H), gradient=True))


def test_a_state_costs_the_convolution_only_its_kernel_tables():
    """Going from N = 16 to 128 states adds 112 states per channel: held for every step of
    every sequence (as the selective scan holds them), that is 112·B·L·H float32 numbers.
    S4D's convolution holds per state only its kernel's power tables, O(H·N·√L) (the FFTs
    are N-free): its plans grow by a small fraction of that (CPU: 2% forwards, 11% for
    training at L = 1024), below a quarter. An (H, N, L) Vandermonde matrix, or states per
    step, would be at least half of it and fail. The scan's plans grow by more than the
    convolution's."""
    L = 1024
    added_states = B * L * H * (128 - 16) * 4
    s4d_small, s4d_large = plans(S4DLayer, 16, L), plans(S4DLayer, 128, L)
    s6_small, s6_large = plans(S6Layer, 16, L), plans(S6Layer, 128, L)
    for mode in (0, 1):  # forward, training
        s4d_growth = s4d_large[mode] - s4d_small[mode]
        assert s4d_growth < added_states / 4, (mode, s4d_growth, added_states)
        assert s6_large[mode] - s6_small[mode] > s4d_growth, (mode, s6_small, s6_large)


@pytest.mark.parametrize("layer_class", [S4DLayer, S6Layer])
def test_plans_grow_linearly_with_the_length(layer_class):
    """Doubling L at most doubles what the scan and the FFT convolution hold (CPU: ×2.0 for
    both; the convolution's √L tables and fixed workspaces make it less), well below the ×4
    of anything quadratic in L (an L × L response matrix, as an explorer's reference builds):
    the bound is ×3, between the two."""
    short, long = plans(layer_class, 16, 512), plans(layer_class, 16, 1024)
    for mode in (0, 1):
        assert long[mode] <= 3 * short[mode], (mode, short, long)


@pytest.mark.parametrize("shape", [(2, 0, 4), [2, 8, 4], (2, 8.0, 4)])
def test_a_bad_shape_is_named(shape):
    with pytest.raises(ValueError, match=f"(?=.*shape)(?=.*{re.escape(repr(shape))})"):
        planned_temp_bytes(S4DLayer(4, 4, rngs=nnx.Rngs(0)), shape)
