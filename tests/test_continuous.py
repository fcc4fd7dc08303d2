"""annotated_ssm.continuous against independent float64 references: closed forms for the
mass-spring-damper, scipy.signal (lsim, impulse, ss2tf), eigendecompositions and quadrature."""

import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.signal

from annotated_ssm import continuous
from annotated_ssm.continuous import (
    as_system,
    basis_functions,
    impulse_response,
    is_stable,
    mass_spring_damper,
    simulate,
    transfer_function,
)
from reference import relative_error


def random_stable_system(N=5, M=None, P=None, seed=0):
    """A dense real system whose eigenvalues have real parts <= -0.3 (so responses decay)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((N, N)) / np.sqrt(N)
    A -= (np.max(np.linalg.eigvals(A).real) + 0.3) * np.eye(N)
    B = rng.standard_normal(N if M is None else (N, M))
    C = rng.standard_normal(N if P is None else (P, N))
    D = rng.standard_normal() if M is None and P is None else rng.standard_normal((P or 1, M or 1))
    return A, B, C, D


# --- mass_spring_damper and its closed forms --------------------------------------------

def test_mass_spring_damper_matrices_follow_newtons_law():
    A, B, C, D = mass_spring_damper(mass=2.0, damping=0.6, stiffness=8.0)
    # x = (p, p'):  p'' = (-k p - c p' + u) / m
    x, u = np.array([0.3, -1.1]), 0.7
    p_ddot = (-8.0 * 0.3 - 0.6 * -1.1 + 0.7) / 2.0
    np.testing.assert_allclose(A @ x + B * u, [-1.1, p_ddot], rtol=1e-15)
    assert C @ x == 0.3 and D == 0.0


def test_impulse_response_matches_underdamped_closed_form():
    m, c, k = 1.5, 0.4, 6.0
    A, B, C, _ = mass_spring_damper(m, c, k)
    t = np.linspace(0, 15, 301)
    decay = c / (2 * m)
    omega_d = np.sqrt(k / m - decay**2)
    expected = np.exp(-decay * t) * np.sin(omega_d * t) / (m * omega_d)
    assert relative_error(impulse_response(A, B, C, t), expected) < 1e-12


def test_transfer_function_matches_closed_form_and_resonance():
    m, c, k = 1.0, 0.3, 4.0
    A, B, C, D = mass_spring_damper(m, c, k)
    omega = np.linspace(0.01, 6, 2000)
    H = transfer_function(A, B, C, D, 1j * omega)
    np.testing.assert_allclose(H, 1 / (m * (1j * omega) ** 2 + c * 1j * omega + k), rtol=1e-12)
    # The gain peaks at the damped resonance sqrt(k/m - c²/(2m²)).
    peak = omega[np.argmax(np.abs(H))]
    assert abs(peak - np.sqrt(k / m - c**2 / (2 * m**2))) < omega[1] - omega[0]


# --- basis_functions and impulse_response --------------------------------------------

def test_basis_functions_match_eigendecomposition():
    A, B, _, _ = random_stable_system(N=6)
    t = np.linspace(0, 5, 50)
    lam, V = np.linalg.eig(A)
    expected = np.einsum("nk,tk,k->tn", V, np.exp(t[:, None] * lam), np.linalg.solve(V, B)).real
    basis = basis_functions(A, B, t)
    assert basis.shape == (50, 6)
    assert relative_error(basis, expected) < 1e-10


def test_basis_functions_diagonal_complex_is_elementwise_exponential():
    lam = np.array([-0.5 + 3j, -1.0, -0.2 - 1j])
    B = np.array([1.0, 2.0 - 1j, 0.5j])
    t = np.linspace(0, 4, 40)
    np.testing.assert_allclose(basis_functions(np.diag(lam), B, t), np.exp(t[:, None] * lam) * B, rtol=1e-14, atol=1e-15)


def test_diagonal_fast_path_equals_dense_expm_path():
    lam = np.array([-0.5 + 2j, -0.1 - 4j, -3.0])
    A = np.diag(lam)
    B = np.array([1.0, -2.0, 0.5])
    t = np.linspace(0, 3, 20)
    dense = np.stack([scipy.linalg.expm(s * A) @ B for s in t])
    np.testing.assert_allclose(basis_functions(A, B, t), dense, rtol=1e-12, atol=1e-14)


def test_defective_A_matches_jordan_closed_form():
    # A Jordan block has no eigenvector basis: e^{tA} = e^{-t} [[1, t], [0, 1]].
    A = np.array([[-1.0, 1.0], [0.0, -1.0]])
    t = np.linspace(0, 6, 31)
    expected = np.exp(-t)[:, None] * np.stack([1 + 2 * t, 2 * np.ones_like(t)], axis=1)  # B = (1, 2)
    assert relative_error(basis_functions(A, np.array([1.0, 2.0]), t), expected) < 1e-13
    assert relative_error(impulse_response(A, np.array([1.0, 2.0]), np.array([0.0, 1.0]), t), 2 * np.exp(-t)) < 1e-13


def test_basis_functions_matrix_B_and_scalar_t():
    A, B, _, _ = random_stable_system(N=4, M=3, P=2)
    out = basis_functions(A, B, 0.7)
    assert out.shape == (1, 4, 3)
    np.testing.assert_allclose(out[0], scipy.linalg.expm(0.7 * A) @ B, rtol=1e-12)
    np.testing.assert_allclose(basis_functions(A, B, [0.0])[0], B, rtol=0, atol=1e-14)  # e^{0A} = I


def test_impulse_response_matches_scipy_signal():
    A, B, C, D = random_stable_system(N=5)
    t = np.linspace(0, 10, 200)
    _, expected = scipy.signal.impulse((A, B[:, None], C[None, :], np.zeros((1, 1))), T=t)
    assert relative_error(impulse_response(A, B, C, t), expected) < 1e-9


def test_impulse_response_is_invariant_under_change_of_basis():
    A, B, C, _ = random_stable_system(N=5)
    V = np.random.default_rng(1).standard_normal((5, 5)) + 3 * np.eye(5)
    Vinv = np.linalg.inv(V)
    t = np.linspace(0, 6, 60)
    assert relative_error(impulse_response(Vinv @ A @ V, Vinv @ B, C @ V, t), impulse_response(A, B, C, t)) < 1e-11


def test_impulse_response_mimo_shapes_and_entries():
    A, B, C, _ = random_stable_system(N=4, M=3, P=2)
    t = np.linspace(0, 2, 7)
    K = impulse_response(A, B, C, t)
    assert K.shape == (7, 2, 3)
    for j in range(3):  # column j is the SIMO response to input j
        np.testing.assert_allclose(impulse_response(A, B[:, j], C, t), K[:, :, j], rtol=1e-13)
    np.testing.assert_allclose(impulse_response(A, B[:, 0], C[1], t), K[:, 1, 0], rtol=1e-13)


# --- simulate ---------------------------------------------------------------------------

@pytest.mark.parametrize("hold, interp", [("linear", True), ("zero", False)])
def test_simulate_expm_matches_scipy_lsim(hold, interp):
    A, B, C, D = random_stable_system(N=4)
    t = np.linspace(0, 8, 161)
    u = np.sin(2.0 * t) + 0.3 * np.random.default_rng(2).standard_normal(t.size)
    x0 = np.array([0.5, -1.0, 0.0, 2.0])
    _, expected, _ = scipy.signal.lsim((A, B[:, None], C[None, :], np.array([[D]])), u, t, X0=x0, interp=interp)
    y = simulate(A, B, C, D, u, t, x0=x0, hold=hold)
    assert relative_error(y, expected) < 1e-10


@pytest.mark.parametrize("hold", ["linear", "zero"])
def test_simulate_ode_agrees_with_expm(hold):
    A, B, C, D = mass_spring_damper(1.0, 0.5, 4.0)
    t = np.linspace(0, 10, 101)
    u = np.cos(1.7 * t) * (t < 6)
    y_expm, x_expm = simulate(A, B, C, D, u, t, hold=hold, return_state=True)
    y_ode, x_ode = simulate(A, B, C, D, u, t, hold=hold, method="ode", return_state=True)
    assert x_expm.shape == x_ode.shape == (101, 2)
    assert relative_error(y_ode, y_expm) < 1e-7
    np.testing.assert_allclose(y_expm, x_expm[:, 0], rtol=0, atol=0)  # C = [1, 0], D = 0


def test_simulate_free_response_and_nonuniform_times():
    A, B, C, D = random_stable_system(N=3)
    t = np.sort(np.random.default_rng(3).uniform(0, 5, 40))
    x0 = np.array([1.0, -0.5, 2.0])
    y = simulate(A, B, C, D, np.zeros_like(t), t, x0=x0)
    expected = np.array([C @ scipy.linalg.expm((s - t[0]) * A) @ x0 for s in t])
    assert relative_error(y, expected) < 1e-11


def test_simulate_mimo_matches_lsim_and_complex_diagonal():
    A, B, C, D = random_stable_system(N=4, M=2, P=3)
    t = np.linspace(0, 4, 81)
    u = np.stack([np.sin(t), np.exp(-t)], axis=1)
    _, expected, _ = scipy.signal.lsim((A, B, C, D), u, t)
    y = simulate(A, B, C, D, u, t)
    assert y.shape == (81, 3)
    assert relative_error(y, expected) < 1e-10
    # A complex diagonal system: the linear-hold answer converges to the exact convolution
    # y(t) = Σ_n C_n B_n ∫ e^{λ_n (t - s)} u(s) ds, here for u = 1 (exact for any grid).
    lam = np.array([-0.5 + 2j, -1.0 - 1j])
    y = simulate(np.diag(lam), np.ones(2), np.ones(2), 0.0, np.ones(t.size), t)
    expected = np.sum((np.exp(t[:, None] * lam) - 1) / lam, axis=1)
    assert relative_error(y, expected) < 1e-12


# --- transfer_function -----------------------------------------------------------------

def test_transfer_function_matches_ss2tf_polynomials():
    A, B, C, D = random_stable_system(N=5)
    num, den = scipy.signal.ss2tf(A, B[:, None], C[None, :], np.array([[D]]))
    s = np.array([0.3, 1j, -0.2 + 2j, 5.0 - 1j])
    np.testing.assert_allclose(transfer_function(A, B, C, D, s), np.polyval(num[0], s) / np.polyval(den, s), rtol=1e-9)


def test_transfer_function_is_fourier_transform_of_impulse_response():
    A, B, C, D = random_stable_system(N=4)
    t = np.linspace(0, 60, 60001)  # responses decay like e^{-0.3 t}: negligible at t = 60
    K = impulse_response(A, B, C, t)
    for omega in (0.0, 0.8, 2.5):
        integral = scipy.integrate.trapezoid(K * np.exp(-1j * omega * t), t)
        assert abs(integral + D - transfer_function(A, B, C, D, 1j * omega)[0]) < 1e-6


def test_transfer_function_mimo_shape():
    A, B, C, D = random_stable_system(N=4, M=2, P=3)
    H = transfer_function(A, B, C, D, [1j, 2.0])
    assert H.shape == (2, 3, 2)
    np.testing.assert_allclose(H[0], C @ np.linalg.solve(1j * np.eye(4) - A, B) + D, rtol=1e-12)


# --- is_stable ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    "A, stable",
    [
        (np.diag([-1.0, -0.01]), True),
        (np.diag([-1.0, 0.01]), False),
        (np.array([[0.0, 1.0], [-1.0, 0.0]]), False),  # undamped oscillator: eigenvalues ±i
        (np.array([[-0.1, 100.0], [0.0, -0.1]]), True),  # transient growth, still stable
        (np.diag([-0.5 + 3j, -0.5 - 3j]), True),
        (np.zeros((1, 1)), False),
    ],
)
def test_is_stable(A, stable):
    assert is_stable(A) is stable


def test_is_stable_is_not_fooled_by_rounding_on_the_imaginary_axis():
    # An undamped oscillator in a random basis: eigenvalues ±2i up to rounding.
    V = np.random.default_rng(4).standard_normal((2, 2)) + 2 * np.eye(2)
    A = np.linalg.solve(V, np.array([[0.0, 1.0], [-4.0, 0.0]]) @ V)
    assert np.max(np.abs(np.linalg.eigvals(A).real)) < 1e-13
    assert not is_stable(A)
    assert is_stable(A - 1e-6 * np.eye(2))
    assert not is_stable(A - 1e-6 * np.eye(2), tol=1e-3)


def test_is_stable_agrees_with_decay_of_expm():
    for seed in range(5):
        A = np.random.default_rng(seed).standard_normal((4, 4))
        with np.errstate(over="ignore"):  # unstable ones overflow, which is the point
            decays = np.linalg.norm(scipy.linalg.expm(200.0 * A)) < 1e-6
        assert is_stable(A) == decays


# --- the 2-D form of a system --------------------------------------------------------------

def test_as_system_returns_2d_float64():
    A, B, C, D = mass_spring_damper()
    system = as_system(A, B, C, D)
    assert system.A.shape == (2, 2) and system.B.shape == (2, 1) and system.C.shape == (1, 2) and system.D.shape == (1, 1)
    assert system.siso_input and system.siso_output and system.A.dtype == np.float64
    assert as_system(np.eye(2, dtype=np.float32), np.ones(2, dtype=np.complex64)).B.dtype == np.complex128


def test_hold_matrices_zero_hold():
    A, B = -np.eye(2), np.ones((2, 1))
    Phi, Gamma0, Gamma1 = continuous.hold_matrices(A, B, np.array([0.1]), "zero")
    assert Gamma1 is None and np.allclose(Phi[0], np.exp(-0.1) * np.eye(2))
    assert np.allclose(Gamma0[0, :, 0], 1 - np.exp(-0.1))
