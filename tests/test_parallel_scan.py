"""The parallel (associative) scan against a float64 step-by-step reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import relative_error

from annotated_ssm import scan
from annotated_ssm.scan import binary_operator, parallel_scan, sequential_scan


def reference_scan(a, b, x0=None, reverse=False):
    """float64 NumPy loop: x_ℓ = a_ℓ x_{ℓ-1} + b_ℓ (or x_ℓ = a_ℓ x_{ℓ+1} + b_ℓ reversed)."""
    a = np.broadcast_to(np.asarray(a, np.complex128), np.shape(b))
    b = np.asarray(b, np.complex128)
    x = np.zeros(b.shape[1:], np.complex128) if x0 is None else np.asarray(x0, np.complex128)
    xs = np.empty_like(b)
    order = range(len(b) - 1, -1, -1) if reverse else range(len(b))
    for ell in order:
        x = a[ell] * x + b[ell]
        xs[ell] = x
    return xs


def stable_elements(key, shape):
    """Complex a with |a| in (0.9, 0.999) (a stable, slowly decaying recurrence) and complex b."""
    k1, k2, k3, k4 = jax.random.split(key, 4)
    radius = jnp.exp(-jax.random.uniform(k1, shape, minval=1e-3, maxval=0.1))
    angle = jax.random.uniform(k2, shape, minval=-np.pi, maxval=np.pi)
    a = (radius * jnp.exp(1j * angle)).astype(jnp.complex64)
    b = jax.lax.complex(jax.random.normal(k3, shape), jax.random.normal(k4, shape))
    return a, b


@pytest.mark.parametrize("reverse", [False, True])
def test_parallel_equals_sequential_long_float32(reverse):
    # L = 16384 time steps, a batch of 2 × 4 complex states, per-step a (time varying).
    a, b = stable_elements(jax.random.key(0), (16384, 2, 4))
    expected = reference_scan(np.asarray(a), np.asarray(b), reverse=reverse)
    fast = parallel_scan(a, b, reverse=reverse)
    assert fast.dtype == jnp.complex64
    assert relative_error(fast, expected) < 1e-5
    # And against the float32 sequential scan (lax.scan) of the package.
    assert relative_error(fast, sequential_scan(a, b, reverse=reverse)) < 1e-5


def test_time_invariant_a_broadcasts():
    a, b = stable_elements(jax.random.key(1), (512, 3, 8))
    a0 = a[0, 0]  # (8,): one a for every time step and batch entry
    expected = reference_scan(np.asarray(a0), np.asarray(b))
    assert relative_error(parallel_scan(a0, b), expected) < 1e-5
    assert relative_error(parallel_scan(a0, b, reverse=True), reference_scan(np.asarray(a0), np.asarray(b), reverse=True)) < 1e-5


@pytest.mark.parametrize("reverse", [False, True])
def test_initial_state(reverse):
    a, b = stable_elements(jax.random.key(2), (300, 5))
    x0 = jax.lax.complex(jnp.arange(5.0), -jnp.arange(5.0))
    expected = reference_scan(np.asarray(a), np.asarray(b), x0=np.asarray(x0), reverse=reverse)
    assert relative_error(parallel_scan(a, b, x0=x0, reverse=reverse), expected) < 1e-5
    assert relative_error(sequential_scan(a, b, x0=x0, reverse=reverse), expected) < 1e-5


def test_real_inputs_stay_real():
    a = jnp.full((100, 3), 0.9, jnp.float32)
    b = jax.random.normal(jax.random.key(3), (100, 3))
    x = parallel_scan(a, b)
    assert x.dtype == jnp.float32
    assert relative_error(x, reference_scan(a, b).real) < 1e-5


def test_binary_operator_is_associative():
    # (e1 • e2) • e3 == e1 • (e2 • e3) for random complex elements, in float64.
    rng = np.random.default_rng(0)
    e1, e2, e3 = [tuple(rng.normal(size=(2, 16)) + 1j * rng.normal(size=(2, 16))) for _ in range(3)]
    left = binary_operator(binary_operator(e1, e2), e3)
    right = binary_operator(e1, binary_operator(e2, e3))
    for l_part, r_part in zip(left, right):
        assert np.max(np.abs(l_part - r_part)) < 1e-12 * np.max(np.abs(r_part))


def test_binary_operator_composes_affine_maps():
    # The element (a, b) is x ↦ a x + b; "left then right" applied to x equals the composition.
    rng = np.random.default_rng(1)
    (a1, b1), (a2, b2), x = rng.normal(size=(2, 4)), rng.normal(size=(2, 4)), rng.normal(size=4)
    a, b = binary_operator((a1, b1), (a2, b2))
    np.testing.assert_allclose(a * x + b, a2 * (a1 * x + b1) + b2, rtol=1e-14)


def test_jit_grad_vmap():
    a, b = stable_elements(jax.random.key(4), (64, 6))

    def loss(scan, a, b):
        return jnp.sum(jnp.abs(scan(a, b)) ** 2)

    fast = jax.jit(jax.grad(lambda a, b: loss(parallel_scan, a, b), argnums=(0, 1)))(a, b)
    slow = jax.grad(lambda a, b: loss(sequential_scan, a, b), argnums=(0, 1))(a, b)
    for g_fast, g_slow in zip(fast, slow):
        assert relative_error(g_fast, g_slow) < 1e-5
    # vmap over a leading batch of independent sequences == the batch on a trailing axis.
    batched_a, batched_b = stable_elements(jax.random.key(5), (3, 64, 6))
    mapped = jax.vmap(parallel_scan)(batched_a, batched_b)
    trailing = parallel_scan(jnp.moveaxis(batched_a, 0, 1), jnp.moveaxis(batched_b, 0, 1))
    assert relative_error(mapped, jnp.moveaxis(trailing, 1, 0)) < 1e-6


def test_parallel_scan_is_jitted_where_it_is_defined():
    # A jitted function can be lowered; the eager call then runs one compiled program.
    a, b = stable_elements(jax.random.key(6), (16, 2))
    assert hasattr(scan.parallel_scan, "lower") and hasattr(scan.parallel_scan, "__wrapped__")
    scan.parallel_scan.lower(a, b, reverse=True)  # "reverse" is static
