"""Initialisations: step sizes Δ, the diagonal state matrices of S4D/DSS, and S5's blocks."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from ._validation import (check_bool, check_choice, check_positive_finite, check_positive_int,
                          check_step_bounds, is_real_number)
from .discretize import discretize_dense, discretize_diagonal
from .hippo import dplr_legs, legs, legs_basis
from .kernels import naive_kernel, vandermonde_kernel

__all__ = [
    "log_step",
    "DIAGONAL_INITS",
    "DIAGONAL_ABLATIONS",
    "diagonal_init",
    "legs_eigenvalues",
    "legs_eigenvectors",
    "FIGURE3_STEP",
    "FIGURE3_T_MAX",
    "legs_n_basis",
    "legs_exact_basis",
    "figure3_errors",
    "DiagonalKernel",
    "diagonal_kernel",
    "block_hippo_n",
    "s5_init",
    "S5System",
    "s5_system",
]


# --- Step sizes -------------------------------------------------------------------------

def log_step(key: jax.Array, shape, step_min: float = 1e-3, step_max: float = 1e-1) -> jax.Array:
    """``log Δ ~ U[log step_min, log step_max]``, the step initialisation of S4, DSS, S4D and S5.

    Returns:
        float32 array of ``shape`` holding log Δ (layers store log Δ and use exp of it, which
        keeps Δ positive during training).
    """
    step_min, step_max = check_step_bounds(step_min, step_max)
    return jax.random.uniform(key, shape, jnp.float32, jnp.log(step_min), jnp.log(step_max))


# --- Diagonal initialisations of S4D and DSS (chapter 6) --------------------------------


#: The named initialisations of the S4D paper (§4 and §5.2).
DIAGONAL_INITS = ("legs", "inv", "lin", "inv2", "quad", "real", "rand")

#: The ablations of the S4D paper's Table 3(a), as (name, keyword arguments of diagonal_init).
DIAGONAL_ABLATIONS = {
    "imaginary × 0.01": ("inv", {"imag_scale": 0.01}),
    "imaginary × 100": ("inv", {"imag_scale": 100.0}),
    "random imaginary": ("inv", {"random_imag": True}),
    "random real": ("inv", {"random_real": True}),
    "random real and imaginary": ("inv", {"random_real": True, "random_imag": True}),
}


@functools.lru_cache(maxsize=16)
def _legs_imag(N: int) -> np.ndarray:
    """The N/2 positive μ with -1/2 + iμ an eigenvalue of HiPPO-N, decreasing.

    Not by an eigensolver (O(N³), 10-60 s at N = 2048 on two busy cores) but from a scalar
    equation. HiPPO-N = -I/2 + S with ``S_nk = sign(k - n) p_n p_k``, ``p_j² = j + 1/2``.
    Writing ``S v = iμ v`` row by row with running sums of ``p_k v_k`` gives the recurrence
    ``r_{n+1} = r_n (iμ - p_n²)/(iμ + p_n²)`` for the "remaining sum" r, and the last row
    closes it with ``r_N = -r_0``. Every factor has modulus one, so the condition is on the
    total angle: μ is an eigenvalue exactly when

        θ(μ) = 2 Σ_j atan(p_j² / μ) = (2m + 1) π   for some integer m.

    θ falls monotonically from Nπ (μ → 0) to 0 (μ → ∞), so there is one root for each
    m = 0 … N/2 - 1 (the largest μ for m = 0). We bracket each root by bisection on log μ
    and polish it with Newton steps: O(N²) work, all roots at once. Agrees with
    ``hippo.dplr_legs`` (Hermitian eigensolver) to 1e-10 relative (the tests check it).
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

    Same values and order as ``hippo.dplr_legs(N)[0][: N // 2]`` (decreasing imaginary
    part), without an eigensolver (see ``_legs_imag``); cached per N.

    Returns:
        (N/2,) complex128, every real part exactly -1/2.
    """
    N = check_positive_int("N", N, minimum=2)
    if N % 2:
        raise ValueError(f"N must be even (eigenvalues come in conjugate pairs, N/2 are kept); got N={N}.")
    return -0.5 + 1j * _legs_imag(N)


#: The keyword arguments of :func:`diagonal_init` a layer's ``init_options`` may set.
DIAGONAL_INIT_OPTIONS = ("real_part", "imag_scale", "random_real", "random_imag")


def check_init_options(init_options) -> dict:
    """``init_options`` of a diagonal layer as a dict, or ValueError naming an unknown key or
    a flag that is not a bool (the other values are checked by :func:`diagonal_init`)."""
    if init_options is None:
        return {}
    if not isinstance(init_options, dict):
        raise TypeError(f"init_options must be a dict or None; got {type(init_options).__name__} "
                        f"{init_options!r}.")
    unknown = [key for key in init_options if key not in DIAGONAL_INIT_OPTIONS]
    if unknown:
        raise ValueError(f"unknown init_options key {unknown[0]!r}; choose from: "
                         f"{', '.join(map(repr, DIAGONAL_INIT_OPTIONS))}.")
    options = dict(init_options)
    for flag in ("random_real", "random_imag"):
        if flag in options:  # read before diagonal_init runs (to draw per-channel keys)
            options[flag] = check_bool(f"init_options[{flag!r}]", options[flag])
    return options


def diagonal_init(name: str, N: int, *, key=None, real_part: float = -0.5, imag_scale: float = 1.0,
                  random_real: bool = False, random_imag: bool = False) -> np.ndarray:
    """The diagonal state matrix A of an S4D/DSS initialisation, by name.

    Complex initialisations keep one eigenvalue of each conjugate pair: N/2 values with
    Im >= 0, ``n = 0 … N/2 - 1``; a layer adds the conjugates back by taking 2·Re.

        legs   eigenvalues of HiPPO-N (the DSS / S4D-LegS init), real part -1/2
        inv    -1/2 + i (N/π) (N/(2n+1) - 1)
        lin    -1/2 + i π n                       (damped Fourier basis)
        inv2   -1/2 + i (N/π) (N/(n+1) - 1)
        quad   -1/2 + i (1/π) (2n+1)²
        rand   -1/2 + i exp(z), z ~ N(0, 1)        (as in the reference implementation)
        real   -(n+1), n = 0 … N-1

    S4D-Real is a real SSM, so it has no conjugate pairs: it returns all N real eigenvalues
    ``-1, -2, …, -N`` (float64, shape (N,)), the spectrum of HiPPO-LegS itself. Use it with
    ``conjugate=False`` in :func:`annotated_ssm.kernels.vandermonde_kernel`.

    Ablations (S4D paper, Table 3a; see ``DIAGONAL_ABLATIONS``):
        imag_scale    multiplies the imaginary parts (0.01 and 100 in the paper).
        random_imag   replaces the index n by u ~ U[0, N/2) in the formula (inv, lin, inv2,
                      quad); equally spaced u would give the formula back. (For inv,
                      u > (N-1)/2 gives a slightly negative imaginary part: the other
                      member of a conjugate pair, just as valid.)
        random_real   real parts -U[0, 1) instead of ``real_part``.

    Args:
        name: one of ``DIAGONAL_INITS``.
        N: state size of the real SSM (even for the complex initialisations).
        key: jax.random key, needed for ``rand`` and the random ablations.
        real_part: the common real part (< 0) of the complex initialisations.

    Returns:
        (N/2,) complex128, or (N,) float64 for ``real``.
    """
    check_choice("name", name, DIAGONAL_INITS)
    N = check_positive_int("N", N)
    random_real = check_bool("random_real", random_real)
    random_imag = check_bool("random_imag", random_imag)
    if not (is_real_number(real_part) and np.isfinite(real_part) and real_part < 0):
        raise ValueError(f"real_part must be a real number, finite and < 0 (a stable SSM); "
                         f"got {real_part!r}.")
    if not (is_real_number(imag_scale) and np.isfinite(imag_scale) and imag_scale >= 0):
        raise ValueError(f"imag_scale must be a real number, finite and >= 0; got {imag_scale!r}.")
    if (random_real or random_imag or name == "rand") and key is None:
        raise ValueError(f"key must be a jax.random key for name={name!r} with random_real={random_real}, "
                         f"random_imag={random_imag}; got key=None.")
    if name == "real":
        if random_real or random_imag or real_part != -0.5 or imag_scale != 1.0:
            raise ValueError("name='real' (S4D-Real: A_n = -(n+1)) takes no real_part, imag_scale, random_real "
                             "or random_imag; got non-default values.")
        return -(np.arange(N) + 1.0)
    if N % 2:
        raise ValueError(f"N must be even for name={name!r} (eigenvalues come in conjugate pairs, N/2 are "
                         f"kept); got N={N}.")
    half = N // 2
    # Random draws: a NumPy generator seeded from the JAX key's bits. Same key, same draw;
    # and unlike jax.random it compiles nothing per shape, so widgets changing N stay fast.
    rng_real = rng_imag = None
    if key is not None:
        seed = np.asarray(jax.random.key_data(key)).ravel().tolist()
        rng_real, rng_imag = (np.random.default_rng(seed + [stream]) for stream in (0, 1))
    if random_imag:
        if name in ("legs", "rand"):
            raise ValueError(f"random_imag applies to the formula initialisations inv, lin, inv2, quad; "
                             f"got name={name!r}.")
        n = half * rng_imag.uniform(size=half)
    else:
        n = np.arange(half, dtype=np.float64)
    if name == "legs":
        imag = _legs_imag(N).copy()
    elif name == "inv":
        imag = N / np.pi * (N / (2 * n + 1) - 1)
    elif name == "lin":
        imag = np.pi * n
    elif name == "inv2":
        imag = N / np.pi * (N / (n + 1) - 1)
    elif name == "quad":
        imag = (2 * n + 1) ** 2 / np.pi
    else:  # rand
        imag = np.exp(rng_imag.standard_normal(half))
    if random_real:
        real = -rng_real.uniform(size=half)
    else:
        real = np.full(half, float(real_part))
    return real + 1j * imag_scale * imag


# --- S5: block-diagonal HiPPO-N initialisation (chapter 7) -------------------------------


def block_hippo_n(state_size: int, blocks: int = 1, *, conj_sym: bool = True):
    """Eigendecomposition of S5's initial state matrix: J = ``blocks`` copies of HiPPO-N.

    ``A = blockdiag(A_N, …, A_N)`` with each block the R×R normal part of HiPPO-LegS,
    R = P / J. Each block is diagonalised stably by :func:`annotated_ssm.hippo.dplr_legs`
    (Hermitian eigensolver), so ``A V = V diag(Λ)`` with V unitary and block-diagonal.

    With ``conj_sym`` only one eigenvalue of each conjugate pair is kept (the first R/2 of
    every block, those with Im Λ > 0), and the matching columns of V: the layer then
    computes ``2·Re(C̃ x)`` over these P/2 states, which equals ``C̃ x`` over all P.

    Args:
        state_size: P, the state size of the full real system.
        blocks: J, the number of HiPPO-N blocks; must divide P.
        conj_sym: keep half of each block (then R = P/J must be even).

    Returns:
        Lambda: (P',) complex128 eigenvalues, block by block; P' = P/2 with conj_sym, else P.
        V: (P, P') complex128, the kept eigenvectors (columns).
    """
    P = check_positive_int("state_size", state_size)
    J = check_positive_int("blocks", blocks)
    if P % J:
        raise ValueError(f"blocks must divide state_size; got state_size={P}, blocks={J} "
                         f"(P / J = {P / J:g}).")
    R = P // J
    if conj_sym and R % 2:
        raise ValueError(
            f"state_size / blocks must be even with conj_sym=True (one state of each conjugate "
            f"pair is kept); got block size {R} from state_size={P}, blocks={J}."
        )
    Lambda_block, _, _, V_block = dplr_legs(R)
    keep = R // 2 if conj_sym else R
    Lambda_block, V_block = Lambda_block[:keep], V_block[:, :keep]
    Lambda = np.tile(Lambda_block, J)
    V = scipy.linalg.block_diag(*([V_block] * J))
    return Lambda, V


class S5Init(NamedTuple):
    """Initial S5 parameters (complex64). Shapes: Lambda (P',), B_tilde (P', H),
    C_tilde (H, P') or (H, 2P') when bidirectional (forward states first)."""

    Lambda: jax.Array
    B_tilde: jax.Array
    C_tilde: jax.Array


def s5_init(key: jax.Array, d_model: int, state_size: int, blocks: int = 1, *,
            conj_sym: bool = True, bidirectional: bool = False) -> S5Init:
    """S5's initialisation: Λ, V from :func:`block_hippo_n`; ``B̃ = V⁻¹B``, ``C̃ = CV``.

    B (P×H) and C (H×P) are sampled real, normal with variance 1/H and 1/P (the reference
    code draws B truncated, variance 1/P, and C complex): a real system with block-diagonal
    HiPPO-N dynamics. Because V is unitary, ``V⁻¹ = V*``; keeping
    conjugate pairs' halves keeps the map u ↦ y of that real system exactly (``y = 2·Re(C̃x)``).
    A bidirectional layer gets a second, independently sampled C for the backward scan.
    """
    H = check_positive_int("d_model", d_model)
    Lambda, V = block_hippo_n(state_size, blocks, conj_sym=conj_sym)
    P = V.shape[0]
    key_B, key_C = jax.random.split(key)
    B = np.asarray(jax.random.normal(key_B, (P, H), jnp.float32), np.float64) / np.sqrt(H)
    n_C = 2 if bidirectional else 1
    C = np.asarray(jax.random.normal(key_C, (n_C, H, P), jnp.float32), np.float64) / np.sqrt(P)
    B_tilde = V.conj().T @ B
    C_tilde = np.concatenate([c @ V for c in C], axis=-1)
    return S5Init(*(jnp.asarray(x, jnp.complex64) for x in (Lambda, B_tilde, C_tilde)))


# --- S4D-LegS against S4-LegS (S4D paper, Figure 3 and Theorem 3) ------------------------

FIGURE3_STEP = 0.002  # the book's Δ for Figure 3 (the paper's caption states none)
FIGURE3_T_MAX = 2.5


@functools.lru_cache(maxsize=8)
def legs_eigenvectors(N: int, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HiPPO-N's kept eigenvalues Λ, the weights V*B and the first ``rows`` rows of V.

    The eigenvalues come from :func:`legs_eigenvalues`; the eigenvectors from a closed form,
    which avoids the O(N³) eigenvector computation (10 s at N = 2048). With S the skew part
    of HiPPO-N and p_j² = j + 1/2, writing out ``S v = iμ v`` row by row gives a two-term
    recurrence whose solution is

        v_n ∝ p_n / (p_n² + iμ) · Π_{j<n} (iμ - p_j²) / (iμ + p_j²),

    a product of unit-modulus factors (so it is perfectly stable); we accumulate their
    angles, π - 2 atan(μ/p_j²). The tests check it against ``hippo.dplr_legs``. Cached per
    (N, rows); the arrays returned are read-only.

    Returns:
        Lambda: (N/2,) complex128, as :func:`legs_eigenvalues`.
        B_tilde: (N/2,) complex128, ``V* B`` for LegS's B.
        V_rows: (rows, N/2) complex128, rows 0 … rows-1 of the unit eigenvectors V.
    """
    Lambda = legs_eigenvalues(N)
    rows = check_positive_int("rows", rows)
    if rows > N:
        raise ValueError(f"rows must be <= N = {N}; got rows={rows}.")
    mu = Lambda.imag[:, None]  # (N/2, 1)
    p2 = np.arange(N) + 0.5  # p_j²
    angles = np.pi - 2 * np.arctan2(mu, p2)  # (N/2, N): angle of each factor
    phase = np.concatenate([np.zeros_like(mu), np.cumsum(angles[:, :-1], axis=1)], axis=1)
    vectors = np.sqrt(p2) / (p2 + 1j * mu) * np.exp(1j * phase)  # row k: eigenvector k
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    _, B = legs(N)
    out = (Lambda, vectors.conj() @ B, vectors[:, :rows].T.copy())
    for array in out:
        array.setflags(write=False)
    return out


@functools.lru_cache(maxsize=1)
def _jitted_vandermonde():
    """:func:`annotated_ssm.kernels.vandermonde_kernel`, compiled once per shape and method."""
    return jax.jit(vandermonde_kernel, static_argnames=("L", "method", "conjugate"))


def legs_n_basis(N: int, L: int, step: float = FIGURE3_STEP, method: str = "zoh", n_basis: int = 4, *,
                 slots: int | None = None) -> np.ndarray:
    """The first ``n_basis`` basis functions of S4D-LegS, (A^(N), B/2), as discrete kernels / Δ.

    Row n is ``K̄_ℓ / Δ`` of the SSM with C = e_n: the n-th coordinate of ``e^{tA^(N)} B/2``
    sampled at ``t = ℓΔ``. Computed in the eigenbasis of A^(N) (``A^(N) = V Λ V*``, see
    :func:`legs_eigenvectors`) with :func:`annotated_ssm.kernels.vandermonde_kernel`, in
    float64.

    Args:
        N: state size (even).
        L: number of samples.
        step: Δ.
        method: "zoh" or "bilinear".
        n_basis: number of basis functions (rows).
        slots: pad the N/2 states to this many (with zero weight) so that every N up to
            2·slots reuses one compiled kernel (the Figure 3 explorer does this).

    Returns:
        (n_basis, L) float64.
    """
    check_positive_finite("step", step)
    Lambda, B_tilde, V_rows = legs_eigenvectors(N, n_basis)
    if slots is not None:
        if slots < len(Lambda):
            raise ValueError(f"slots must be >= N/2 = {len(Lambda)}; got slots={slots}.")
        extra = slots - len(Lambda)
        Lambda = np.concatenate([Lambda, np.full(extra, -1.0 + 0j)])
        B_tilde = np.concatenate([B_tilde, np.zeros(extra)])
        V_rows = np.concatenate([V_rows, np.zeros((n_basis, extra))], axis=1)
    with jax.enable_x64(True):
        K = _jitted_vandermonde()(Lambda, B_tilde / 2, V_rows, step, L=L, method=method)
        return np.asarray(K) / step


def legs_exact_basis(L: int, step: float = FIGURE3_STEP, n_basis: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """S4-LegS's basis at ``t = ℓΔ``: the closed form, and the SSM's own ZOH kernel / Δ.

    LegS is lower triangular, so its first ``n_basis`` basis functions only involve the
    leading n_basis × n_basis block: the SSM kernel needs no large matrix.

    Returns:
        (closed_form, ssm_kernel), each (n_basis, L) float64.
    """
    L = check_positive_int("L", L)
    check_positive_finite("step", step)
    t = step * np.arange(L)
    A, B = legs(n_basis)
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize_dense(A, B, step, "zoh"))
    return legs_basis(n_basis, t), naive_kernel(A_bar, B_bar, np.eye(n_basis), L) / step


def figure3_errors(Ns, methods=("zoh", "bilinear"), step: float = FIGURE3_STEP, t_max: float = FIGURE3_T_MAX,
                   split: float = 1.0, t_min: float = 0.05) -> dict:
    """How far S4D-LegS's basis is from S4-LegS's (S4D paper, Theorem 3).

    Max |S4D-LegS basis - exact LegS basis| over the first four functions, on
    [t_min, split] and on (split, t_max].

    Returns:
        {(N, method): (early, late)} floats.
    """
    L = int(round(t_max / step)) + 1
    t = step * np.arange(L)
    exact, _ = legs_exact_basis(L, step)
    early = (t >= t_min - 1e-12) & (t <= split + 1e-12)
    late = t > split + 1e-12
    errors = {}
    for N in Ns:
        for method in methods:
            diff = np.abs(legs_n_basis(N, L, step, method) - exact)
            errors[N, method] = (float(diff[:, early].max()), float(diff[:, late].max()))
    return errors


# --- One diagonal initialisation at a glance (the S4D explorer of chapter 6) ------------


class DiagonalKernel(NamedTuple):
    """What one diagonal initialisation does once discretised (see :func:`diagonal_kernel`).

    A (M,) continuous eigenvalues; A_bar (M,) discrete ones; basis (4, length) the four
    slowest basis functions Re(B̄_n Ā_n^ℓ)/Δ; kernel (length,) K̄ for a fixed random C."""

    A: np.ndarray
    A_bar: np.ndarray
    basis: np.ndarray
    kernel: np.ndarray


DIAGONAL_KERNEL_LENGTH = 1024  # kernel length of diagonal_kernel
DIAGONAL_KERNEL_SLOTS = 256  # states are padded to this many: one compiled kernel for every N


@functools.lru_cache(maxsize=64)
def _seeded_init(name: str, N: int, real_part: float, imag_scale: float) -> np.ndarray:
    """Cached diagonal_init with a fixed key (S4D-LegS needs a root finding)."""
    if name == "real":
        return diagonal_init("real", N).astype(np.complex128)
    return diagonal_init(name, N, key=jax.random.key(0), real_part=real_part, imag_scale=imag_scale)


@functools.lru_cache(maxsize=1)
def _padded_diagonal_kernel():
    """Discretisation and kernel for ``DIAGONAL_KERNEL_SLOTS`` padded states, jit-compiled
    once per (method, conjugate), so that changing N or Δ never recompiles."""

    @functools.partial(jax.jit, static_argnames=("method", "conjugate"))
    def compute(A, C, step, method, conjugate):
        A_bar, B_bar = discretize_diagonal(A, jnp.ones_like(A), step, method)
        K = vandermonde_kernel(A, jnp.ones_like(A), C, step, DIAGONAL_KERNEL_LENGTH, method=method,
                               conjugate=conjugate)
        return A_bar, B_bar, K

    return compute


def diagonal_kernel(init: str, N: int, real_part: float, imag_scale: float, discretization: str,
                    step: float) -> DiagonalKernel:
    """One setting of the S4D explorer: the eigenvalues of ``diagonal_init(init, N, …)``
    (fixed key 0), their discretisation with step Δ, the four slowest basis functions and
    the kernel for B = 1 and a fixed random C (seed 0, complex normal, E|C|² = 1).

    float32 (the layers' precision), 1024 time steps. States are padded to 256 with zero
    weight, so every N compiles the same kernel: a change of N or Δ costs milliseconds.

    Args:
        init: one of ``DIAGONAL_INITS``.
        N: state size (<= 512, or <= 256 for "real").
        real_part, imag_scale: as in :func:`diagonal_init` (ignored for "real").
        discretization: "zoh" or "bilinear".
        step: Δ > 0.
    """
    check_choice("discretization", discretization, ("zoh", "bilinear"))
    check_positive_finite("step", step)
    if init == "real":
        real_part, imag_scale = -0.5, 1.0  # S4D-Real has neither
    A = _seeded_init(init, int(N), float(real_part), float(imag_scale))
    M = len(A)
    if M > DIAGONAL_KERNEL_SLOTS:
        raise ValueError(f"N must be <= {2 * DIAGONAL_KERNEL_SLOTS} (or {DIAGONAL_KERNEL_SLOTS} for 'real'); "
                         f"got N={N}.")
    rng = np.random.default_rng(0)
    C = (rng.standard_normal(M) + 1j * rng.standard_normal(M)) / np.sqrt(2)
    pad = DIAGONAL_KERNEL_SLOTS - M
    A_padded = np.concatenate([A, np.full(pad, -1.0 + 0j)]).astype(np.complex64)
    C_padded = np.concatenate([C, np.zeros(pad)]).astype(np.complex64)
    A_bar, B_bar, kernel = (np.asarray(x) for x in _padded_diagonal_kernel()(
        A_padded, C_padded, np.float32(step), method=discretization, conjugate=init != "real"))
    A_bar, B_bar = A_bar[:M].astype(np.complex128), B_bar[:M].astype(np.complex128)
    slowest = np.argsort(np.abs(A.imag), kind="stable")[:4]
    ell = np.arange(DIAGONAL_KERNEL_LENGTH)
    basis = np.real(B_bar[slowest, None] * A_bar[slowest, None] ** ell) / step
    return DiagonalKernel(A, A_bar, basis, kernel)


def warm_up_diagonal_kernel() -> None:
    """Compile :func:`diagonal_kernel`'s four (discretisation, conjugate) variants now."""
    zeros = np.zeros(DIAGONAL_KERNEL_SLOTS, np.complex64)
    for method in ("zoh", "bilinear"):
        for conjugate in (True, False):
            _padded_diagonal_kernel()(zeros - 1, zeros, np.float32(0.01), method=method, conjugate=conjugate)


# --- One S5 initialisation at a glance (the S5 explorer of chapter 7) -------------------


class S5System(NamedTuple):
    """An initial S5 system, discretised (see :func:`s5_system`).

    Lambda (P',) continuous eigenvalues in block order; step (P',) each state's Δ;
    Lambda_bar (P',) = exp(ΛΔ); responses (length, H, H): the impulse response K̄[ℓ, out, in]
    of the real system (2·Re over the kept half of each conjugate pair)."""

    Lambda: np.ndarray
    step: np.ndarray
    Lambda_bar: np.ndarray
    responses: np.ndarray


S5_SYSTEM_SLOTS = 64  # s5_system pads the kept states to this many: one compiled discretisation


def s5_system(d_model: int, state_size: int, blocks: int, step_min: float, step_max: float, length: int, *,
              seed: int = 0) -> S5System:
    """S5's initialisation, discretised by ZOH, in float64: what the S5 explorer draws.

    Λ and V come from :func:`block_hippo_n` (J = ``blocks`` copies of HiPPO-N), B (P×H) and
    C (H×P) are real normal draws (variance 1/H, 1/P) projected as in :func:`s5_init`
    (``B̃ = V*B``, ``C̃ = CV``), and log Δ is uniform on [log step_min, log step_max] per
    state as in :func:`log_step`. The random draws come from a NumPy generator seeded by
    ``seed``, and the discretisation is padded to ``S5_SYSTEM_SLOTS`` states, so that
    changing P or J compiles nothing.

    Args:
        d_model: H. state_size: P (P/2 <= S5_SYSTEM_SLOTS). blocks: J, divides P.
        step_min, step_max: the Δ range. length: time steps of the impulse responses.
    """
    H = check_positive_int("d_model", d_model)
    length = check_positive_int("length", length)
    check_positive_finite("step_min", step_min)
    check_positive_finite("step_max", step_max)
    if step_min > step_max:
        raise ValueError(f"step_min must be <= step_max; got step_min={step_min}, step_max={step_max}.")
    Lambda, V = block_hippo_n(state_size, blocks)
    P, kept = V.shape
    if kept > S5_SYSTEM_SLOTS:
        raise ValueError(f"state_size must be <= {2 * S5_SYSTEM_SLOTS}; got state_size={state_size}.")
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((P, H)) / np.sqrt(H)
    C = rng.standard_normal((H, P)) / np.sqrt(P)
    step = np.exp(rng.uniform(np.log(step_min), np.log(step_max), size=kept))
    B_tilde, C_tilde = V.conj().T @ B, C @ V  # (P', H), (H, P')
    pad = S5_SYSTEM_SLOTS - kept
    with jax.enable_x64(True):
        Lambda_bar, factor = (np.asarray(x)[:kept] for x in discretize_diagonal(
            np.concatenate([Lambda, np.full(pad, -1.0 + 0j)]), np.ones(S5_SYSTEM_SLOTS, np.complex128),
            np.concatenate([step, np.ones(pad)]), "zoh"))
    B_bar = factor[:, None] * B_tilde  # ZOH: B̄ = (Λ̄ - 1)/Λ · B̃
    powers = Lambda_bar[None, :] ** np.arange(length)[:, None]  # (length, P')
    responses = 2 * np.einsum("hp,lp,pk->lhk", C_tilde, powers, B_bar).real
    return S5System(Lambda, step, Lambda_bar, responses)
