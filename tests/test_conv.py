"""Naive kernel, FFT causal and bidirectional convolutions against direct summation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import direct_causal_conv, relative_error

from annotated_ssm.kernels import _fast_fft_length, bidirectional_conv, causal_conv, naive_kernel


def test_naive_kernel_dense_equals_matrix_powers():
    rng = np.random.default_rng(0)
    N, L = 5, 12
    A = rng.standard_normal((N, N)) / 3
    B, C = rng.standard_normal(N), rng.standard_normal(N)
    K = naive_kernel(A, B, C, L)
    expected = [C @ np.linalg.matrix_power(A, ell) @ B for ell in range(L)]
    assert K.dtype == np.float64 and K.shape == (L,)
    assert relative_error(K, expected) < 1e-14


def test_naive_kernel_diagonal_batched_complex():
    rng = np.random.default_rng(1)
    H, N, L = 3, 4, 10
    A = 0.9 * np.exp(1j * rng.uniform(0, np.pi, (H, N)))
    B = rng.standard_normal(N)
    C = rng.standard_normal((H, N)) + 1j * rng.standard_normal((H, N))
    K = naive_kernel(A, B, C, L, diagonal=True)
    assert K.shape == (H, L) and K.dtype == np.complex128
    for h in range(H):
        expected = [np.sum(C[h] * A[h] ** ell * B) for ell in range(L)]
        assert relative_error(K[h], expected) < 1e-14
    # Same result from the dense form of each channel.
    dense = naive_kernel(np.stack([np.diag(a) for a in A]), np.broadcast_to(B, (H, N)), C, L)
    assert relative_error(dense, K) < 1e-14


@pytest.mark.parametrize("L", [1, 2, 7, 64, 1000])
def test_causal_conv_matches_direct_sum_float64(L):
    rng = np.random.default_rng(L)
    u, K = rng.standard_normal((2, L)), rng.standard_normal(L)
    with jax.enable_x64(True):
        y = causal_conv(jnp.asarray(u), jnp.asarray(K))
        assert y.shape == (2, L)
        assert relative_error(y, direct_causal_conv(u, K)) < 1e-13


def test_causal_conv_float32_batched():
    rng = np.random.default_rng(3)
    B, H, L = 2, 3, 500
    u = rng.standard_normal((B, H, L)).astype(np.float32)
    K = (rng.standard_normal((H, L)) * np.exp(-np.arange(L) / 50)).astype(np.float32)
    y = causal_conv(u, K)
    assert y.dtype == jnp.float32 and y.shape == (B, H, L)
    assert relative_error(y, direct_causal_conv(u, K)) < 1e-5


def test_causal_conv_is_causal():
    # Changing the input at time 10 must not change any output before time 10.
    rng = np.random.default_rng(4)
    u, K = rng.standard_normal(32), rng.standard_normal(32)
    v = u.copy()
    v[10:] += 100.0
    y, z = causal_conv(u, K), causal_conv(v, K)
    assert np.max(np.abs(y[:10] - z[:10])) < 1e-3 and np.max(np.abs(y[10:] - z[10:])) > 1


def test_causal_conv_jit_grad():
    rng = np.random.default_rng(5)
    u, K = rng.standard_normal(16), rng.standard_normal(16)
    with jax.enable_x64(True):
        u, K = jnp.asarray(u), jnp.asarray(K)
        assert relative_error(jax.jit(causal_conv)(u, K), causal_conv(u, K)) < 1e-14
        # y is linear in K: dy_ℓ/dK_j = u_{ℓ-j}.
        jac = jax.jacobian(causal_conv, argnums=1)(u, K)
        expected = np.array([[u[l - j] if j <= l else 0.0 for j in range(16)] for l in range(16)])
        assert np.max(np.abs(jac - expected)) < 1e-12


def direct_bidirectional_conv(u, K_forward, K_backward):
    """y_ℓ = Σ_{j≤ℓ} K→_{ℓ-j} u_j + Σ_{j≥ℓ} K←_{j-ℓ} u_j by direct summation (float64)."""
    backward = direct_causal_conv(np.flip(u, -1), K_backward)
    return direct_causal_conv(u, K_forward) + np.flip(backward, -1)


@pytest.mark.parametrize("L", [1, 2, 7, 40, 1000])
def test_bidirectional_conv_matches_direct_sum_float64(L):
    rng = np.random.default_rng(L)
    u, K = rng.standard_normal((2, 3, L)), rng.standard_normal((2, 3, L))
    with jax.enable_x64(True):
        y = bidirectional_conv(jnp.asarray(u), jnp.asarray(K[0]), jnp.asarray(K[1]))
        assert y.shape == (2, 3, L) and y.dtype == jnp.float64
        assert relative_error(y, direct_bidirectional_conv(u, K[0], K[1])) < 1e-13


def test_bidirectional_conv_float32_batched_and_each_direction():
    rng = np.random.default_rng(6)
    B, H, L = 2, 3, 300
    u = rng.standard_normal((B, H, L)).astype(np.float32)
    decay = np.exp(-np.arange(L) / 50)
    K = (rng.standard_normal((2, H, L)) * decay).astype(np.float32)
    y = bidirectional_conv(u, K[0], K[1])
    assert y.dtype == jnp.float32 and y.shape == (B, H, L)
    assert relative_error(y, direct_bidirectional_conv(u, K[0], K[1])) < 1e-5
    # With one kernel zero, the other direction alone: causal, and anti-causal.
    zero = np.zeros_like(K[0])
    assert relative_error(bidirectional_conv(u, K[0], zero), direct_causal_conv(u, K[0])) < 1e-5
    anti = np.flip(direct_causal_conv(np.flip(u, -1), K[1]), -1)
    assert relative_error(bidirectional_conv(u, zero, K[1]), anti) < 1e-5


def test_bidirectional_conv_gradient_is_the_direct_sums_float64():
    rng = np.random.default_rng(7)
    L = 9
    u, K = rng.standard_normal(L), rng.standard_normal((2, L))
    with jax.enable_x64(True):
        u, K = jnp.asarray(u), jnp.asarray(K)
        jac_f, jac_b = jax.jacobian(bidirectional_conv, argnums=(1, 2))(u, K[0], K[1])
        # y is linear in each kernel: dy_ℓ/dK→_j = u_{ℓ-j}, dy_ℓ/dK←_j = u_{ℓ+j}.
        forward = np.array([[u[l - j] if j <= l else 0.0 for j in range(L)] for l in range(L)])
        backward = np.array([[u[l + j] if l + j < L else 0.0 for j in range(L)] for l in range(L)])
        assert np.max(np.abs(jac_f - forward)) < 1e-12
        assert np.max(np.abs(jac_b - backward)) < 1e-12


def test_fast_fft_length():
    smooth = [n for n in range(1, 400) if all(_strip(n, p) for p in [(2, 3, 5)])]
    for n in range(1, 300):
        assert _fast_fft_length(n) == min(m for m in smooth if m >= n)


def _strip(n, primes):
    for p in primes:
        while n % p == 0:
            n //= p
    return n == 1
