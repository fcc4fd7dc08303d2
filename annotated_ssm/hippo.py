"""HiPPO matrices, their structured (normal / diagonal-plus-low-rank) forms, and the
functions that read a signal's history back out of a HiPPO state.

    legs, legt, lagt, hippo_matrices    the (A, B) of each measure
    legs_basis                      closed form of LegS's basis e^{tA}B
    reconstruction_basis, reconstruct   u(t - s) ≈ Σ_n x_n(t) g_n(s)
    normal_legs, dplr_legs          A = A_normal - P Pᵀ and its stable diagonalisation
    legs_eigenvalues                HiPPO-N's eigenvalues alone, by root finding
    memory                          feed a signal in, read its history back (chapter 2's explorer)

Everything here is float64 NumPy: these are fixed initialisations computed once, and the
float64 versions are the references the JAX code is tested against.

HiPPO-N's eigenvalues have two algorithms, each where it is needed and each tested against
the other (1e-10 relative, N = 2 … 1024):

- :func:`dplr_legs` diagonalises HiPPO-N with a Hermitian eigensolver, O(N³): the path
  whenever the eigenvectors are needed too (S4's P̃ and B̃, S5's V in
  :func:`annotated_ssm.initialization.block_hippo_n`);
- :func:`legs_eigenvalues` finds the eigenvalues alone by scalar root finding, O(N²): the path
  for S4D-LegS and DSS (:func:`annotated_ssm.initialization.diagonal_init`) and the book's
  explorers, which go to N = 2048, where the eigensolver takes seconds.

Notation (see the book's notation table): ``N`` state size, state indices ``n, k``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .continuous import hold_matrices

__all__ = [
    "MEASURES",
    "legs",
    "legt",
    "lagt",
    "hippo_matrices",
    "legendre",
    "laguerre",
    "legs_basis",
    "reconstruction_basis",
    "reconstruct",
    "normal_legs",
    "dplr_legs",
    "legs_eigenvalues",
    "Memory",
    "memory",
]

MEASURES = ("legs", "legt", "lagt")


def legs(N: int) -> tuple[np.ndarray, np.ndarray]:
    """HiPPO-LegS (scaled Legendre measure), the "HiPPO matrix" of S4.

    ``A[n, k] = -sqrt(2n+1) sqrt(2k+1)`` for n > k, ``-(n+1)`` on the diagonal, 0 above;
    ``B[n] = sqrt(2n+1)``.

    Returns:
        A: (N, N) float64, lower triangular.
        B: (N,) float64.
    """
    q = np.sqrt(2.0 * np.arange(N) + 1.0)
    A = -np.tril(np.outer(q, q), k=-1) - np.diag(np.arange(N) + 1.0)
    return A, q.copy()


def legt(N: int, theta: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """HiPPO-LegT (translated Legendre measure): memory of a sliding window of length theta.

    This is the Legendre Memory Unit form of the HiPPO paper:
    ``A[n, k] = (2n+1)/theta · (-1 if n < k else (-1)^(n-k+1))``,
    ``B[n] = (2n+1) (-1)^n / theta``. The state reconstructs the last ``theta`` time
    units of the input: ``u(t - s) ≈ Σ_n x_n(t) P_n(2s/theta - 1)`` for ``0 ≤ s ≤ theta``,
    ``P_n`` the Legendre polynomials.

    Returns:
        A: (N, N) float64.
        B: (N,) float64.
    """
    q = np.arange(N, dtype=np.float64)
    r = 2.0 * q + 1.0
    n, k = np.meshgrid(q, q, indexing="ij")
    A = np.where(n < k, -1.0, (-1.0) ** (n - k + 1)) * r[:, None] / theta
    B = (-1.0) ** q * r / theta
    return A, B


def lagt(N: int, theta: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """HiPPO-LagT (translated Laguerre): exponentially fading memory in Laguerre functions.

    ``A = (I/2 - tril(ones)) / theta`` (ones on and below the diagonal), ``B = 1/theta``:
    the form of the HiPPO code with the tilt 1/2. Then ``e^{tA}B`` is
    ``L_n(t/theta) e^{-t/(2 theta)} / theta``, ``L_n`` the Laguerre polynomials: the
    Laguerre functions, orthonormal on [0, ∞) under the uniform measure, stretched to the
    time scale ``theta``. All eigenvalues equal ``-1/(2 theta)`` (one Jordan block).

    Returns:
        A: (N, N) float64, lower triangular.
        B: (N,) float64.
    """
    A = (0.5 * np.eye(N) - np.tril(np.ones((N, N)))) / theta
    return A, np.full(N, 1.0 / theta)


def hippo_matrices(measure: str, N: int, *, theta: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The HiPPO (A, B) of a measure by name: ``"legs"`` (:func:`legs`), ``"legt"``
    (:func:`legt`, window length ``theta``) or ``"lagt"`` (:func:`lagt`, time scale
    ``theta``). ``theta`` is ignored for LegS."""
    if measure == "legs":
        return legs(N)
    return legt(N, theta) if measure == "legt" else lagt(N, theta)


