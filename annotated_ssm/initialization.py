"""Initialisations of the layers: step sizes Δ, the diagonal state matrices of S4D/DSS, and
S5's blocks.

    log_step_size                    log Δ ~ U[log Δ_min, log Δ_max] (every layer)
    diagonal_init, DIAGONAL_INITS    S4D/DSS eigenvalues by name (S4D paper, §4 and §5.2)
    block_hippo_n, s5_init           S5's block-diagonal HiPPO-N, Λ, B̃ and C̃

Random draws use ``jax.random`` with the key passed in (same key, same draw); HiPPO-N's
eigenvalues come from :mod:`annotated_ssm.hippo`. The explorers' faster, padded versions of
these numbers live in :mod:`annotated_ssm.book.explorer_numerics`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from .hippo import dplr_legs, legs_eigenvalues

__all__ = [
    "log_step_size",
    "DIAGONAL_INITS",
    "DIAGONAL_ABLATIONS",
    "DIAGONAL_INIT_OPTIONS",
    "diagonal_init",
    "block_hippo_n",
    "S5Init",
    "s5_init",
    "s5_projection",
]


# --- Step sizes -------------------------------------------------------------------------

def log_step_size(key: jax.Array, shape, step_min: float = 1e-3,
                  step_max: float = 1e-1) -> jax.Array:
    """``log Δ ~ U[log step_min, log step_max]``, the step initialisation of S4, DSS, S4D and S5.

    Returns:
        float32 array of ``shape`` holding log Δ (layers store log Δ and use exp of it, which
        keeps Δ positive during training).
    """
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


def _uniform(key: jax.Array, size: int) -> np.ndarray:
    """(size,) float64 holding float32 draws from U[0, 1)."""
    return np.asarray(jax.random.uniform(key, (size,), jnp.float32), np.float64)


#: The keyword arguments of :func:`diagonal_init` a layer's ``init_options`` may set.
DIAGONAL_INIT_OPTIONS = ("real_part", "imag_scale", "random_real", "random_imag")


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
        random_real   real parts -U(0, 1] instead of ``real_part``.

    Args:
        name: one of ``DIAGONAL_INITS``.
        N: state size of the real SSM (even for the complex initialisations).
        key: jax.random key, needed for ``rand`` and the random ablations: the draws are
            ``jax.random`` ones from it (float32, widened), the same for the same key.
        real_part: the common real part (< 0) of the complex initialisations.

    Returns:
        (N/2,) complex128, or (N,) float64 for ``real``.
    """
    if name == "real":  # the other arguments do not apply
        return -(np.arange(N) + 1.0)
    half = N // 2
    # Two independent streams: the real parts' draw and the imaginary parts' draw. float32
    # draws (JAX's default, whatever jax_enable_x64 says), widened to float64.
    if key is not None:
        key_real, key_imag = jax.random.split(key)
    if random_imag:
        n = half * _uniform(key_imag, half)
    else:
        n = np.arange(half, dtype=np.float64)
    if name == "legs":
        imag = legs_eigenvalues(N).imag
    elif name == "inv":
        imag = N / np.pi * (N / (2 * n + 1) - 1)
    elif name == "lin":
        imag = np.pi * n
    elif name == "inv2":
        imag = N / np.pi * (N / (n + 1) - 1)
    elif name == "quad":
        imag = (2 * n + 1) ** 2 / np.pi
    else:  # rand
        imag = np.exp(np.asarray(jax.random.normal(key_imag, (half,), jnp.float32), np.float64))
    if random_real:
        # 1 - U: (0, 1], never 0 (float32 draws hit 0 once in 2^23, a real part of 0 is
        # not stable and has no log for the layer's exp transform).
        real = -(1.0 - _uniform(key_real, half))
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
    J = blocks
    R = state_size // J
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
    H = d_model
    Lambda, V = block_hippo_n(state_size, blocks, conj_sym=conj_sym)
    P = V.shape[0]
    key_B, key_C = jax.random.split(key)
    B = np.asarray(jax.random.normal(key_B, (P, H), jnp.float32), np.float64) / np.sqrt(H)
    n_C = 2 if bidirectional else 1
    C = np.asarray(jax.random.normal(key_C, (n_C, H, P), jnp.float32), np.float64) / np.sqrt(P)
    B_tilde, C_tilde = s5_projection(V, B, C)
    C_tilde = np.concatenate(list(C_tilde), axis=-1)  # (H, P') or (H, 2P'): one per direction
    return S5Init(*(jnp.asarray(x, jnp.complex64) for x in (Lambda, B_tilde, C_tilde)))


def s5_projection(V, B, C):
    """``B̃ = V⁻¹B = V*B`` (V is unitary) and ``C̃ = CV``: B (P, H) and C (..., H, P) in the
    eigenbasis of the kept states, V (P, P'). NumPy arrays are multiplied by NumPy (float64
    stays float64, as in :func:`s5_init`); JAX arrays in full float32 precision."""
    if any(isinstance(x, jax.Array) for x in (V, B, C)):
        full = jax.lax.Precision.HIGHEST
        return jnp.matmul(V.conj().T, B, precision=full), jnp.matmul(C, V, precision=full)
    return V.conj().T @ B, C @ V
