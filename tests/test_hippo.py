"""HiPPO matrices: LegS basis vs its closed form, NPLR / DPLR structure, reconstruction."""

import numpy as np
import pytest
import scipy.linalg
from numpy.polynomial import legendre as npleg

from annotated_ssm import hippo


def expm_basis(A, B, t):
    """e^{tA} B for each t by a dense float64 matrix exponential: (N, T)."""
    return np.stack([scipy.linalg.expm(ti * A) @ B for ti in t], axis=1)


def test_legs_entries():
    A, B = hippo.legs(4)
    n = np.arange(4)
    expected = np.zeros((4, 4))
    for i in n:
        for k in n:
            if i > k:
                expected[i, k] = -np.sqrt(2 * i + 1) * np.sqrt(2 * k + 1)
            elif i == k:
                expected[i, k] = -(i + 1)
    np.testing.assert_array_equal(A, expected)
    np.testing.assert_allclose(B, np.sqrt(2 * n + 1), rtol=0, atol=0)
    assert np.allclose(np.linalg.eigvals(A).real, -(n + 1)[::-1]) or np.allclose(np.sort(np.linalg.eigvals(A).real), -(n + 1)[::-1])


def test_legendre_matches_numpy():
    z = np.linspace(-1, 1, 101)
    P = hippo.legendre(20, z)
    for n in range(20):
        np.testing.assert_allclose(P[n], npleg.Legendre.basis(n)(z), atol=1e-12)


@pytest.mark.parametrize("N", [1, 2, 16, 64])
def test_legs_basis_closed_form(N):
    t = np.linspace(0, 6, 40)
    A, B = hippo.legs(N)
    error = np.max(np.abs(expm_basis(A, B, t) - hippo.legs_basis(N, t)))
    assert error < 1e-11 * np.sqrt(N)


def test_legs_reconstruction_basis_orthonormal():
    # g_n(s) = sqrt(2n+1) P_n(2e^{-s}-1) is orthonormal under e^{-s} ds: substitute
    # z = 2e^{-s}-1 and integrate with Gauss-Legendre quadrature in z.
    N = 32
    z, w = npleg.leggauss(64)
    s = -np.log((z + 1) / 2)
    g = hippo.reconstruction_basis("legs", N, s)
    gram = (g * w / 2) @ g.T  # e^{-s} ds = dz / 2
    assert np.max(np.abs(gram - np.eye(N))) < 1e-12


def test_legt_basis_is_windowed_legendre():
    s = np.array([0.0, 0.5, 2.0, 2.5])
    g = hippo.reconstruction_basis("legt", 3, s, theta=2.0)
    np.testing.assert_allclose(g[:, :3], hippo.legendre(3, s[:3] - 1.0), atol=1e-15)
    np.testing.assert_array_equal(g[:, 3], 0.0)


def _zoh_states(A, B, u, dt):
    N = len(B)
    M = np.zeros((N + 1, N + 1))
    M[:N, :N], M[:N, N] = A, B
    E = scipy.linalg.expm(dt * M)
    x = np.zeros(N)
    for v in u:
        x = E[:N, :N] @ x + E[:N, N] * v
    return x


def _history_errors(measure, sizes, T=4.0, dt=1e-3, theta=1.0):
    # A smooth input that starts at 0, sampled at mid-steps and held piecewise constant
    # (ZOH then gives the exact continuous state); reconstruct the last time unit.
    f = lambda t: np.sin(3 * t) + 0.5 * np.sin(7 * t)
    u = f(np.arange(0, T, dt) + dt / 2)
    s = np.linspace(0, 1, 101)
    errors = []
    for N in sizes:
        A, B = hippo.hippo_matrices(measure, N, theta=theta)
        x = _zoh_states(A, B, u, dt)
        errors.append(np.max(np.abs(hippo.reconstruct(x, s, measure, theta=theta) - f(T - s))))
    return errors


def test_legs_reconstruction_improves_with_N():
    errors = _history_errors("legs", (16, 32, 64, 128))
    assert all(e1 < e0 for e0, e1 in zip(errors, errors[1:])), errors
    assert errors[-1] < 1e-2


def test_legt_reconstructs_window():
    errors = _history_errors("legt", (16, 32))
    assert max(errors) < 1e-3, errors


def test_lagt_reconstruction_improves_with_N():
    errors = _history_errors("lagt", (16, 32, 64, 128), theta=0.05)
    assert all(e1 < e0 for e0, e1 in zip(errors, errors[1:])), errors
    assert errors[-1] < 0.03


@pytest.mark.parametrize("theta", [1.0, 0.3])
def test_lagt_basis_is_laguerre_functions(theta):
    # e^{tA}B = L_n(t/θ) e^{-t/(2θ)} / θ, and the Laguerre functions are orthonormal:
    # Gauss-Laguerre quadrature integrates L_n L_m e^{-v} exactly.
    N = 12
    A, B = hippo.lagt(N, theta)
    t = np.linspace(0, 20, 41)
    g = hippo.reconstruction_basis("lagt", N, t, theta=theta)
    assert np.max(np.abs(expm_basis(A, B, t) - g / theta)) < 1e-12
    np.testing.assert_allclose(np.linalg.eigvals(A).real, -0.5 / theta, atol=1e-3 / theta)  # a Jordan block
    v, w = np.polynomial.laguerre.laggauss(N + 2)
    gv = hippo.reconstruction_basis("lagt", N, theta * v, theta=theta) * np.exp(v / 2)
    assert np.max(np.abs((gv * w) @ gv.T - np.eye(N))) < 1e-10