def legendre(N: int, z) -> np.ndarray:
    """Legendre polynomials ``P_0 … P_{N-1}`` evaluated at ``z`` (normalised ``P_n(1) = 1``).

    Computed with the three-term recurrence ``(n+1) P_{n+1} = (2n+1) z P_n - n P_{n-1}``,
    which is stable on [-1, 1].

    Args:
        N: number of polynomials.
        z: (...) points, normally in [-1, 1].

    Returns:
        (N, ...) float64: row n is ``P_n(z)``.
    """
    z = np.asarray(z, dtype=np.float64)
    P = np.empty((N,) + z.shape)
    P[0] = 1.0
    if N > 1:
        P[1] = z
    for n in range(1, N - 1):
        P[n + 1] = ((2 * n + 1) * z * P[n] - n * P[n - 1]) / (n + 1)
    return P


def laguerre(N: int, x) -> np.ndarray:
    """Laguerre polynomials ``L_0 … L_{N-1}`` evaluated at ``x`` (``L_n(0) = 1``).

    Three-term recurrence ``(n+1) L_{n+1} = (2n+1-x) L_n - n L_{n-1}``.

    Args:
        N: number of polynomials.
        x: (...) points, normally >= 0.

    Returns:
        (N, ...) float64: row n is ``L_n(x)``.
    """
    x = np.asarray(x, dtype=np.float64)
    L = np.empty((N,) + x.shape)
    L[0] = 1.0
    if N > 1:
        L[1] = 1.0 - x
    for n in range(1, N - 1):
        L[n + 1] = ((2 * n + 1 - x) * L[n] - n * L[n - 1]) / (n + 1)
    return L


def legs_basis(N: int, t: np.ndarray) -> np.ndarray:
    """Closed form of the LegS basis ``e^{tA} B``: ``sqrt(2n+1) P_n(2e^{-t} - 1) e^{-t}``.

    Args:
        N: number of basis functions.
        t: (T,) times >= 0.

    Returns:
        (N, T) float64: row n is basis function n.
    """
    t = np.asarray(t, dtype=np.float64)
    return reconstruction_basis("legs", N, t) * np.exp(-t)


def reconstruction_basis(measure: str, N: int, s, *, theta: float = 1.0) -> np.ndarray:
    """The functions that turn a HiPPO state back into the input's history.

    With ``x(t)`` the state of ``x' = Ax + Bu`` (x(0) = 0) for the HiPPO matrices of
    ``measure``, the history is ``u(t - s) ≈ Σ_n x_n(t) g_n(s)`` for lags ``s >= 0``:

    - ``"legs"``: ``g_n(s) = sqrt(2n+1) P_n(2e^{-s} - 1)``. These are orthonormal under the
      measure ``e^{-s} ds`` on [0, ∞), and ``e^{sA}B = g_n(s) e^{-s}``, so ``x_n(t)`` is
      exactly the coefficient of the orthogonal projection of the history onto ``g_n``.
    - ``"legt"``: ``g_n(s) = P_n(2s/theta - 1)`` on the window ``0 <= s <= theta`` and 0
      outside it (LegT only remembers the last ``theta`` time units).
    - ``"lagt"``: ``g_n(s) = L_n(s/theta) e^{-s/(2 theta)}``, the Laguerre functions
      (orthonormal under the uniform measure ``ds/theta`` on [0, ∞)).

    Args:
        measure: "legs", "legt" or "lagt".
        N: state size.
        s: (S,) lags >= 0 (how far into the past).
        theta: LegT window length, LagT time scale (ignored for LegS).

    Returns:
        (N, S) float64: row n is ``g_n``.
    """
    s = np.asarray(s, dtype=np.float64)
    if measure == "legs":
        return np.sqrt(2.0 * np.arange(N) + 1.0)[:, None] * legendre(N, 2.0 * np.exp(-s) - 1.0)
    if measure == "lagt":
        return laguerre(N, s / theta) * np.exp(-s / (2.0 * theta))
    inside = s <= theta
    return legendre(N, np.where(inside, 2.0 * s / theta - 1.0, 1.0)) * inside


