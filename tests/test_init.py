"""Diagonal initialisations of S4D/DSS (annotated_ssm.init, chapter 6)."""

import jax
import numpy as np
import pytest

from annotated_ssm import hippo
from annotated_ssm.init import DIAGONAL_ABLATIONS, DIAGONAL_INITS, diagonal_init, legs_eigenvalues

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


@pytest.mark.parametrize("N", [2, 8, 64, 256, 1024])
def test_legs_matches_dplr_legs(N):
    """S4D-LegS: real part exactly -1/2, and (sorted) the eigenvalues of HiPPO-N."""
    A = diagonal_init("legs", N)
    np.testing.assert_array_equal(A.real, -0.5)
    Lambda = hippo.dplr_legs(N)[0][: N // 2]
    np.testing.assert_allclose(np.sort(A.imag), np.sort(Lambda.imag), rtol=1e-10)
    np.testing.assert_allclose(legs_eigenvalues(N), Lambda, rtol=1e-10)


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


def test_bad_input():
    with pytest.raises(ValueError, match="name.*'legs'"):
        diagonal_init("hippo", 64)
    with pytest.raises(ValueError, match="N must be even"):
        diagonal_init("inv", 63)
    with pytest.raises(ValueError, match="N must be an integer"):
        diagonal_init("lin", 0)
    with pytest.raises(ValueError, match="key"):
        diagonal_init("rand", 64)
    with pytest.raises(ValueError, match="real_part"):
        diagonal_init("lin", 64, real_part=0.5)
    with pytest.raises(ValueError, match="imag_scale"):
        diagonal_init("lin", 64, imag_scale=-1.0)
    with pytest.raises(ValueError, match="real"):
        diagonal_init("real", 64, imag_scale=2.0)
    with pytest.raises(ValueError, match="random_imag"):
        diagonal_init("legs", 64, key=KEY, random_imag=True)
    with pytest.raises(ValueError, match="N must be even"):
        legs_eigenvalues(7)
