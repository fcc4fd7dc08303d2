"""annotated_ssm.book.compiled_memory: XLA's planned temporaries of a layer (compiled, not run)."""

import pytest
from flax import nnx

from annotated_ssm.layers import S4DLayer, S6Layer
from annotated_ssm.book.compiled_memory import planned_temp_bytes


def test_the_scan_plans_its_states_and_the_convolution_does_not():
    B, L, H, N = 2, 256, 16, 16  # N as in Mamba
    states = B * L * H * N * 4  # one float32 copy of the selective layer's states
    s6, s4d = S6Layer(H, N, rngs=nnx.Rngs(0)), S4DLayer(H, N, rngs=nnx.Rngs(0))
    forward = planned_temp_bytes(s6, (B, L, H))
    training = planned_temp_bytes(s6, (B, L, H), gradient=True)
    assert states <= forward < training  # the scan holds at least one copy; training more
    assert planned_temp_bytes(s4d, (B, L, H), gradient=True) < states


@pytest.mark.parametrize("shape", [(2, 0, 4), [2, 8, 4], (2, 8.0, 4)])
def test_a_bad_shape_is_named(shape):
    with pytest.raises(ValueError, match="shape must be a tuple of positive integers"):
        planned_temp_bytes(S4DLayer(4, 4, rngs=nnx.Rngs(0)), shape)