def test_laguerre_matches_numpy():
    x = np.linspace(0, 30, 61)
    L = hippo.laguerre(15, x)
    for n in range(15):
        np.testing.assert_allclose(L[n], np.polynomial.laguerre.Laguerre.basis(n)(x), rtol=1e-10, atol=1e-10)


def test_nplr_split():
    N = 64
    A, B = hippo.legs(N)
    A_normal, P, B2 = hippo.normal_legs(N)
    np.testing.assert_allclose(A_normal - np.outer(P, P), A, atol=1e-12)
    np.testing.assert_array_equal(B2, B)
    S = A_normal + 0.5 * np.eye(N)
    assert np.max(np.abs(S + S.T)) == 0.0
    np.testing.assert_allclose(P, np.sqrt(np.arange(N) + 0.5), rtol=0, atol=0)


def test_normal_eigenvalues_real_part_at_N_1024():
    N = 1024
    Lambda, P, B, V = hippo.dplr_legs(N)
    assert np.max(np.abs(Lambda.real + 0.5)) < 1e-10
    # The general eigensolver agrees on the real parts of A^(N)'s eigenvalues too.
    A_normal, _, _ = hippo.normal_legs(N)
    assert np.max(np.abs(np.linalg.eigvals(A_normal).real + 0.5)) < 1e-10


@pytest.mark.parametrize("N", [7, 8, 64])
def test_dplr_reconstructs_legs(N):
    Lambda, P, B, V = hippo.dplr_legs(N)
    A, B_legs = hippo.legs(N)
    assert np.max(np.abs(V.conj().T @ V - np.eye(N))) < 1e-12
    A_rebuilt = V @ (np.diag(Lambda) - np.outer(P, P.conj())) @ V.conj().T
    assert np.max(np.abs(A_rebuilt - A)) < 1e-10 * N
    assert np.max(np.abs(V @ B - B_legs)) < 1e-12 * N
    half = N // 2
    np.testing.assert_array_equal(Lambda[half : 2 * half], Lambda[:half].conj())
    np.testing.assert_array_equal(V[:, half : 2 * half], V[:, :half].conj())
    assert np.all(Lambda[:half].imag > 0) and np.all(np.diff(Lambda[:half].imag) < 0)


@pytest.mark.parametrize("N", [2, 8, 64, 256, 1024])
def test_legs_eigenvalues_root_finder_matches_eigensolver(N):
    """The root finder's eigenvalues are dplr_legs's eigensolver's (same order) to 1e-10
    relative, with real parts exactly -1/2."""
    fast = hippo.legs_eigenvalues(N)
    np.testing.assert_array_equal(fast.real, -0.5)
    np.testing.assert_allclose(fast, hippo.dplr_legs(N)[0][: N // 2], rtol=1e-10)


def test_legs_eigenvectors_ill_conditioned():
    # S4's Lemma 3.2: diagonalising LegS directly is numerically hopeless.
    conds = [np.linalg.cond(np.linalg.eig(hippo.legs(N)[0])[1]) for N in (4, 8, 16)]
    assert conds[0] < conds[1] < conds[2]
    assert conds[2] > 1e6


def test_legt_eigenvalues_stable():
    A, _ = hippo.legt(32, theta=2.0)
    assert np.max(np.linalg.eigvals(A).real) < 0


# --- memory: a signal in, its history out (chapter 2's explorer) ---------------------------


def _signal(t):
    return np.sin(t) + 0.5 * np.cos(3.1 * t)


@pytest.mark.parametrize("measure", hippo.MEASURES)
def test_memory_state_matches_simulate(measure):
    """The ZOH recurrence gives the state of an independent integrator (ssm.simulate with the
    input held over each step), and the reconstruction is reconstruct() of that state."""
    from annotated_ssm.continuous import simulate

    dt, N = 0.01, 16
    u = _signal(dt * np.arange(500) + dt / 2)
    m = hippo.memory(u, dt, measure, N, 2.0, theta=1.5)
    A, B = hippo.hippo_matrices(measure, N, theta=1.5)
    _, states = simulate(A, B, np.zeros(N), 0.0, np.append(u, u[-1]), dt * np.arange(501), hold="zero",
                         return_state=True)
    np.testing.assert_allclose(m.state, states[-1], rtol=1e-9, atol=1e-12 * np.abs(states[-1]).max())
    np.testing.assert_allclose(m.reconstruction, hippo.reconstruct(states[-1], m.lags, measure, theta=1.5),
                               rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(m.lags, dt * np.arange(201), rtol=1e-12)


def test_memory_basis_closed_forms():
    """e^{sA}B stepped along the lags equals LegS's and LagT's closed forms."""
    dt, N = 0.01, 12
    legs = hippo.memory(np.ones(3), dt, "legs", N, 3.0)
    np.testing.assert_allclose(legs.basis, hippo.legs_basis(N, legs.lags), rtol=1e-9, atol=1e-11)
    lagt = hippo.memory(np.ones(3), dt, "lagt", N, 3.0, theta=0.5)
    closed = hippo.reconstruction_basis("lagt", N, lagt.lags, theta=0.5) / 0.5
    np.testing.assert_allclose(lagt.basis, closed, rtol=1e-9, atol=1e-11)


def test_memory_reconstructs_history():
    """With N = 64, LegS reads the last 4 time units of a smooth signal back to ~1e-2."""
    dt = 0.01
    m = hippo.memory(_signal(dt * np.arange(1000) + dt / 2), dt, "legs", 64, 4.0)
    history = _signal(10.0 - m.lags)
    assert np.sqrt(np.mean((m.reconstruction - history) ** 2)) < 1e-2
