"""Convolution kernels of discrete SSMs, and the causal convolution that applies them.

The kernel of a discrete SSM is ``K̄ = (C B̄, C Ā B̄, C Ā² B̄, …)``; the output is
``y = K̄ * u + D u``. This module holds the reference (naive) kernel, the FFT causal
convolution, and the fast structured kernels of the later chapters.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ._validation import check_finite, check_positive_int

__all__ = ["naive_kernel", "causal_conv"]  # extended by each section below


def naive_kernel(A_bar, B_bar, C, L: int) -> np.ndarray:
    """The kernel ``K̄_ℓ = C Ā^ℓ B̄`` by repeated multiplication, in float64 NumPy.

    This is the plain reference every fast kernel is tested against: O(L N²) work (dense)
    or O(L N) (diagonal), no cleverness, no JAX, no float32.

    Args:
        A_bar: dense (..., N, N), or the diagonal (..., N) of a diagonal Ā.
        B_bar: (..., N).
        C: (..., N).
        L: kernel length >= 1.

    Returns:
        (..., L) float64 if all inputs are real, else complex128 (callers using conjugate
        symmetry take ``2 * Re``).
    """
    L = check_positive_int("L", L)
    A_bar, B_bar, C = (np.asarray(a) for a in (A_bar, B_bar, C))
    dtype = np.result_type(A_bar, B_bar, C, np.float64)
    A_bar, B_bar, C = (a.astype(dtype) for a in (A_bar, B_bar, C))
    dense = A_bar.ndim >= 2 and A_bar.ndim == B_bar.ndim + 1
    N = B_bar.shape[-1]
    if A_bar.shape[-1] != N or (dense and A_bar.shape[-2] != N) or C.shape[-1] != N:
        raise ValueError(
            f"A_bar, B_bar and C must share the state size N; got shapes A_bar {A_bar.shape}, "
            f"B_bar {B_bar.shape}, C {C.shape}."
        )
    x = B_bar
    batch = np.broadcast_shapes(A_bar.shape[: -2 if dense else -1], B_bar.shape[:-1], C.shape[:-1])
    K = np.empty(batch + (L,), dtype=dtype)
    for ell in range(L):
        K[..., ell] = np.sum(C * x, axis=-1)
        x = np.einsum("...nk,...k->...n", A_bar, x) if dense else A_bar * x
    return K


def causal_conv(u, K):
    """Causal convolution ``y_ℓ = Σ_{j ≤ ℓ} K_j u_{ℓ-j}`` with FFTs.

    Both signals are zero-padded to at least 2L before the FFT, so the product of the
    transforms is a linear (not circular) convolution; the first L outputs are kept.

    Args:
        u: (..., L) real input.
        K: (..., L) real kernel, broadcastable against u.

    Returns:
        (..., L) real, the broadcast shape of u and K.
    """
    if np.shape(u)[-1] != np.shape(K)[-1]:
        raise ValueError(
            f"u and K must have the same length on their last axis; got u {np.shape(u)} and K {np.shape(K)}."
        )
    # No value checks here: this is the inner loop of every layer, and looking at the
    # values of a concrete array would copy it from the accelerator to the host.
    L = np.shape(u)[-1]
    n = _fast_fft_length(2 * L)
    U = jnp.fft.rfft(u, n=n, axis=-1)
    Kf = jnp.fft.rfft(K, n=n, axis=-1)
    return jnp.fft.irfft(U * Kf, n=n, axis=-1)[..., :L]


def _fast_fft_length(n: int) -> int:
    """Smallest 2^a 3^b 5^c >= n: FFT sizes with only small prime factors are fastest."""
    best = 1 << (n - 1).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            value = p35
            while value < n:
                value *= 2
            best = min(best, value)
            p35 *= 3
        p5 *= 5
    return best


# --- S4: the DPLR kernel through Cauchy products (chapter 4) -----------------------------


# --- DSS: the exp and softmax kernels (chapter 5) ---------------------------------------


# --- S4D: the Vandermonde kernel (chapter 6) --------------------------------------------
