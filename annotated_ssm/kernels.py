"""Convolution kernels of discrete SSMs, and the causal convolution that applies them.

The kernel of a discrete SSM is ``K̄ = (C B̄, C Ā B̄, C Ā² B̄, …)``; the output is
``y = K̄ * u + D u``. This module holds the reference (naive) kernel, the FFT causal
convolution, and the fast structured kernels of the later chapters.

Every matrix product here passes ``precision=jax.lax.Precision.HIGHEST``: a GPU's default
float32 product is TF32 (about three decimal digits), and a kernel's error is carried into
every output of the long convolution that applies it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .discretize import discretize_diagonal, expm1_ratio

__all__ = [
    "naive_kernel",
    "causal_conv",
    "bidirectional_conv",
    "cauchy",
    "s4_kernel",
    "s4_nodes",
    "S4_CHUNK_SIZE",
    "DSS_VARIANTS",
    "dss_coefficients",
    "dss_kernel",
    "vandermonde_kernel",
]


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
    A_bar, B_bar, C = (np.asarray(a) for a in (A_bar, B_bar, C))
    dtype = np.result_type(A_bar, B_bar, C, np.float64)
    A_bar, B_bar, C = (a.astype(dtype) for a in (A_bar, B_bar, C))
    dense = (A_bar.ndim >= 2 and A_bar.ndim == B_bar.ndim + 1) if diagonal is None else not diagonal
    x = B_bar
    batch = np.broadcast_shapes(A_bar.shape[: -2 if dense else -1], B_bar.shape[:-1], C.shape[:-1])
    K = np.empty(batch + (L,), dtype=x.dtype)
    for ell in range(L):
        K[..., ell] = np.sum(C * x, axis=-1)
        x = np.einsum("...nk,...k->...n", A_bar, x) if dense else A_bar * x
    return K


def causal_conv(u, K):
    """Causal convolution ``y_ℓ = Σ_{j ≤ ℓ} K_j u_{ℓ-j}`` by FFT.

    Zero-padded to at least 2L, so the FFT's circular convolution is the linear one on the
    first L outputs.

    Args:
        u: (..., L) real input.
        K: (..., L) real kernel, broadcastable against u.

    Returns:
        (..., L) real, the broadcast shape of u and K.
    """
    L = np.shape(u)[-1]
    n = _fast_fft_length(2 * L)
    U = jnp.fft.rfft(u, n=n, axis=-1)
    Kf = jnp.fft.rfft(K, n=n, axis=-1)
    return jnp.fft.irfft(U * Kf, n=n, axis=-1)[..., :L]


def bidirectional_conv(u, K_forward, K_backward):
    """A forward and a backward convolution, ``Σ_{j ≤ ℓ} K→_{ℓ-j} u_j + Σ_{j ≥ ℓ} K←_{j-ℓ} u_j``:
    ``causal_conv(u, K→) + flip(causal_conv(flip(u), K←))`` with u transformed once.

    One two-sided kernel, K→ at lags 0 … L-1 and K← at lags 0, -1, …, -(L-1), which a
    circular convolution of length ≥ 2L-1 applies without wrapping: three FFTs, not six.

    Args:
        u: (..., L) real input.
        K_forward, K_backward: (..., L) real kernels, broadcastable against u.

    Returns:
        (..., L) real, the broadcast shape of u and the kernels.
    """
    L = np.shape(u)[-1]
    n = _fast_fft_length(2 * L)
    K_forward, K_backward = jnp.broadcast_arrays(jnp.asarray(K_forward), jnp.asarray(K_backward))
    gap = jnp.zeros(K_forward.shape[:-1] + (n - 2 * L + 1,), K_forward.dtype)
    two_sided = jnp.concatenate([
        K_forward.at[..., 0].add(K_backward[..., 0]),  # lag 0 belongs to both directions
        gap,
        jnp.flip(K_backward[..., 1:], -1),  # lag -d sits at position n - d
    ], axis=-1)
    U = jnp.fft.rfft(u, n=n, axis=-1)
    return jnp.fft.irfft(U * jnp.fft.rfft(two_sided, axis=-1), n=n, axis=-1)[..., :L]


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


def cauchy(v, z, lambd, *, conjugate: bool = False, imaginary: bool = False):
    """The Cauchy kernel ``k_j = Σ_n v_n / (z_j - λ_n)``.

    With ``conjugate`` a pair shares one denominator ``(z - λ)(z - conj λ)``, so it costs one
    division; with ``imaginary`` too, that denominator is ``(|λ|² - y²) - 2i Re(λ) y``.

    Args:
        v: (..., M) complex weights; an extra axis (e.g. (..., 4, M) with lambd (..., 1, M))
            shares one reciprocal between several products, as S4's kernel needs.
        z: (..., F) evaluation points.
        lambd: (..., M) complex poles; v, z and lambd broadcast together.
        conjugate: also sum the conjugate poles, ``conj(v_n) / (z_j - conj(λ_n))``: the sum
            over all N = 2M states of a conjugate-symmetric system storing M.
        imaginary: z holds real y and the points are iy (S4's nodes).

    Returns:
        (..., F) complex.
    """
    v, z, lambd = jnp.asarray(v), jnp.asarray(z), jnp.asarray(lambd)
    if imaginary and not conjugate:
        z, imaginary = 1j * z, False
    if not conjugate:
        # The sum over n is an einsum contraction (a matrix product, fast on every backend)
        # against the reciprocal matrix, which broadcasting computes once per (z, λ).
        reciprocal = 1 / (z[..., None, :] - lambd[..., :, None])  # (..., M, F)
        return jnp.einsum("...n,...nf->...f", v.astype(reciprocal.dtype), reciprocal,
                          precision=jax.lax.Precision.HIGHEST)
    # v/(z-λ) + v̄/(z-λ̄) = (2 Re(v) z - 2 Re(v λ̄)) / (z² - 2 Re(λ) z + |λ|²): real weights
    # over one complex denominator d per pair. With z = x + iy, d = d_re + i d_im and
    # 1/d = (d_re - i d_im)/|d|², all in real arithmetic; each sum is then two real matrix
    # products (weights against Re(1/d) and Im(1/d)) instead of a complex one.
    pole_re = jnp.real(lambd)[..., :, None]  # (..., M, 1)
    pole_abs2 = (jnp.real(lambd) ** 2 + jnp.imag(lambd) ** 2)[..., :, None]
    if imaginary:  # x = 0
        y = z[..., None, :]  # (..., 1, F)
        d_re = pole_abs2 - y * y  # (..., M, F)
        d_im = -2 * pole_re * y
    else:
        x, y = jnp.real(z)[..., None, :], jnp.imag(z)[..., None, :]  # (..., 1, F)
        d_re = x * x - y * y - 2 * pole_re * x + pole_abs2  # (..., M, F)
        d_im = 2 * (x - pole_re) * y
    inverse_abs2 = 1 / (d_re * d_re + d_im * d_im)
    recip_re, recip_im = d_re * inverse_abs2, -d_im * inverse_abs2
    real_dtype = recip_re.dtype
    times_z = (2 * jnp.real(v)).astype(real_dtype)  # (..., M) weights of z/d
    constant = (-2 * jnp.real(v * jnp.conj(lambd))).astype(real_dtype)  # weights of 1/d
    weights = jnp.stack([times_z, constant], axis=-2)  # (..., 2, M)
    product = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)
    sums = jax.lax.complex(product(weights, recip_re), product(weights, recip_im))  # (..., 2, F)
    if imaginary:  # iy · s = -y Im(s) + i y Re(s)
        s_z, s_1 = sums[..., 0, :], sums[..., 1, :]
        return jax.lax.complex(s_1.real - z * s_z.imag, s_1.imag + z * s_z.real)
    return z * sums[..., 0, :] + sums[..., 1, :]


def s4_nodes(L: int, *, half: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The frequencies where S4 evaluates its generating function, in the bilinear variable.

    At the roots of unity ``ω_j = exp(-2πi j/L)``, the bilinear map
    ``(1 - ω)/(1 + ω) = i tan(πj/L)`` is purely imaginary (the unit circle is mapped onto the
    imaginary axis), and ``2/(1 + ω) = 1 + i tan(πj/L)``. Computing ``tan`` in float64 here
    (these are constants) avoids the cancellation of ``1 - ω`` near ω = 1 in float32.

    The root ω = -1 (j = L/2, even L only) maps to infinity and is left out; S4's kernel
    uses its exact value there, ``K̂(-1) = (Δ/2) C̃ B``.

    Args:
        L: kernel length.
        half: only ``j = 0 … L//2`` (enough for a real kernel, whose transform is Hermitian);
            otherwise ``j = 0 … L-1``.

    Returns:
        j: (F,) int, the indices kept (j = L/2 excluded).
        tan: (F,) float64, ``tan(πj/L)``.
    """
    j = np.arange(L // 2 + 1 if half else L)
    j = j[2 * j != L]
    return j, np.tan(np.pi * j / L)


#: Frequencies per chunk of S4's kernel by default (measured: benchmarks/README.md).
S4_CHUNK_SIZE = 64


def s4_kernel(Lambda, P, B, C_tilde, step, L: int, *, Q=None, conjugate: bool = True,
              chunk_size: int | None = None):
    """S4's convolution kernel for ``A = diag(Λ) - P Q*`` (bilinear), by Algorithm 1 of S4:
    ``K̄_ℓ = C Ā^ℓ B̄`` for ``ℓ < L``, with ``C̃ = C (I - Ā^L)`` the parameter S4 learns, for
    this L (``S4Layer`` keeps C̃ for one reference length and truncates or converts it, so its
    kernel does not depend on the call length).

    The truncated generating function ``K̂(ω) = C̃ (I - Āω)⁻¹ B̄`` at the roots of unity, by
    four Cauchy sums over the poles Λ and the Woodbury identity for the rank-one term, then
    ``K̄ = iFFT(K̂)``: with g = (2/Δ)(1 - ω)/(1 + ω) and c = 2/(1 + ω),

        k00, k01, k10, k11 = Σ_n [C̃B, C̃P, Q̄B, Q̄P]_n / (g - Λ_n)
        K̂ = c (k00 - k01 k10 / (1 + k11)).

    Args:
        Lambda: (..., M) complex; with ``conjugate``, one of each conjugate pair (N = 2M).
        P, B, C_tilde: (..., M) complex; C_tilde may have extra leading axes.
        step: (...) Δ > 0, broadcast against the batch axes of Λ (e.g. (H,) for Λ (H, M)).
        L: kernel length >= 1.
        Q: (..., M) complex; defaults to P (true for HiPPO).
        conjugate: the states are one of each conjugate pair: a real kernel from the
            frequencies j ≤ L/2. Otherwise all L frequencies and a complex kernel.
        chunk_size: frequencies per chunk (``lax.map``, recomputed in the backward pass):
            memory O(M · chunk_size) instead of O(M · L). None: ``S4_CHUNK_SIZE``.

    Returns:
        (..., L): real (``conjugate``) or complex; the broadcast batch shape of the inputs.
    """
    Q = P if Q is None else Q
    arrays = [jnp.asarray(a) for a in (Lambda, P, Q, B, C_tilde)]
    Lambda, P, Q, B, C_tilde = arrays
    step = jnp.asarray(step)
    real_dtype = jnp.result_type(*(jnp.real(a).dtype for a in arrays), step.dtype)
    complex_dtype = jnp.result_type(real_dtype, jnp.complex64)
    Lambda, P, Q, B, C_tilde = (a.astype(complex_dtype) for a in (Lambda, P, Q, B, C_tilde))
    step = step.astype(real_dtype)[..., None]  # (..., 1): broadcasts against the state axis

    # The four weight vectors, stacked on a new axis (..., 4, M): the Cauchy products share z, Λ.
    Qc = jnp.conj(Q)
    first = jnp.stack(jnp.broadcast_arrays(C_tilde * B, C_tilde * P), axis=-2)
    second = jnp.stack(jnp.broadcast_arrays(Qc * B, Qc * P), axis=-2)
    first, second = jnp.broadcast_arrays(first, second)
    weights = jnp.concatenate([first, second], axis=-2)
    poles = Lambda[..., None, :]  # (..., 1, M)
    scale = (2 / step)[..., None]  # (..., 1, 1): g = i · scale · tan

    def generating_function(tan):
        """K̂ at the nodes with the given tan(πj/L), shape (F,) -> (..., F)."""
        # g = i · scale · tan: the nodes lie on the imaginary axis.
        k = cauchy(weights, scale * tan, poles, conjugate=conjugate, imaginary=True)  # (..., 4, F)
        k00, k01, k10, k11 = k[..., 0, :], k[..., 1, :], k[..., 2, :], k[..., 3, :]
        c = 1 + 1j * tan  # 2/(1 + ω)
        return c * (k00 - k01 * k10 / (1 + k11))

    j, tan = s4_nodes(L, half=conjugate)
    tan = jnp.asarray(tan, dtype=real_dtype)
    chunk_size = S4_CHUNK_SIZE if chunk_size is None else chunk_size
    if chunk_size >= tan.shape[0]:
        K_hat = generating_function(tan)
    else:
        n_chunks = -(-tan.shape[0] // chunk_size)
        padded = jnp.pad(tan, (0, n_chunks * chunk_size - tan.shape[0]))
        # checkpoint: the backward pass recomputes each chunk instead of storing it.
        chunks = jax.lax.map(jax.checkpoint(generating_function),
                             padded.reshape(n_chunks, chunk_size))
        K_hat = jnp.moveaxis(chunks, 0, -2).reshape(chunks.shape[1:-1] + (-1,))[..., : tan.shape[0]]

    if L % 2 == 0:
        # ω = -1: (I + Ā)⁻¹ B̄ = Δ B / 2 for the bilinear Ā, so K̂(-1) = (Δ/2) C̃ B.
        CB = C_tilde * B
        total = 2 * jnp.sum(CB.real, axis=-1) if conjugate else jnp.sum(CB, axis=-1)
        nyquist = (step[..., 0] / 2 * total).astype(complex_dtype)
        nyquist = jnp.broadcast_to(nyquist, K_hat.shape[:-1])[..., None]
        split = L // 2
        K_hat = jnp.concatenate([K_hat[..., :split], nyquist, K_hat[..., split:]], axis=-1)
    if conjugate:
        return jnp.fft.irfft(K_hat, n=L, axis=-1)
    return jnp.fft.ifft(K_hat, n=L, axis=-1)


# --- DSS: the exp and softmax kernels (chapter 5) ---------------------------------------


DSS_VARIANTS = ("exp", "softmax")

# Above this many entries of the (H, N/2, L) matrix e^{λΔℓ}, dss_kernel works in chunks of
# the length axis instead of building the whole matrix (2^22 complex64 numbers = 32 MiB).
_DSS_MAX_ENTRIES = 1 << 22


def _reciprocal(x, eps):
    """A bounded ``1/x``: ``conj(x) / (|x|² + eps)`` (the regularised reciprocal of DSS, Appendix A.2).

    Equal to 1/x up to a relative ``eps/|x|²``; finite (at most ``1/(2√eps)``) and
    differentiable everywhere, including at x = 0.
    """
    return jnp.conj(x) / (jnp.real(x * jnp.conj(x)) + eps)


def dss_coefficients(Lambda, W, step, L: int, variant: str = "exp", *, eps: float = 1e-10):
    """The weights and time shifts of a DSS kernel, ``K̄_ℓ = 2 Re Σ_n c_n e^{λ_nΔ(ℓ - s_n)}``
    (Gupta et al., Proposition 1): DSS-exp ``c_n = W_n (e^{λ_nΔ} - 1)/λ_n``, ``s_n = 0``;
    DSS-softmax ``2 Re Σ_n (W_n/λ_n) softmax_ℓ(λ_nΔℓ)``, the softmax over ℓ < L.

    The softmax is shifted by its largest entry, like a real one: s_n = L-1 where Re(λ_n) > 0,
    so no exponent has a positive real part. With a = ±λΔ (Re a <= 0) a row sums to
    ``(e^{aL} - 1)/(e^{a} - 1)``, and ``1/(e^{aL} - 1)``, singular exactly where
    Proposition 1 excludes λ, becomes the bounded ``conj(x)/(|x|² + eps)``.

    Args:
        Lambda: (N/2,) or (H, N/2) complex eigenvalues (one of each conjugate pair).
        W: (..., H, N/2) complex weights (e.g. (2, H, N/2) for a bidirectional layer).
        step: (H,) Δ > 0 per channel.
        L: kernel length.
        variant: "exp" or "softmax".
        eps: regulariser of the softmax reciprocal (changes 1/x by a relative eps/|x|²).

    Returns:
        coef (..., H, N/2) complex; shift (H, N/2) real, 0 or L-1; dtLambda (H, N/2), λΔ.
    """
    Lambda, W, step = jnp.asarray(Lambda), jnp.asarray(W), jnp.asarray(step)
    H = step.shape[0]
    Lambda = jnp.broadcast_to(Lambda, (H, Lambda.shape[-1]))
    dtLambda = step[:, None] * Lambda  # (H, N/2)
    zeros = jnp.zeros(dtLambda.shape, dtype=step.dtype)
    if variant == "exp":
        # (e^{λΔ} - 1)/λ = Δ · expm1(λΔ)/(λΔ): expm1 keeps it accurate when |λΔ| is tiny
        # (e^{λΔ} - 1 would cancel to a few digits in float32).
        return W * (step[:, None] * expm1_ratio(dtLambda)), zeros, dtLambda
    positive = jnp.real(Lambda) > 0
    a = jnp.where(positive, -dtLambda, dtLambda)  # Re(a) <= 0 always
    signed_step = jnp.where(positive, -step[:, None], step[:, None])  # a = signed_step · λ
    first = signed_step * expm1_ratio(a)  # (e^{a} - 1)/λ, smooth in λ
    second = _reciprocal(jnp.expm1(a * L), eps)  # 1/(e^{aL} - 1): singular iff e^{λLΔ} = 1
    coef = W * (first * second)
    shift = jnp.where(positive, jnp.asarray(L - 1, step.dtype), zeros)
    return coef, shift, dtLambda


def dss_kernel(Lambda, W, step, L: int, variant: str = "exp", *, eps: float = 1e-10,
               chunk: int | None = None):
    """The DSS convolution kernel of H channels, ``2 Re Σ_n c_n e^{λ_nΔ(ℓ - s_n)}`` with (c, s)
    from :func:`dss_coefficients`; DSS-exp needs Re(λ) <= 0, DSS-softmax takes any λ.

    The (H, N/2, L) exponentials in chunks of the length axis when large, each recomputed in
    the backward pass (``jax.checkpoint``): memory O(H·N·chunk), under ``grad`` too.

    Args:
        Lambda: (N/2,) (shared by the channels, as in DSS) or (H, N/2) complex.
        W: (..., H, N/2) complex.
        step: (H,) Δ > 0.
        L: kernel length >= 1.
        variant: "exp" or "softmax".
        eps: see :func:`dss_coefficients`.
        chunk: length of the L-chunks; None: chunks only above 2^22 exponentials.

    Returns:
        (..., H, L) real.
    """
    coef, shift, dtLambda = dss_coefficients(Lambda, W, step, L, variant, eps=eps)
    H, half = dtLambda.shape
    if chunk is None:
        chunk = L if H * half * L <= _DSS_MAX_ENTRIES else max(1, _DSS_MAX_ENTRIES // (H * half))
    chunk = min(chunk, L)
    real_dtype = jnp.real(coef).dtype

    def block(positions):
        # positions: (c,) time indices; exponents λΔ(ℓ - s) all have Re <= 0.
        exponent = dtLambda[..., None] * (positions - shift[..., None])  # (H, N/2, c)
        return 2 * jnp.real(jnp.einsum("...hn,hnc->...hc", coef, jnp.exp(exponent),
                                       precision=jax.lax.Precision.HIGHEST))

    if chunk == L:
        return block(jnp.arange(L, dtype=real_dtype))
    n_chunks = -(-L // chunk)
    # Padded positions past L-1 are clamped to L-1 (then dropped): an exponent with a
    # positive real part must never appear, even in discarded entries, or grad sees inf·0.
    positions = jnp.minimum(jnp.arange(n_chunks * chunk), L - 1).astype(real_dtype)
    positions = positions.reshape(n_chunks, chunk)
    blocks = jax.lax.map(jax.checkpoint(block), positions)  # (n_chunks, ..., H, c)
    K = jnp.moveaxis(blocks, 0, -2)  # (..., H, n_chunks, c)
    return K.reshape(K.shape[:-2] + (n_chunks * chunk,))[..., :L]


# --- S4D: the Vandermonde kernel (chapter 6) --------------------------------------------


def vandermonde_kernel(A, B, C, step, L: int, *, method: str = "zoh", conjugate: bool = True,
                       max_elements: int = 2**22, block_size: int | None = None):
    """The kernel of a diagonal SSM, ``K̄_ℓ = Σ_n C_n B̄_n Ā_n^ℓ`` (a Vandermonde product), with
    (A, B) discretised entry by entry by ``method``.

    Powers from their exponents, ``Ā^ℓ = exp(ℓ log Ā)`` (no O(L) chain of products), in
    blocks: with ℓ = aT + b, ``K̄_{aT+b} = Re Σ_n (C_n B̄_n Ā_n^{aT}) Ā_n^b = (X Y)_{ab}``, a
    real matrix product of X (L/T × 2N) and Y (2N × T). N(L/T + T) exponentials, not NL, and
    no (N, L) matrix; groups of rows go through ``lax.map`` and ``jax.checkpoint`` when large.

    Args:
        A: (..., N) continuous eigenvalues (complex, or real), e.g. (H, N) for H channels.
        B, C: broadcastable to A (C e.g. (2, H, N) for a bidirectional layer).
        step: Δ > 0 broadcastable to A, e.g. (H, 1) for one step per channel.
        L: kernel length.
        method: "zoh", "bilinear" or "euler" (:data:`annotated_ssm.discretize.METHODS`).
        conjugate: the states are one of each conjugate pair: returns 2·Re of the sum
            (otherwise its real part, exact for a real SSM such as S4D-Real).
        max_elements: bound on the numbers in the power tables of one group of rows.
        block_size: T below; None: a power of two near √L.

    Returns:
        (..., L) real, the batch of A, B, C and step broadcast.
    """
    A, B, C, step = (jnp.asarray(x) for x in (A, B, C, step))
    complex_dtype = jnp.result_type(A, B, C, step, jnp.complex64)
    real_dtype = jnp.finfo(complex_dtype).dtype
    A, step = A.astype(complex_dtype), step.astype(real_dtype)
    _, B_bar = discretize_diagonal(A, B.astype(complex_dtype), step, method)
    log_A_bar = _log_A_bar(step * A, method)  # (..., N): the batch of A and step only
    # Decay rate and phase of Ā. A discrete eigenvalue that is exactly 0 (bilinear with
    # ΔA = -2) has log -inf; clamping it to -1000 keeps Ā^0 = 1 and Ā^ℓ = 0 exact.
    rate = jnp.maximum(jnp.real(log_A_bar), -1000.0)[..., None]  # (..., N, 1)
    phase = jnp.imag(log_A_bar)[..., None]
    shape = np.broadcast_shapes(A.shape, B.shape, C.shape, step.shape)
    W = jnp.broadcast_to(C.astype(complex_dtype) * B_bar, shape)  # (..., N): C_n B̄_n
    Wr, Wi = jnp.real(W)[..., None], jnp.imag(W)[..., None]

    def powers(exponents):  # (E,) integers -> Re and Im of Ā^e, each (..., N, E)
        exponents = exponents.astype(real_dtype)
        modulus = jnp.exp(rate * exponents)
        return modulus * jnp.cos(phase * exponents), modulus * jnp.sin(phase * exponents)

    T = block_size if block_size is not None else 1 << ((max(L, 1) - 1).bit_length() + 1) // 2
    T = min(T, L)
    rows = -(-L // T)
    Yr, Yi = powers(jnp.arange(T))
    Y = jnp.concatenate([Yr, -Yi], axis=-2)  # (..., 2N, T)

    def block_rows(a):  # (G,) row indices -> (..., G, T) kernel values K̄_{aT+b}
        Pr, Pi = powers(a * T)  # Ā^{aT}: (..., N, G)
        # W Ā^{aT}: (..., 2N, G)
        X = jnp.concatenate([Wr * Pr - Wi * Pi, Wr * Pi + Wi * Pr], axis=-2)
        return jnp.matmul(jnp.swapaxes(X, -1, -2), Y, precision=jax.lax.Precision.HIGHEST)

    channels = int(np.prod(shape[:-1]))
    group = max(1, max_elements // max(1, channels * (2 * shape[-1] + T)))
    if group >= rows:
        K = block_rows(jnp.arange(rows))  # (..., rows, T)
    else:
        n_groups = -(-rows // group)
        # Padded rows are clamped to the last one (then dropped): never an exponent past
        # the kernel's length, which could overflow for a growing mode.
        a = jnp.minimum(jnp.arange(n_groups * group), rows - 1).reshape(n_groups, group)
        # (..., n_groups, group, T)
        K = jnp.moveaxis(jax.lax.map(jax.checkpoint(block_rows), a), 0, -3)
    K = K.reshape(shape[:-1] + (-1,))[..., :L]
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
