"""S6, the selective layer: its parameterisation and a float64 sequential reference.

The shared contract (shapes, dtypes, recurrence = scan, gradients against finite
differences) is in test_layer_contract.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from reference import relative_error

from annotated_ssm.layers import S6Layer, get_layer


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


def test_registered_and_initialised_as_mamba():
    layer = get_layer("s6")(8, 16, rngs=nnx.Rngs(0))
    assert isinstance(layer, S6Layer) and layer.dt_rank == 1  # ⌈8/16⌉
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


def test_selection_changes_the_step_per_token():
    # The defining property: Δ (and so the decay of the state) depends on the token.
    layer = S6Layer(4, 8, rngs=nnx.Rngs(3))
    u = jax.random.normal(jax.random.key(4), (10, 4)) * 3
    step, _, _ = layer.selection(u)
    assert float(jnp.std(step[:, 0]) / jnp.mean(step[:, 0])) > 0.05


def test_bad_dt_rank():
    with pytest.raises(ValueError, match="dt_rank must be an integer >= 1; got 0"):
        S6Layer(4, 8, dt_rank=0, rngs=nnx.Rngs(0))
