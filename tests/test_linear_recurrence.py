"""scan.chunked_recurrence, the chunked engine with a hand-written gradient, against a float64
NumPy loop, central differences and autodiff through the plain step-by-step scan.

The engine's gradient is the adjoint recurrence run backwards over the chunks; these tests
are what catches a chunk boundary off by one, a shifted decay, a conjugate where JAX has
none, or a time-invariant a summed wrongly. selective_scan (S6) runs on the same engine
(tests/test_selective_scan.py); S5's layer on chunked_recurrence (tests/test_s5.py).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import relative_error

from annotated_ssm.scan import WITHIN_CHUNK, chunked_recurrence, sequential_scan

L = 50
# 1: a chunk per step; 7: does not divide L (a padded last chunk); 10: divides it; 50 and
# 1000: one chunk.
CHUNK_SIZES = [1, 7, 10, 50, 1000]


def reference_states(a, b, x0=None, reverse=False):
    """float64 (complex128) NumPy loop: x_ℓ = a_ℓ x_{ℓ∓1} + b_ℓ, time on axis 0."""
    a = np.broadcast_to(np.asarray(a, np.complex128), np.shape(b))
    b = np.asarray(b, np.complex128)
    x = np.zeros(b.shape[1:], np.complex128) if x0 is None else np.asarray(x0, np.complex128)
    states = np.empty_like(b)
    for ell in (range(len(b) - 1, -1, -1) if reverse else range(len(b))):
        x = a[ell] * x + b[ell]
        states[ell] = x
    return states


def elements(complex_: bool, seed=0, shape=(L, 3, 4)):
    """Stable a (|a| in (0.6, 0.99)), b and an initial state, float64 NumPy."""
    rng = np.random.default_rng(seed)
    a = np.exp(-rng.uniform(0.01, 0.5, shape))
    b, x0 = rng.normal(size=shape), rng.normal(size=shape[1:])
    if complex_:
        a = a * np.exp(1j * rng.uniform(-np.pi, np.pi, shape))
        b, x0 = b + 1j * rng.normal(size=shape), x0 + 1j * rng.normal(size=shape[1:])
    return a, b, x0


@pytest.mark.parametrize("within_chunk", WITHIN_CHUNK)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_states_match_float64_loop(chunk_size, complex_, reverse, within_chunk):
    a, b, x0 = elements(complex_)
    expected = reference_states(a, b, x0, reverse=reverse)
    expected = expected if complex_ else expected.real
    options = {"chunk_size": chunk_size, "reverse": reverse, "within_chunk": within_chunk}
    single = (np.complex64 if complex_ else np.float32)
    states, final = chunked_recurrence(a.astype(single), b.astype(single), initial_state=x0.astype(single), **options)
    assert states.dtype == single and final.shape == (3, 4)
    assert relative_error(states, expected) < 1e-5
    assert relative_error(final, expected[0 if reverse else -1]) < 1e-5
    with jax.enable_x64(True):
        states, final = chunked_recurrence(a, b, initial_state=x0, **options)
        assert states.dtype == (jnp.complex128 if complex_ else jnp.float64)
        assert relative_error(states, expected) < 1e-10
        assert relative_error(final, expected[0 if reverse else -1]) < 1e-10


@pytest.mark.parametrize("reverse", [False, True])
def test_time_invariant_a_and_time_on_another_axis(reverse):
    # a (4,) for every step and batch entry; time on axis 1 of b (3, L, 4).
    a, b, x0 = elements(True, seed=1)
    expected = reference_states(a[0, 0], b, x0, reverse=reverse)
    states, final = chunked_recurrence(a[0, 0].astype(np.complex64), np.moveaxis(b, 0, 1).astype(np.complex64),
                                       axis=1, reverse=reverse, initial_state=x0, chunk_size=7)
    assert states.shape == (3, L, 4) and final.shape == (3, 4)
    assert relative_error(states, np.moveaxis(expected, 0, 1)) < 1e-5
    assert relative_error(final, expected[0 if reverse else -1]) < 1e-5


def directional_check(loss, args, seed):
    """∂loss along a random direction: the gradient's (Re Σ grad · d, JAX's convention for a
    complex argument) against a central difference, in float64."""
    grads = jax.grad(loss, argnums=tuple(range(len(args))))(*args)
    keys = jax.random.split(jax.random.key(seed), 2 * len(args))
    directions = []
    for i, x in enumerate(args):
        d = jax.random.normal(keys[2 * i], x.shape, jnp.float64)
        if jnp.iscomplexobj(x):
            d = d + 1j * jax.random.normal(keys[2 * i + 1], x.shape, jnp.float64)
        directions.append(d)
    predicted = float(sum(jnp.sum(g * d).real for g, d in zip(grads, directions)))
    eps = 1e-6
    shifted = lambda s: loss(*(x + s * d for x, d in zip(args, directions)))  # noqa: E731
    finite_difference = float(shifted(eps) - shifted(-eps)) / (2 * eps)
    assert abs(predicted - finite_difference) < 1e-8 * abs(finite_difference), (predicted, finite_difference)


def nonlinear_loss(states):
    """A loss that weighs every state differently (a sum would hide a misplaced step)."""
    weights = jnp.arange(1, states.size + 1).reshape(states.shape) / states.size
    return jnp.sum(weights * jnp.sin(states.real)) + jnp.sum(jnp.cos(states.imag)) if jnp.iscomplexobj(states) \
        else jnp.sum(weights * jnp.sin(states))


@pytest.mark.parametrize("within_chunk", WITHIN_CHUNK)
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize(("chunk_size", "reverse"), [(1, False), (7, True), (7, False), (1000, True)])
def test_gradients_match_central_differences_float64(chunk_size, reverse, complex_, within_chunk):
    # Of the states and of the final state, with respect to a, b and the initial state.
    with jax.enable_x64(True):
        a, b, x0 = (jnp.asarray(x) for x in elements(complex_, seed=2, shape=(20, 2, 3)))

        def loss(a, b, x0):
            states, final = chunked_recurrence(a, b, initial_state=x0, chunk_size=chunk_size, reverse=reverse,
                                               within_chunk=within_chunk)
            return nonlinear_loss(states) + jnp.sum(jnp.abs(final) ** 2)

        directional_check(loss, (a, b, x0), seed=3)


def test_time_invariant_gradient_matches_central_differences_float64():
    with jax.enable_x64(True):
        a, b, x0 = (jnp.asarray(x) for x in elements(True, seed=4, shape=(20, 2, 3)))
        directional_check(lambda a, b, x0: nonlinear_loss(chunked_recurrence(a, b, initial_state=x0,
                                                                             chunk_size=6)[0]),
                          (a[0], b, x0), seed=5)


@pytest.mark.parametrize("within_chunk", WITHIN_CHUNK)
@pytest.mark.parametrize("time_invariant", [False, True])
@pytest.mark.parametrize("complex_", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("reverse", [False, True])
def test_float32_gradients_equal_autodiff_through_the_plain_scan(reverse, complex_, time_invariant, within_chunk):
    # The hand-written adjoint against JAX differentiating lax.scan step by step. The
    # sequential method does lax.scan's arithmetic: equal to 1e-6 in float32 (a wrong step or
    # a missing term is O(1)). The associative method rounds in another order, and the
    # gradient of a time-invariant a sums 800 products (the plain scan's own float32 error is
    # 1.9e-5 there, measured): it is held to the float64 gradient instead, at 1e-5 (3e-5 with
    # a time-invariant a, whose 800-term sums reach 2.1e-5).
    a, b, x0 = elements(complex_, seed=6, shape=(200, 4, 8))
    a = a[0] if time_invariant else a
    single = np.complex64 if complex_ else np.float32

    def loss(scan, a, b, x0):
        return nonlinear_loss(scan(a, b, x0))

    def plain(a, b, x0):
        return sequential_scan(a, b, x0=x0, reverse=reverse)

    ours = jax.grad(loss, argnums=(1, 2, 3))(
        lambda a, b, x0: chunked_recurrence(a, b, initial_state=x0, reverse=reverse, chunk_size=16,
                                            within_chunk=within_chunk)[0],
        *(jnp.asarray(x.astype(single)) for x in (a, b, x0)))
    if within_chunk == "sequential":
        expected, tolerance = jax.grad(loss, argnums=(1, 2, 3))(plain, *(jnp.asarray(x.astype(single))
                                                                          for x in (a, b, x0))), 1e-6
    else:
        with jax.enable_x64(True):
            expected = [np.asarray(g) for g in jax.grad(loss, argnums=(1, 2, 3))(plain, *map(jnp.asarray, (a, b, x0)))]
        tolerance = 3e-5 if time_invariant else 1e-5
    for mine, theirs in zip(ours, expected):
        assert mine.dtype == single
        assert relative_error(mine, theirs) < tolerance


def test_gradient_under_jit_and_vmap():
    a, b, x0 = (jnp.asarray(x.astype(np.float32)) for x in elements(False, seed=7, shape=(3, 30, 5)))
    mapped = jax.jit(jax.vmap(jax.grad(lambda a, b: nonlinear_loss(chunked_recurrence(a, b, chunk_size=8)[0]),
                                       argnums=(0, 1))))(a, b)
    plain = jax.vmap(jax.grad(lambda a, b: nonlinear_loss(sequential_scan(a, b)), argnums=(0, 1)))(a, b)
    for mine, theirs in zip(mapped, plain):
        assert relative_error(mine, theirs) < 1e-6
