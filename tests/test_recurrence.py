"""The sequential scan and the SSM recurrence against float64 references and the convolution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import recurrence, relative_error

from annotated_ssm import hippo
from annotated_ssm.discretize import discretize
from annotated_ssm.kernels import causal_conv, naive_kernel
from annotated_ssm.scan import sequential_scan, ssm_recurrence


def test_sequential_scan_matches_loop():
    rng = np.random.default_rng(0)
    L, N = 50, 3
    a = rng.uniform(-1, 1, (L, N))
    b = rng.standard_normal((L, N))
    x0 = rng.standard_normal(N)
    with jax.enable_x64(True):
        xs = sequential_scan(a, b, x0=x0)
        xs_rev = sequential_scan(a, b, reverse=True)
    x, expected = x0, []
    for ell in range(L):
        x = a[ell] * x + b[ell]
        expected.append(x)
    assert relative_error(xs, expected) < 1e-14
    x, expected = np.zeros(N), []
    for ell in reversed(range(L)):
        x = a[ell] * x + b[ell]
        expected.append(x)
    assert relative_error(xs_rev, expected[::-1]) < 1e-14


def test_sequential_scan_time_invariant_complex():
    a = jnp.array([0.9 + 0.1j, 0.5 - 0.5j])
    b = jnp.ones((4, 2))
    xs = sequential_scan(a, b)
    assert xs.dtype == jnp.complex64
    expected = np.cumsum(np.asarray(a)[None] ** np.arange(4)[:, None], axis=0)
    assert relative_error(xs, expected) < 1e-6


@pytest.mark.parametrize("dense", [True, False])
def test_ssm_recurrence_matches_reference(dense):
    rng = np.random.default_rng(1)
    N, L = 6, 200
    if dense:
        A = rng.standard_normal((N, N)) / np.sqrt(N) - 1.5 * np.eye(N)
    else:
        A = -rng.uniform(0.1, 1, N) + 1j * rng.uniform(-3, 3, N)
    B, C, u = rng.standard_normal(N), rng.standard_normal(N), rng.standard_normal(L)
    with jax.enable_x64(True):
        A_bar, B_bar = discretize(A, B, 0.1, "zoh")
        states, y = ssm_recurrence(A_bar, B_bar, C, u, D=0.7)
        assert states.shape == (L, N) and y.shape == (L,)
        assert relative_error(y, recurrence(np.asarray(A_bar), np.asarray(B_bar), C, u, D=0.7)) < 1e-12
        # The last state, by direct summation x_{L-1} = Σ_j Ā^{L-1-j} B̄ u_j.
        A_np = np.asarray(A_bar)
        power = (lambda k: np.linalg.matrix_power(A_np, k)) if dense else (lambda k: np.diag(A_np**k))
        x_last = sum(power(L - 1 - j) @ np.asarray(B_bar) * u[j] for j in range(L))
        assert relative_error(states[-1], x_last) < 1e-12


def test_ssm_recurrence_mimo_and_initial_state():
    rng = np.random.default_rng(2)
    N, M, P, L = 4, 2, 3, 30
    A_bar = np.diag(rng.uniform(0.5, 0.9, N))
    B_bar, C, D = rng.standard_normal((N, M)), rng.standard_normal((P, N)), rng.standard_normal((P, M))
    u, x0 = rng.standard_normal((L, M)), rng.standard_normal(N)
    with jax.enable_x64(True):
        states, y = ssm_recurrence(A_bar, B_bar, C, u, D, x0=x0)
    x, ys = x0, []
    for ell in range(L):
        x = A_bar @ x + B_bar @ u[ell]
        ys.append(C @ x + D @ u[ell])
    assert y.shape == (L, P)
    assert relative_error(y, ys) < 1e-13


@pytest.mark.parametrize("method", ["bilinear", "zoh"])
def test_recurrence_equals_convolution_float32_L4096(method):
    # The two views of one discrete SSM agree in float32 to ~1e-5 relative over a long
    # sequence: HiPPO-LegS (N = 64), discretised so that its memory spans the sequence.
    N, L = 64, 4096
    A, B = hippo.legs(N)
    C = np.random.default_rng(3).standard_normal(N) / np.sqrt(N)
    u = np.random.default_rng(4).standard_normal(L)
    with jax.enable_x64(True):
        A_bar64, B_bar64 = (np.asarray(a) for a in discretize(A, B, 8.0 / L, method))
    y_ref = recurrence(A_bar64, B_bar64, C, u)
    A_bar, B_bar = jnp.float32(A_bar64), jnp.float32(B_bar64)
    _, y_rec = ssm_recurrence(A_bar, B_bar, jnp.float32(C), jnp.float32(u))
    K = jnp.float32(naive_kernel(A_bar64, B_bar64, C, L))
    y_conv = causal_conv(jnp.float32(u), K)
    assert y_rec.dtype == y_conv.dtype == jnp.float32
    assert relative_error(y_rec, y_conv) < 1e-5
    assert relative_error(y_rec, y_ref) < 1e-5
    assert relative_error(y_conv, y_ref) < 1e-5


def test_recurrence_equals_convolution_diagonal_complex():
    rng = np.random.default_rng(5)
    N, L = 16, 4096
    Lambda = -rng.uniform(1e-3, 0.1, N) + 1j * rng.uniform(-1, 1, N)
    B, C = rng.standard_normal(N) + 0j, rng.standard_normal(N) + 1j * rng.standard_normal(N)
    u = rng.standard_normal(L)
    A_bar, B_bar = discretize(jnp.complex64(Lambda), jnp.complex64(B), 0.5, "zoh")
    _, y = ssm_recurrence(A_bar, B_bar, jnp.complex64(C), jnp.float32(u))
    K = naive_kernel(np.asarray(A_bar), np.asarray(B_bar), C, L)
    y_conv = causal_conv(jnp.float32(u), jnp.float32(K.real))
    assert relative_error(y.real, y_conv) < 1e-5
