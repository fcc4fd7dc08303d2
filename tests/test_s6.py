"""S6, the selective layer: its parameterisation and a float64 sequential reference.

The shared contract (shapes, dtypes, recurrence = scan, gradients against finite
differences) is in test_layer_contract.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import message, relative_error

from annotated_ssm.layers import S6Layer
from annotated_ssm.book.compiled_memory import planned_temp_bytes



def reference_s6(layer: S6Layer, u: np.ndarray) -> np.ndarray:
    """The selective recurrence one step at a time in float64 NumPy, from the parameters.

    u: (L, H) -> y (L, H). Written from the equations of Mamba's Algorithm 2, not from the
    layer's code: Δ = softplus(W_Δ (W_x u)_Δ + b), x ← exp(ΔA) x + Δ B u, y = C·x + D u.
    """
    f64 = lambda x: np.asarray(x, np.float64)  # noqa: E731
    A = -np.exp(f64(layer.log_A_real[...]))  # (H, N)
    W_x, W_dt, D = f64(layer.x_proj.kernel[...]), f64(layer.dt_proj.kernel[...]), f64(layer.D[...])
    step0 = np.exp(f64(layer.log_step_size[...]))
    bias = np.log(np.expm1(step0))  # softplus(bias) = exp(log_step_size)
    R, N = layer.dt_rank, layer.state_size
    x = np.zeros(A.shape)
    y = np.empty(u.shape)
    for ell, u_t in enumerate(f64(u)):
        p = u_t @ W_x
        step = np.logaddexp(0.0, p[:R] @ W_dt + bias)  # softplus, (H,)
        B, C = p[R:R + N], p[R + N:]
        x = np.exp(step[:, None] * A) * x + (step * u_t)[:, None] * B[None, :]
        y[ell] = x @ C + D * u_t
    return y


def test_initialised_as_mamba():
    layer = S6Layer(8, 16, rngs=nnx.Rngs(0))
    assert layer.dt_rank == 1  # ⌈8/16⌉
    np.testing.assert_allclose(layer.eigenvalues(), -np.arange(1, 17)[None].repeat(8, 0), rtol=2e-7)
    # Where the projection is zero, Δ is exp(log_step_size), the base step of every layer.
    step, B, C = layer.selection(jnp.zeros((3, 8)))
    np.testing.assert_allclose(step, np.broadcast_to(layer.step_sizes(), (3, 8)), rtol=1e-5)
    assert not np.any(B) and not np.any(C)


@pytest.mark.parametrize("length", [64, 16384])
def test_float32_scan_matches_float64_sequential_reference(length):
    layer = S6Layer(4, 16, rngs=nnx.Rngs(1))
    u = np.asarray(jax.random.normal(jax.random.key(2), (length, 4)))
    expected = reference_s6(layer, u)
    assert relative_error(layer(u), expected) < 1e-5
    if length <= 64:
        assert relative_error(layer.recurrent(u), expected) < 1e-5


@pytest.mark.parametrize(("chunk_size", "within_chunk", "bidirectional"),
                         [(None, None, True), (1, "sequential", False), (7, "sequential", True),
                          (7, "associative", False), (16, "associative", True), (50, "sequential", False),
                          (64, None, False)])  # L = 50: a partial last chunk, backwards too, in both modes
def test_chunk_sizes_match_float64_reference(chunk_size, within_chunk, bidirectional):
    layer = S6Layer(4, 16, chunk_size=chunk_size, within_chunk=within_chunk,
                    bidirectional=bidirectional, rngs=nnx.Rngs(1))
    u = np.asarray(jax.random.normal(jax.random.key(2), (2, 50, 4)))
    expected = np.stack([reference_s6(layer, x) for x in u])
    if bidirectional:  # the same SSM backwards in time, without D a second time
        backward = np.stack([reference_s6(layer, x[::-1])[::-1] for x in u])
        expected = expected + backward - np.asarray(layer.D[...], np.float64) * u
    assert relative_error(layer(u), expected) < 1e-5
    with jax.enable_x64(True):
        assert relative_error(layer(u.astype(np.float64)), expected) < 1e-12


def test_chunked_and_all_at_once_agree_to_float32_rounding():
    u = jax.random.normal(jax.random.key(5), (2, 300, 8))
    chunked, whole = (S6Layer(8, 16, chunk_size=size, bidirectional=True, rngs=nnx.Rngs(4))
                      for size in (64, None))
    assert relative_error(chunked(u), whole(u)) < 1e-6

    def gradients(layer):
        graphdef, params = nnx.split(layer)
        return jax.grad(lambda p: jnp.sum(nnx.merge(graphdef, p)(u) ** 2))(params)

    for g, e in zip(jax.tree.leaves(gradients(chunked)), jax.tree.leaves(gradients(whole))):
        assert relative_error(g, e) < 1e-5


def test_training_memory_is_linear_in_inputs_not_states():
    # XLA's plan (compiled, never run) for the gradient: a few copies of the inputs and
    # outputs, B·L·(H + N) numbers, plus one chunk of states and one carried state per
    # chunk; never the B·L·H·N states of all steps. Doubling L adds what the inputs add.
    B, H, N, T = 2, 32, 64, 64
    layer = S6Layer(H, N, chunk_size=T, rngs=nnx.Rngs(0))
    plan = {L: planned_temp_bytes(layer, (B, L, H), gradient=True) for L in (1024, 2048)}
    inputs = lambda L: B * L * (H + N) * 4  # noqa: E731
    chunk = B * T * H * N * 4
    assert plan[1024] < 8 * inputs(1024) + 4 * chunk
    assert plan[2048] - plan[1024] < 8 * inputs(1024)
    assert plan[2048] - plan[1024] < B * 1024 * H * N * 4 / 2  # half a copy of the added states
    whole = planned_temp_bytes(S6Layer(H, N, chunk_size=None, rngs=nnx.Rngs(0)), (B, 1024, H),
                               gradient=True)
    assert whole > B * 1024 * H * N * 4  # the all-at-once scan holds every state


def test_selection_changes_the_step_per_token():
    # The defining property: Δ (and so the decay of the state) depends on the token.
    layer = S6Layer(4, 8, rngs=nnx.Rngs(3))
    u = jax.random.normal(jax.random.key(4), (10, 4)) * 3
    step, _, _ = layer.selection(u)
    assert float(jnp.std(step[:, 0]) / jnp.mean(step[:, 0])) > 0.05


def test_system_in_a_floating_dtype_holds_the_exact_eigenvalues():
    """An integer dtype truncated A = -(1, 2, 3, 4) to -(1, 1, e, e) (refused now: the
    contract); the floating dtypes keep it exact, the 16-bit ones computed in float32."""
    layer = S6Layer(3, 8, rngs=nnx.Rngs(0))
    expected = -np.arange(1, 9, dtype=np.float64)
    for dtype in (jnp.float32, jnp.float16, jnp.bfloat16):
        A = layer.discrete_system(6, dtype=dtype)
        assert A.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(A)[0], expected, rtol=1e-6)


@pytest.mark.parametrize(("option", "value"), [("dt_rank", 0), ("chunk_size", 0), ("chunk_size", 16.0),
                                               ("chunk_size", True), ("within_chunk", "parallel")])
def test_bad_options(option, value):
    with pytest.raises(ValueError, match=message(option, value)):
        S6Layer(4, 8, **{option: value}, rngs=nnx.Rngs(0))
