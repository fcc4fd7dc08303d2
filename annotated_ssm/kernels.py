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


def naive_kernel(A_bar, B_bar, C, L: int, *, diagonal: bool | None = None) -> np.ndarray:
    """The kernel ``K̄_ℓ = C Ā^ℓ B̄`` by repeated multiplication, in float64 NumPy.

    This is the plain reference every fast kernel is tested against: O(L N²) work (dense)
    or O(L N) (diagonal), no cleverness, no JAX, no float32.

    Args:
        A_bar: dense (..., N, N), or the diagonal (..., N) of a diagonal Ā.
        B_bar: (..., N).
        C: (..., N).
        L: kernel length >= 1.
        diagonal: whether A_bar is the diagonal of Ā. None: dense when A_bar has one axis
            more than B_bar, diagonal otherwise (pass it explicitly when B_bar is broadcast,
            e.g. a batch of diagonals (H, N) with one B_bar (N,)).

    Returns:
        (..., L) float64 if all inputs are real, else complex128 (callers using conjugate
        symmetry take ``2 * Re``).
    """
    L = check_positive_int("L", L)
    A_bar, B_bar, C = (np.asarray(a) for a in (A_bar, B_bar, C))
    dtype = np.result_type(A_bar, B_bar, C, np.float64)
    A_bar, B_bar, C = (a.astype(dtype) for a in (A_bar, B_bar, C))
    for name, a in (("A_bar", A_bar), ("B_bar", B_bar), ("C", C)):
        if a.ndim < 1:
            raise ValueError(f"{name} must have a state axis (..., N); got a scalar.")
    dense = (A_bar.ndim >= 2 and A_bar.ndim == B_bar.ndim + 1) if diagonal is None else not diagonal
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
    if np.ndim(u) < 1 or np.ndim(K) < 1:
        raise ValueError(f"u and K must have a time axis (..., L); got u {np.shape(u)} and K {np.shape(K)}.")
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

import jax  # noqa: E402  (each section imports what it uses; the file is shared)

from ._validation import check_ndim  # noqa: E402
from .discretize import discretize_diagonal  # noqa: E402

__all__ += ["vandermonde_kernel"]


def vandermonde_kernel(A, B, C, step, L: int, *, method: str = "zoh", conjugate: bool = True,
                       max_elements: int = 2**22):
    """The kernel of a diagonal SSM: ``K̄_ℓ = Σ_n C_n B̄_n Ā_n^ℓ``, a Vandermonde product.

    The continuous diagonal (A, B) is discretised entry by entry with ``method`` (any of
    :data:`annotated_ssm.discretize.METHODS`), and the powers are taken as
    ``Ā^ℓ = exp(ℓ log Ā)`` (for ZOH ``log Ā = ΔA`` exactly), so no O(L) chain of products
    accumulates rounding error.

    With ``conjugate=True`` (the S4D convention) the inputs hold one state of each
    conjugate pair, N/2 in all, and the kernel of the full real SSM is ``2·Re`` of the sum.
    With ``conjugate=False`` the sum runs over the given states and its real part is
    returned (exact for a real SSM such as S4D-Real).

    Memory: the (..., N, L) Vandermonde matrix is never formed in full when it would hold
    more than ``max_elements`` entries; the time axis is then cut into chunks that are
    computed one after the other (``lax.map``), so memory is O(max_elements) and the work
    stays O(NL). Works under jit, grad and vmap.

    Args:
        A: (..., N) continuous eigenvalues (complex, or real), e.g. (H, N) for H channels.
        B: broadcastable to A, e.g. (H, N) or (N,).
        C: broadcastable to A.
        step: Δ > 0 broadcastable to A, e.g. (H, 1) for one step per channel.
        L: kernel length.
        method: "zoh" (DSS, S4D-ZOH), "bilinear" (S4, S4D default) or "euler".

    Returns:
        (..., L) real kernel (batch = broadcast of A, B, C, step without the state axis),
        float32 for float32/complex64 inputs.
    """
    L = check_positive_int("L", L)
    max_elements = check_positive_int("max_elements", max_elements)
    if not isinstance(conjugate, (bool, np.bool_)):
        raise ValueError(f"conjugate must be True or False; got {conjugate!r}.")
    for name, value in (("A", A), ("B", B), ("C", C)):
        check_ndim(name, value, range(1, 33), "(..., N), a state axis last")
    check_finite("C", C)
    try:
        shape = np.broadcast_shapes(np.shape(A), np.shape(B), np.shape(C), np.shape(step))
    except ValueError:
        raise ValueError(
            f"A, B, C and step must broadcast together; got shapes A {np.shape(A)}, B {np.shape(B)}, "
            f"C {np.shape(C)}, step {np.shape(step)}."
        ) from None
    A_bar, B_bar = discretize_diagonal(A, B, step, method)  # validates A, B, step, method
    complex_dtype = jnp.result_type(A_bar, B_bar, jnp.asarray(C), jnp.complex64)
    real_dtype = jnp.finfo(complex_dtype).dtype
    log_A_bar = jnp.broadcast_to(_log_A_bar(jnp.asarray(step) * jnp.asarray(A).astype(complex_dtype), method), shape)
    # Split into decay rate and phase. A discrete eigenvalue that is exactly 0 (bilinear
    # with ΔA = -2) has log -inf; clamping it to -1000 keeps Ā^0 = 1 and Ā^ℓ = 0 exact.
    log_modulus = jnp.maximum(jnp.real(log_A_bar), -1000.0)[..., None]
    angle = jnp.imag(log_A_bar)[..., None]
    W = jnp.broadcast_to(jnp.asarray(C) * B_bar, shape).astype(complex_dtype)  # (..., N): C_n B̄_n

    def block(ell):  # ell: (T,) time indices -> (..., T) kernel values
        ell = ell.astype(real_dtype)
        modulus = jnp.exp(log_modulus * ell)  # (..., N, T): |Ā_n|^ℓ
        powers = jax.lax.complex(modulus * jnp.cos(angle * ell), modulus * jnp.sin(angle * ell))
        return jnp.real(jnp.einsum("...n,...nt->...t", W, powers))

    chunk = max(1, max_elements // max(1, int(np.prod(shape))))
    if chunk >= L:
        K = block(jnp.arange(L))
    else:
        n_chunks = -(-L // chunk)
        blocks = jax.lax.map(block, jnp.arange(n_chunks * chunk).reshape(n_chunks, chunk))  # (C, ..., T)
        K = jnp.moveaxis(blocks, 0, -2).reshape(shape[:-1] + (n_chunks * chunk,))[..., :L]
    return 2 * K if conjugate else K


def _log_A_bar(dtA, method):
    """log Ā from z = ΔA, accurate when |z| is small (where log(Ā) would lose digits).

    zoh: z;  bilinear: log((1 + z/2)/(1 - z/2)) = 2 artanh(z/2);  euler: log1p(z).
    Any branch of the log works: exp(ℓ log Ā) = Ā^ℓ for integer ℓ.
    """
    if method == "zoh":
        return dtA
    if method == "bilinear":
        # artanh(-1) is -inf + nan·i; Ā = 0 there, whose log is -inf (+ 0i).
        singular = dtA == -2
        w = jnp.where(singular, 0, dtA / 2)
        return jnp.where(singular, -jnp.inf, 2 * jnp.arctanh(w))
    return jnp.log1p(dtA)
