"""scan.selective_scan, the chunked selective recurrence, against a float64 NumPy loop.

The layer built on it (S6Layer) is tested in test_s6.py and test_layer_contract.py.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import relative_error

from annotated_ssm.scan import WITHIN_CHUNK, selective_scan


def reference_selective_scan(u, step, A, B, C, reverse=False):
    """x_ℓ = exp(Δ_ℓ A) x_{ℓ∓1} + Δ_ℓ u_ℓ B_ℓ, y_ℓ = C_ℓ · x_ℓ, one step at a time in float64.

    u, step (batch, L, H); A (H, N); B, C (batch, L, N) -> y (batch, L, H)."""
    u, step, A, B, C = (np.asarray(x, np.float64) for x in (u, step, A, B, C))
    x = np.zeros((u.shape[0],) + A.shape)
    y = np.empty(u.shape)
    for ell in (range(u.shape[1] - 1, -1, -1) if reverse else range(u.shape[1])):
        x = np.exp(step[:, ell, :, None] * A) * x + (step[:, ell] * u[:, ell])[..., None] * B[:, ell, None, :]
        y[:, ell] = np.einsum("bn,bhn->bh", C[:, ell], x)
    return y


def selective_inputs(L, batch=2, H=3, N=5, seed=0):
    """u, Δ (a softplus, so > 0, spread over a decade), A (H, N) < 0, B, C: float64 NumPy."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(batch, L, H))
    step = np.logaddexp(0.0, rng.normal(size=(batch, L, H)) - 2)
    A = -rng.uniform(0.5, 4.0, (H, N))
    return u, step, A, rng.normal(size=(batch, L, N)), rng.normal(size=(batch, L, N))


@pytest.mark.parametrize("within_chunk", WITHIN_CHUNK)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("chunk_size", [None, 1, 7, 10, 50, 1000])  # L = 50: 7 does not divide it
def test_matches_float64_loop(chunk_size, reverse, within_chunk):
    args = selective_inputs(50)
    expected = reference_selective_scan(*args, reverse=reverse)
    options = {"chunk_size": chunk_size, "reverse": reverse, "within_chunk": within_chunk}
    y32 = selective_scan(*(np.float32(x) for x in args), **options)
    assert y32.dtype == jnp.float32 and y32.shape == expected.shape
    assert relative_error(y32, expected) < 1e-5
    with jax.enable_x64(True):
        y64 = selective_scan(*args, **options)
        assert y64.dtype == jnp.float64 and relative_error(y64, expected) < 1e-12


def test_batch_shapes_and_no_batch():
    u, step, A, B, C = selective_inputs(20, batch=6)
    expected = reference_selective_scan(u, step, A, B, C)
    y = selective_scan(*(x.reshape(2, 3, *x.shape[1:]) for x in (u, step)), A,
                       *(x.reshape(2, 3, *x.shape[1:]) for x in (B, C)), chunk_size=6)
    assert relative_error(np.reshape(y, expected.shape), expected) < 1e-5
    single = selective_scan(u[0], step[0], A, B[0], C[0], chunk_size=6)
    assert single.shape == (20, 3) and relative_error(single, expected[0]) < 1e-5


@pytest.mark.parametrize("within_chunk", WITHIN_CHUNK)
def test_gradients_match_central_differences_float64(within_chunk):
    # Several chunks and a padded last one (L = 20, T = 6): the gradient flows through the
    # carried state and the recomputed (checkpointed) chunks.
    with jax.enable_x64(True):
        args = tuple(jnp.asarray(x) for x in selective_inputs(20))

        def loss(*args):
            return jnp.mean(jnp.sin(selective_scan(*args, chunk_size=6, reverse=False,
                                                   within_chunk=within_chunk)))

        grads = jax.grad(loss, argnums=(0, 1, 2, 3, 4))(*args)
        keys = jax.random.split(jax.random.key(3), 5)
        directions = [jax.random.normal(k, x.shape, jnp.float64) for k, x in zip(keys, args)]
        predicted = float(sum(jnp.sum(g * d) for g, d in zip(grads, directions)))
        eps = 1e-5
        shifted = lambda s: loss(*(x + s * d for x, d in zip(args, directions)))  # noqa: E731
        fd = float(shifted(eps) - shifted(-eps)) / (2 * eps)
        assert abs(predicted - fd) < 1e-7 * abs(fd), (predicted, fd)
        reference = jax.grad(lambda *a: jnp.mean(jnp.sin(selective_scan(*a, chunk_size=None))),
                             argnums=(0, 1, 2, 3, 4))(*args)
        for g, r in zip(grads, reference):
            assert relative_error(g, r) < 1e-12


@pytest.mark.parametrize(("change", "name", "shape"), [
    ({"u": np.zeros(4)}, "u", "(4,)"),
    ({"u": np.zeros((2, 0, 3))}, "u", "(2, 0, 3)"),
    ({"u": np.zeros((2, 10, 0))}, "u", "(2, 10, 0)"),  # H = 0: was a ZeroDivisionError
    ({"A": np.zeros((3, 0))}, "A", "(3, 0)"),  # N = 0: was a ZeroDivisionError
    ({"A": np.zeros((4, 5))}, "A", "(4, 5)"),
    ({"A": np.zeros(3)}, "A", "(3,)"),
    ({"step": np.zeros((2, 10, 4))}, "step", "(2, 10, 4)"),
    ({"B": np.zeros((2, 10, 4))}, "B", "(2, 10, 4)"),
    ({"C": np.zeros((1, 10, 5))}, "C", "(1, 10, 5)"),
])
def test_bad_shapes_are_named(change, name, shape):
    """Degenerate and mismatched shapes: a ValueError naming the argument and its shape."""
    arguments = dict(zip(("u", "step", "A", "B", "C"), selective_inputs(10)))
    arguments.update(change)
    with pytest.raises(ValueError, match=rf"^{name} must have shape .*got shape {re.escape(shape)}"):
        selective_scan(**arguments)
