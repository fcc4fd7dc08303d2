"""Diagonal initialisations of S4D/DSS (annotated_ssm.initialization, chapter 6)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from annotated_ssm import hippo
from annotated_ssm.initialization import DIAGONAL_ABLATIONS, DIAGONAL_INITS, diagonal_init

KEY = jax.random.key(0)


@pytest.mark.parametrize("name", DIAGONAL_INITS)
def test_shapes_and_stability(name):
    A = diagonal_init(name, 64, key=KEY)
    if name == "real":
        assert A.shape == (64,) and A.dtype == np.float64
    else:
        assert A.shape == (32,) and A.dtype == np.complex128
        assert np.all(A.imag >= 0)  # one of each conjugate pair: the upper half plane
    assert np.all(A.real < 0)


@pytest.mark.parametrize("N", [2, 8, 64, 256])
def test_legs_is_hippo_n(N):
    """S4D-LegS: real part exactly -1/2, imaginary parts those of HiPPO-N (hippo's root finder,
    which tests/test_hippo.py checks against the eigensolver of dplr_legs), in dplr_legs's
    order, and a fresh writable array each call (the root finder's cache stays intact)."""
    A = diagonal_init("legs", N)
    np.testing.assert_array_equal(A.real, -0.5)
    np.testing.assert_allclose(A.imag, hippo.dplr_legs(N)[0][: N // 2].imag, rtol=1e-10)
    A[:] = 0
    np.testing.assert_array_equal(diagonal_init("legs", N), hippo.legs_eigenvalues(N))


def test_formulas():
    N = 16
    n = np.arange(8)
    np.testing.assert_allclose(diagonal_init("inv", N).imag, N / np.pi * (N / (2 * n + 1) - 1))
    np.testing.assert_allclose(diagonal_init("inv2", N).imag, N / np.pi * (N / (n + 1) - 1))
    np.testing.assert_allclose(diagonal_init("lin", N).imag, np.pi * n)
    np.testing.assert_allclose(diagonal_init("quad", N).imag, (2 * n + 1) ** 2 / np.pi)
    np.testing.assert_array_equal(diagonal_init("real", N), -(np.arange(N) + 1.0))
    # S4D-Real has the spectrum of HiPPO-LegS itself.
    np.testing.assert_allclose(np.sort(np.linalg.eigvals(hippo.legs(N)[0]).real), np.sort(diagonal_init("real", N)))


def test_inv_approximates_legs():
    """S4D-Inv follows the inverse law of S4D-LegS: the largest frequency agrees to 0.5%, and
    the ratio stays within 25% except at the slowest few (the law is asymptotic)."""
    legs, inv = diagonal_init("legs", 256).imag, diagonal_init("inv", 256).imag
    assert abs(legs[0] - inv[0]) / legs[0] < 0.005
    assert np.max(np.abs(legs[:-8] - inv[:-8]) / legs[:-8]) < 0.25


def test_ablations():
    base = diagonal_init("inv", 32)
    for label, (name, options) in DIAGONAL_ABLATIONS.items():
        A = diagonal_init(name, 32, key=KEY, **options)
        assert A.shape == (16,), label
        assert np.all(A.real < 0) and np.all(A.real >= -1), label
    np.testing.assert_allclose(diagonal_init("inv", 32, imag_scale=0.01).imag, 0.01 * base.imag)
    np.testing.assert_allclose(diagonal_init("lin", 32, real_part=-2.0).real, -2.0)
    rand_imag = diagonal_init("lin", 32, key=KEY, random_imag=True).imag
    assert np.all((rand_imag >= 0) & (rand_imag < np.pi * 16)) and not np.allclose(rand_imag, np.pi * np.arange(16))
    # Random draws are reproducible from the key.
    np.testing.assert_array_equal(diagonal_init("rand", 32, key=KEY), diagonal_init("rand", 32, key=KEY))


def test_random_draws_are_jax_random_from_the_key():
    """The draws are jax.random's, float32, from the two halves of the key passed in (real
    parts from the first, imaginary parts from the second), whatever jax_enable_x64 says."""
    key_real, key_imag = jax.random.split(KEY)
    normal = np.asarray(jax.random.normal(key_imag, (16,), jnp.float32), np.float64)
    uniform_real = np.asarray(jax.random.uniform(key_real, (16,), jnp.float32), np.float64)
    uniform_imag = np.asarray(jax.random.uniform(key_imag, (16,), jnp.float32), np.float64)
    np.testing.assert_array_equal(diagonal_init("rand", 32, key=KEY).imag, np.exp(normal))
    both = diagonal_init("lin", 32, key=KEY, random_real=True, random_imag=True)
    np.testing.assert_array_equal(both.real, -(1.0 - uniform_real))
    np.testing.assert_array_equal(both.imag, np.pi * 16 * uniform_imag)
    with jax.enable_x64(True):
        np.testing.assert_array_equal(diagonal_init("rand", 32, key=KEY).imag, np.exp(normal))
    # Another key, another draw; a legacy uint32 key works too.
    assert not np.allclose(diagonal_init("rand", 32, key=jax.random.key(1)).imag, np.exp(normal))
    legacy = diagonal_init("rand", 32, key=jax.random.PRNGKey(0))
    assert legacy.shape == (16,) and np.all(legacy.imag > 0)


def test_random_real_parts_are_never_zero():
    """random_real draws -(1 - U), U ~ U[0, 1) in float32: in [-1, 0), never a real part of 0
    (a float32 U hits 0 once in 2^23 draws)."""
    real = diagonal_init("inv", 20000, key=KEY, random_real=True).real
    assert np.all(real < 0) and np.all(real >= -1)


@pytest.mark.parametrize(("init", "options", "named"), [
    ("lin", {"real_part": 0.5}, "real_part"),
    ("lin", {"imag_scale": -1.0}, "imag_scale"),
    ("real", {"imag_scale": 2.0}, "imag_scale"),
    ("legs", {"random_imag": True}, "random_imag"),
])
def test_s4d_checks_init_options_at_its_door(init, options, named):
    """diagonal_init trusts its caller; the layer, where a user's options enter, names them."""
    from flax import nnx

    from annotated_ssm.layers import get_layer

    with pytest.raises(ValueError, match=rf"{named}.*{options[named]!r}"):
        get_layer("s4d")(2, 8, init=init, init_options=options, rngs=nnx.Rngs(0))
