"""Continuous-time state space models, analysed exactly (chapter 1).

    x'(t) = A x(t) + B u(t),        y(t) = C x(t) + D u(t)

These are float64 NumPy/SciPy tools for looking at a system *before* it is discretised:
its impulse response K(t) = C e^{tA} B, the basis functions e^{tA} B, its response to an
input, its transfer function and its stability. The trainable layers never call them;
the chapters and the tests use them as ground truth.

Shapes. A is (N, N). B is (N,) for one input or (N, M) for M inputs; C is (N,) for one
output or (P, N) for P outputs; D is a scalar or (P, M). Every function keeps the input
and output axes exactly when B and C have them, so a single-input single-output (SISO)
system gives plain scalars per time, and a MIMO one gives (P, M) matrices per time.
Complex entries are allowed (a diagonal A with complex eigenvalues is the typical case).
Arguments are trusted, not checked: these functions are called by the chapters and the
tests with the shapes above.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.integrate
import scipy.linalg

__all__ = [
    "System",
    "as_system",
    "mass_spring_damper",
    "basis_functions",
    "impulse_response",
    "simulate",
    "hold_matrices",
    "transfer_function",
    "is_stable",
]


class System(NamedTuple):
    """A system in 2-D form: A (N, N), B (N, M), C (P, N), D (P, M).

    ``siso_input`` / ``siso_output`` remember whether B / C were given as vectors, so that
    results can drop the corresponding axis again.
    """

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    siso_input: bool
    siso_output: bool


def _as_array(x):
    """float64, or complex128 for complex input."""
    array = np.asarray(x)
    return array.astype(np.complex128 if array.dtype.kind == "c" else np.float64)


def as_system(A, B, C=None, D=None) -> System:
    """(A, B, C, D) as 2-D float64 (or complex128) arrays.

    Args:
        A: (N, N) state matrix.
        B: (N,) or (N, M) input matrix.
        C: (N,) or (P, N) output matrix; None when only (A, B) matter (then C = I).
        D: scalar or (P, M) feedthrough; None means 0.

    Returns:
        A :class:`System` with A (N, N), B (N, M), C (P, N), D (P, M).
    """
    A, B = _as_array(A), _as_array(B)
    N = A.shape[0]
    siso_input, siso_output = B.ndim == 1, C is not None and np.ndim(C) == 1
    B = B.reshape(N, -1)
    C = np.eye(N) if C is None else _as_array(C).reshape(-1, N)
    D = _as_array(0.0 if D is None else D)
    if D.size == 1:
        D = np.full((C.shape[0], B.shape[1]), D.reshape(()), dtype=D.dtype)
    return System(A, B, C, D, siso_input, siso_output)


def _squeeze(system: System, values: np.ndarray) -> np.ndarray:
    """Drop the output axis (-2) and/or input axis (-1) of (..., P, M) values for SISO systems."""
    if system.siso_input:
        values = values[..., 0]
    if system.siso_output:
        values = values[..., 0, :] if not system.siso_input else values[..., 0]
    return values


def mass_spring_damper(mass: float = 1.0, damping: float = 0.5, stiffness: float = 4.0):
    """A mass on a spring with a damper, pushed by a force u(t); the output is its position.

    Newton: m p'' = -k p - c p' + u. With the state x = (position p, velocity p'):

        A = [[0, 1], [-k/m, -c/m]],   B = [0, 1/m],   C = [1, 0],   D = 0.

    Returns:
        (A (2, 2), B (2,), C (2,), D scalar) in float64.
    """
    A = np.array([[0.0, 1.0], [-stiffness / mass, -damping / mass]])
    B = np.array([0.0, 1.0 / mass])
    C = np.array([1.0, 0.0])
    return A, B, C, 0.0


def _is_diagonal(A: np.ndarray) -> bool:
    return np.count_nonzero(A - np.diag(np.diag(A))) == 0


def _expm_times(A: np.ndarray, t: np.ndarray) -> np.ndarray:
    """e^{tA} for every time: (T, N, N).

    A diagonal A needs only scalar exponentials. A dense A whose eigenvectors are well
    conditioned (cond(V) < 1e4, so at most ~1e-12 relative error) goes through its
    eigendecomposition, e^{tA} = V e^{tΛ} V^{-1}: one decomposition for all T times instead
    of T separate scaling-and-squaring runs. Anything else (nearly defective A) uses
    scipy.linalg.expm at every time.
    """
    if _is_diagonal(A):
        out = np.zeros((t.size, *A.shape), dtype=np.result_type(A, np.float64))
        idx = np.arange(A.shape[0])
        out[:, idx, idx] = np.exp(t[:, None] * np.diag(A)[None, :])
        return out
    lam, V = np.linalg.eig(A)
    if np.linalg.cond(V) < 1e4:
        out = np.einsum("nk,tk,km->tnm", V, np.exp(t[:, None] * lam[None, :]), np.linalg.inv(V))
        return out.real if np.isrealobj(A) else out
    return scipy.linalg.expm(t[:, None, None] * A[None])


def basis_functions(A, B, t) -> np.ndarray:
    """The basis functions e^{tA} B of the pair (A, B), one row per time.

    Row n is the state a unit impulse at time 0 leaves in x_n after time t; the impulse
    response of any output matrix C is a mix of them, K(t) = C e^{tA} B.

    Args:
        A: (N, N).
        B: (N,) or (N, M).
        t: (T,) times >= 0 (or a scalar).

    Returns:
        (T, N) for B of shape (N,), (T, N, M) for B of shape (N, M).
    """
    system = as_system(A, B)
    values = _expm_times(system.A, np.atleast_1d(_as_array(t).real)) @ system.B  # (T, N, M)
    return values[..., 0] if system.siso_input else values


def impulse_response(A, B, C, t) -> np.ndarray:
    """The continuous kernel K(t) = C e^{tA} B, so that y = K * u + D u.

    Args:
        A: (N, N).   B: (N,) or (N, M).   C: (N,) or (P, N).
        t: (T,) times >= 0 (or a scalar).

    Returns:
        (T,) for a SISO system; (T, P), (T, M) or (T, P, M) when B and/or C are matrices.
    """
    system = as_system(A, B, C)
    values = system.C @ _expm_times(system.A, np.atleast_1d(_as_array(t).real)) @ system.B  # (T, P, M)
    return _squeeze(system, values)


def hold_matrices(A, B, h, hold):
    """Exact one-interval propagators (Phi, Gamma0, Gamma1) for an input held over
    intervals of lengths h: A (N, N), B (N, M), h (K,) > 0, hold "zero" or "linear";
    each result (K, N, ·), Gamma1 None for the zero hold.

    The input is appended to the state: ``zero`` hold has u' = 0, ``linear`` hold has
    u' = w, w' = 0 (w the slope). The augmented system is autonomous, so one matrix
    exponential gives everything (Van Loan's trick):

        x(h) = Phi x(0) + Gamma0 u(0) + Gamma1 (u(h) - u(0)) / h
    """
    A, B, h = _as_array(A), _as_array(B), _as_array(h)
    N, M = B.shape
    size = N + (M if hold == "zero" else 2 * M)
    aug = np.zeros((h.size, size, size), dtype=np.result_type(A, B))
    aug[:, :N, :N] = A
    aug[:, :N, N : N + M] = B
    if hold == "linear":
        aug[:, N : N + M, N + M :] = np.eye(M)
    E = scipy.linalg.expm(h[:, None, None] * aug)
    Phi, Gamma0 = E[:, :N, :N], E[:, :N, N : N + M]
    Gamma1 = E[:, :N, N + M :] if hold == "linear" else None
    return Phi, Gamma0, Gamma1


def simulate(A, B, C, D, u, t, *, x0=None, method: str = "expm", hold: str = "linear",
             return_state: bool = False, rtol: float = 1e-10, atol: float = 1e-12):
    """The output y(t) of the system driven by the input samples u at times t.

    Between samples the input is interpolated: ``hold="linear"`` joins the samples by
    straight lines, ``hold="zero"`` keeps each sample until the next one. For such inputs
    ``method="expm"`` is exact (matrix exponentials of an augmented system, up to
    rounding); ``method="ode"`` integrates the same problem numerically with
    :func:`scipy.integrate.solve_ivp` (DOP853, tolerances ``rtol``/``atol``), which
    serves as an independent check.

    Args:
        A: (N, N).   B: (N,) or (N, M).   C: (N,) or (P, N).   D: scalar or (P, M).
        u: (T,) samples for one input, (T, M) for M inputs.
        t: (T,) strictly increasing times >= 0, T >= 2; the simulation starts at t[0].
        x0: (N,) initial state at t[0]; zero if None.
        method: "expm" or "ode".
        hold: "linear" or "zero".
        return_state: also return the states.

    Returns:
        y: (T,) for a SISO system, (T, P) with P outputs (C of shape (P, N)).
        x: (T, N) states, only when ``return_state`` is True.
    """
    system = as_system(A, B, C, D)
    t, u = _as_array(t).real, _as_array(u).reshape(np.size(t), -1)
    x0 = np.zeros(system.A.shape[0]) if x0 is None else _as_array(x0)
    A, B, C, D = system.A, system.B, system.C, system.D
    N, M = B.shape
    dtype = np.result_type(A, B, C, D, u, x0)
    if method == "expm":
        h = np.diff(t)
        if np.ptp(h) <= 1e-12 * h.max():
            # Uniform grid (up to rounding): one set of propagators serves every interval.
            Phi, Gamma0, Gamma1 = (None if m is None else np.broadcast_to(m, (h.size, *m.shape[1:]))
                                   for m in hold_matrices(A, B, h[:1], hold))
        else:
            Phi, Gamma0, Gamma1 = hold_matrices(A, B, h, hold)
        x = np.zeros((t.size, N), dtype=dtype)
        x[0] = x0
        for k in range(h.size):
            x[k + 1] = Phi[k] @ x[k] + Gamma0[k] @ u[k]
            if hold == "linear":
                x[k + 1] += Gamma1[k] @ ((u[k + 1] - u[k]) / h[k])
    elif hold == "linear":
        def rhs(s, x):
            u_s = np.array([np.interp(s, t, u[:, m]) for m in range(M)])
            return A @ x + B @ u_s

        solution = scipy.integrate.solve_ivp(
            rhs, (t[0], t[-1]), x0.astype(dtype), method="DOP853", t_eval=t, rtol=rtol, atol=atol
        )
        x = solution.y.T
    else:
        # Interval by interval with the input held constant, so the solver never steps
        # across a jump of the input.
        x = np.zeros((t.size, N), dtype=dtype)
        x[0] = x0
        for k in range(t.size - 1):
            solution = scipy.integrate.solve_ivp(
                lambda s, x, force=B @ u[k]: A @ x + force, (t[k], t[k + 1]), x[k],
                method="DOP853", rtol=rtol, atol=atol,
            )
            x[k + 1] = solution.y[:, -1]
    y = x @ C.T + u @ D.T  # (T, P)
    if system.siso_output:
        y = y[:, 0]
    return (y, x) if return_state else y


def transfer_function(A, B, C, D, s) -> np.ndarray:
    """The transfer function H(s) = C (sI - A)^{-1} B + D at complex frequencies s.

    On the imaginary axis, s = iω, |H(iω)| is the gain of the system for a sinusoid of
    angular frequency ω (a Bode magnitude plot), and H(iω) is the Fourier transform of
    the impulse response K(t) (plus D).

    Args:
        A: (N, N).   B: (N,) or (N, M).   C: (N,) or (P, N).   D: scalar or (P, M).
        s: (S,) complex frequencies (or a scalar), none of them an eigenvalue of A.

    Returns:
        (S,) complex for a SISO system; (S, P), (S, M) or (S, P, M) otherwise.
    """
    system, s = as_system(A, B, C, D), np.atleast_1d(_as_array(s))
    N = system.A.shape[0]
    resolvent_input = s[:, None, None] * np.eye(N) - system.A  # (S, N, N)
    X = np.linalg.solve(resolvent_input, np.broadcast_to(system.B, (s.size, *system.B.shape)))
    values = system.C @ X + system.D  # (S, P, M)
    return _squeeze(system, values)


def is_stable(A, tol: float | None = None) -> bool:
    """True when every eigenvalue of A has a negative real part (asymptotic stability).

    Then e^{tA} -> 0 as t -> infinity: the state forgets its past and the impulse response
    decays. An eigenvalue on the imaginary axis (an undamped oscillation) is not stable.

    Args:
        A: (N, N).
        tol: real parts must be below -tol. The default, 100·eps·max(1, ‖A‖), keeps a
            system whose eigenvalues sit on the imaginary axis from passing as stable
            because rounding nudged them a hair to the left.
    """
    A = _as_array(A)
    if tol is None:
        tol = 100 * np.finfo(np.float64).eps * max(1.0, np.linalg.norm(A, 2))
    return bool(np.all(np.linalg.eigvals(A).real < -tol))