def reconstruct(x, s, measure: str = "legs", *, theta: float = 1.0) -> np.ndarray:
    """Reconstruct the input's history from a HiPPO state: ``u(t - s) ≈ Σ_n x_n g_n(s)``.

    Args:
        x: (..., N) states (e.g. one per time step).
        s: (S,) lags >= 0.
        measure, theta: as in :func:`reconstruction_basis`.

    Returns:
        (..., S) float64 (complex128 if x is complex): the reconstructed ``u(t - s)``.
    """
    x = np.asarray(x)
    return x @ reconstruction_basis(measure, x.shape[-1], s, theta=theta)


def normal_legs(N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The normal-plus-low-rank split of LegS (S4, Theorem 1): ``A = A_normal - P Pᵀ``.

    ``A_normal = -I/2 + S`` with ``S`` skew-symmetric (HiPPO-N, the "skew-HiPPO" of DSS),
    ``P[n] = sqrt(n + 1/2)``.

    Returns:
        A_normal: (N, N) float64.
        P: (N,) float64.
        B: (N,) float64, LegS's B.
    """
    p = np.sqrt(np.arange(N) + 0.5)
    outer = np.outer(p, p)
    S = np.triu(outer, k=1) - np.tril(outer, k=-1)
    A_normal = -0.5 * np.eye(N) + S
    _, B = legs(N)
    return A_normal, p, B


def dplr_legs(N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Diagonal-plus-low-rank form of LegS: ``A = V (diag(Λ) - P̃ P̃*) V*``.

    ``A_normal`` is diagonalised stably through the Hermitian matrix ``-i S``: its
    eigenvectors ``V`` are unitary, and every eigenvalue of ``A_normal`` is ``-1/2 + iμ``.

    Ordering: for even N the first N/2 entries have Im(Λ) > 0, sorted by decreasing
    imaginary part, and entry ``n + N/2`` is the complex conjugate of entry ``n`` (the
    columns of V too). A caller keeps one of each pair with ``[: N // 2]``. For odd N the
    one real eigenvalue (-1/2) comes last.

    Returns:
        Lambda: (N,) complex128 eigenvalues of A_normal.
        P: (N,) complex128, ``V* P``.
        B: (N,) complex128, ``V* B``.
        V: (N, N) complex128 unitary eigenvectors.
    """
    A_normal, p, b = normal_legs(N)
    S = A_normal + 0.5 * np.eye(N)
    mu, vectors = np.linalg.eigh(-1j * S)
    # -iS is Hermitian with purely imaginary entries, so its spectrum is symmetric (μ, -μ)
    # with conjugate eigenvectors. Keep the μ > 0 half and build the other half by
    # conjugation: then pairs are exact conjugates, not just up to eigensolver phases.
    order = np.argsort(-mu)
    half = N // 2
    top = order[:half]
    V_half = vectors[:, top]
    mu_half = mu[top]
    columns = [V_half, V_half.conj()]
    eigenvalues = [-0.5 + 1j * mu_half, -0.5 - 1j * mu_half]
    if N % 2:
        null = vectors[:, order[half]]
        # Rotate the null vector so that it is real (S is real, so a real one exists).
        null = null * np.exp(-1j * np.angle(null[np.argmax(np.abs(null))]))
        columns.append(null[:, None])
        eigenvalues.append(np.array([-0.5 + 0j]))
    V = np.concatenate(columns, axis=1)
    Lambda = np.concatenate(eigenvalues)
    return Lambda, V.conj().T @ p, V.conj().T @ b, V


@functools.lru_cache(maxsize=16)
def _legs_imag(N: int) -> np.ndarray:
    """The N/2 positive μ with -1/2 + iμ an eigenvalue of HiPPO-N, decreasing (read-only).

    HiPPO-N = -I/2 + S with ``S_nk = sign(k - n) p_n p_k``, ``p_j² = j + 1/2``. Writing
    ``S v = iμ v`` row by row with running sums of ``p_k v_k`` gives the recurrence
    ``r_{n+1} = r_n (iμ - p_n²)/(iμ + p_n²)`` for the "remaining sum" r, and the last row
    closes it with ``r_N = -r_0``. Every factor has modulus one, so the condition is on the
    total angle: μ is an eigenvalue exactly when

        θ(μ) = 2 Σ_j atan(p_j² / μ) = (2m + 1) π   for some integer m.

    θ falls monotonically from Nπ (μ → 0) to 0 (μ → ∞): one root for each m = 0 … N/2 - 1
    (the largest μ for m = 0). Each root is bracketed by bisection on log μ and polished by
    Newton steps: O(N²) work for all roots at once.
    """
    p2 = np.arange(N) + 0.5
    target = (2 * np.arange(N // 2) + 1) * np.pi

    def theta(mu):
        return 2 * np.sum(np.arctan2(p2, mu[:, None]), axis=1)

    def dtheta(mu):
        return -2 * np.sum(p2 / (p2**2 + mu[:, None] ** 2), axis=1)

    # Every root lies in (1e-3, N²): θ(1e-3) > (N - 1)π and θ(N²) < π.
    lo = np.full(N // 2, np.log(1e-3))
    hi = np.full(N // 2, 2 * np.log(float(N)) + 1)
    for _ in range(30):  # relative bracket width 2^-30 · 20: Newton's basin
        mid = (lo + hi) / 2
        root_above = theta(np.exp(mid)) > target
        lo, hi = np.where(root_above, mid, lo), np.where(root_above, hi, mid)
    mu = np.exp((lo + hi) / 2)
    for _ in range(3):  # quadratic convergence: 1e-8 -> 1e-16
        mu = mu - (theta(mu) - target) / dtheta(mu)
    mu.setflags(write=False)
    return mu


def legs_eigenvalues(N: int) -> np.ndarray:
    """The N/2 eigenvalues of HiPPO-N (the normal part of HiPPO-LegS) with Im > 0.

    The values and order of ``dplr_legs(N)[0][: N // 2]`` (decreasing imaginary part; they
    agree to 1e-10 relative), from the root finding of ``_legs_imag`` instead of an O(N³)
    eigensolver; cached per N.

    Returns:
        (N/2,) complex128, every real part exactly -1/2.
    """
    return -0.5 + 1j * _legs_imag(N)


# --- A signal in, its history out (chapter 2's explorer) ------------------------------------


class Memory(NamedTuple):
    """What a HiPPO state remembers (see :func:`memory`).

    lags (S,): s = 0, dt, 2dt, … up to the window; basis (N, S): e^{sA}B at those lags;
    state (N,): x(T); reconstruction (S,): Σ_n x_n(T) g_n(s), the history u(T - s) read
    back from the state."""

    lags: np.ndarray
    basis: np.ndarray
    state: np.ndarray
    reconstruction: np.ndarray


def memory(u, dt: float, measure: str, N: int, window: float, *, theta: float = 1.0) -> Memory:
    """Feed samples into the HiPPO SSM of ``measure`` and read the last ``window`` back.

    The input is held constant over each step of length ``dt`` (sample k over
    [k·dt, (k+1)·dt)), for which zero-order hold is exact
    (:func:`annotated_ssm.continuous.hold_matrices`): the state follows ``x ← Ā x + B̄ u_k``.
    The same Ā = e^{dt·A} steps the basis e^{sA}B along the lags. Float64 NumPy: nothing is
    compiled, so moving N costs one (N+1)×(N+1) exponential.

    Args:
        u: (T,) input samples; the state is read at time T·dt.
        dt: step > 0.
        measure, theta: as in :func:`hippo_matrices`.
        N: state size.
        window: the longest lag read back (> 0).

    Returns:
        Memory(lags, basis, state, reconstruction).
    """
    u = np.asarray(u, dtype=np.float64)
    A, B = hippo_matrices(measure, N, theta=theta)
    Phi, Gamma0, _ = hold_matrices(A, B[:, None], np.array([float(dt)]), "zero")
    A_bar, B_bar = Phi[0], Gamma0[0, :, 0]
    state = np.zeros(N)
    for u_k in u:
        state = A_bar @ state + B_bar * u_k
    lags = dt * np.arange(int(round(window / dt)) + 1)
    basis = np.empty((N, lags.size))
    basis[:, 0] = B
    for j in range(1, lags.size):
        basis[:, j] = A_bar @ basis[:, j - 1]
    return Memory(lags, basis, state, reconstruct(state, lags, measure, theta=theta))
