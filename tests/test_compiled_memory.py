"""annotated_ssm.book.compiled_memory: XLA's planned temporaries of a layer (compiled, not run)."""

import pytest
from flax import nnx

from annotated_ssm.layers import S4DLayer, S6Layer
from annotated_ssm.book.compiled_memory import planned_temp_bytes


def test_the_whole_scan_plans_its_states_the_chunked_scan_and_the_convolution_do_not():
    B, L, H, N = 2, 256, 16, 16  # N as in Mamba
    states = B * L * H * N * 4  # one float32 copy of the selective layer's states
    whole = S6Layer(H, N, chunk_size=None, rngs=nnx.Rngs(0))  # one parallel scan over L
    forward = planned_temp_bytes(whole, (B, L, H))
    training = planned_temp_bytes(whole, (B, L, H), gradient=True)
    assert states <= forward < training  # the scan holds at least one copy; training more
    chunked = S6Layer(H, N, chunk_size=16, rngs=nnx.Rngs(0))  # 16 chunks of 16 steps
    assert planned_temp_bytes(chunked, (B, L, H), gradient=True) < states
    s4d = S4DLayer(H, N, rngs=nnx.Rngs(0))
    assert planned_temp_bytes(s4d, (B, L, H), gradient=True) < states


@pytest.mark.parametrize("shape", [(2, 0, 4), [2, 8, 4], (2, 8.0, 4)])
def test_a_bad_shape_is_named(shape):
    with pytest.raises(ValueError, match="shape must be a tuple of positive integers"):
        planned_temp_bytes(S4DLayer(4, 4, rngs=nnx.Rngs(0)), shape)
