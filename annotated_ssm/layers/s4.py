"""The S4 layer: H SISO state space models with a diagonal-plus-low-rank state matrix.

Each channel h has its own continuous SSM with ``A = diag(Λ) - P P*`` (HiPPO-LegS in its
DPLR form at initialisation, chapter 2), its own step size Δ_h, output vector C̃_h and skip D_h.
The layer convolves each channel with the kernel of S4's Algorithm 1
(:func:`annotated_ssm.kernels.s4_kernel`) and can also run as a recurrence (S4 Theorem 2).

One kernel for every length: the parameter C̃ is ``C (I - Ā^L₀)`` for one fixed reference
length L₀ = ``kernel_length``, so it stands for one output matrix C whatever length the layer
is called with. A call of length L ≤ L₀ takes the first L taps of the length-L₀ kernel; a
longer call doubles the length, ``C (I - Ā^{2L}) = C̃_L (I + Ā^L)``, until it covers L (the
official S4 does the same: ``_setup_C`` in state-spaces/s4's ``kernels/ssm.py``). So the
first L taps at 2L equal the kernel at L, and the recurrence uses the same C at any length.

Conjugate symmetry: of the N eigenvalues of the real matrix A, which come in conjugate
pairs, only the M = N/2 with positive imaginary part are stored (so N must be even). Every
vector of the diagonal basis (Λ, P, B, C̃, the state) is conjugate-paired, so the full
N-dimensional quantities are ``[x, conj(x)]`` and an inner product over the N states is
``2 Re Σ_{n<M} conj(a_n) b_n``.

Shapes: H = d_model channels, M = state_size // 2 stored states, L sequence length.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check_positive_int
from ..hippo import dplr_legs
from ..kernels import s4_kernel
from .base import ConvolutionalSSMLayer, SSMParam, complex_dtype, complex_to_pair, pair_to_complex

__all__ = ["S4Layer", "S4System", "conjugate_pairs"]


def conjugate_pairs(x):
    """(..., M) -> (..., 2M): the full conjugate-symmetric vector ``[x, conj(x)]``."""
    return jnp.concatenate([x, jnp.conj(x)], axis=-1)


class S4System(NamedTuple):
    """The discrete S4 recurrence of H channels in factored form, for one length L.

    ``x ← Ā x + B̄ u`` with ``Ā - I = diag(a) - v w*`` (diagonal plus rank one, applied in
    O(M) per step); ``y = 2 Re Σ C_n x_n``. Shapes (H, M) complex.
    """

    a: jax.Array  # 2 D Λ, the diagonal of Ā - I (D = diag(1 / (2/Δ - Λ)))
    v: jax.Array  # (2/Δ) · 2 D P / (1 + P* D P)
    w: jax.Array  # conj(D) P, so that w* x = P* D x
    B_bar: jax.Array
    C: jax.Array


def _inner(a, b):
    """``a* b`` over all N = 2M states of conjugate-paired vectors: 2 Re Σ conj(a) b (real)."""
    return 2 * jnp.sum(jnp.real(jnp.conj(a) * b), axis=-1)


def _dense_increment(a, v, w):
    """Ā - I = diag(a) - v w* over all N = 2M states as a dense (..., N, N) matrix."""
    a_full, v_full, w_full = (conjugate_pairs(x) for x in (a, v, w))
    eye = jnp.eye(a_full.shape[-1], dtype=a_full.dtype)
    return a_full[..., None] * eye - v_full[..., :, None] * jnp.conj(w_full)[..., None, :]


def _power_minus_identity(E, n: int):
    """``(I + E)^n - I`` by repeated squaring, kept as the difference from I throughout.

    ``(I + X)(I + Y) - I = X + Y + X Y``: no I is ever added, so a small E (a step Δ much
    shorter than the system's time scales) keeps its relative precision; ``I - Ā^L``
    formed as ``I - matrix_power(Ā, L)`` cancels to the digits left over. E: (..., N, N).
    """
    product = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)
    result, base = None, E
    while n:
        if n & 1:
            result = base if result is None else result + base + product(result, base)
        n >>= 1
        if n:
            base = 2 * base + product(base, base)
    return result


class S4Layer(ConvolutionalSSMLayer):
    """S4: H channels, each a DPLR state space model of (real) size N, applied by convolution.

    Args:
        d_model: H, the number of channels.
        state_size: N, the state size of each channel's real SSM; must be even (one of each
            conjugate pair is stored, M = N/2).
        bidirectional: also run a second kernel backwards in time (same Λ, P, B, Δ, its own
            C̃), for non-causal tasks such as classification.
        step_min, step_max: bounds of the initial step size Δ, log Δ ~ U[log step_min,
            log step_max], one Δ per channel.
        kernel_length: L₀, the reference length of the parameter C̃ = C (I - Ā^L₀): calls of
            length L ≤ L₀ compute the length-L₀ kernel and keep its first L taps; longer calls
            convert C̃ to the next doubled length (a dense N × N power per channel, O(N³ log L)).
            Set it to the training sequence length.
        chunk_size: passed to :func:`annotated_ssm.kernels.s4_kernel`: evaluate the kernel's
            frequencies in chunks to bound memory and time (None: the measured default
            ``kernels.S4_CHUNK_SIZE``; ``chunk_size >= L // 2 + 1``: all at once).
        rngs: nnx.Rngs for C̃, D and Δ.

    Parameters (complex ones stored as (..., 2) real arrays: real and imaginary part):
        log_Lambda_real (H, M) SSMParam: log(-Re Λ), so Re Λ = -exp(log_Lambda_real) < 0
            (keeps every channel stable whatever the optimiser does).
        Lambda_imag (H, M) SSMParam: Im Λ. P (H, M, 2), B (H, M, 2) SSMParam.
        log_step_size (H,) SSMParam: log Δ.
        C_tilde (H, M, 2) or (2, H, M, 2) when bidirectional, nnx.Param, complex N(0, 1):
            C̃ = C (I - Ā^L₀) for L₀ = kernel_length.
        D (H,) nnx.Param, N(0, 1).

    Example (a batch of 2 sequences of 32 steps, 4 channels)::

        >>> import jax
        >>> from flax import nnx
        >>> from annotated_ssm.layers import S4Layer
        >>> layer = S4Layer(4, 8, rngs=nnx.Rngs(0))
        >>> u = jax.random.normal(jax.random.key(1), (2, 32, 4))
        >>> layer(u).shape, layer.kernel(32).shape  # y = K̄ * u + D u, K̄ one per channel
        ((2, 32, 4), (4, 32))
    """

    def __init__(
        self,
        d_model: int,
        state_size: int = 64,
        *,
        bidirectional: bool = False,
        step_min: float = 1e-3,
        step_max: float = 1e-1,
        kernel_length: int = 1024,
        chunk_size: int | None = None,
        rngs: nnx.Rngs,
    ):
        self._init_contract(
            d_model, state_size, bidirectional=bidirectional, step_min=step_min, step_max=step_max,
            rngs=rngs, even_state="S4 keeps one of each conjugate pair of states, N/2 of them",
        )
        self.chunk_size = None if chunk_size is None else check_positive_int("chunk_size", chunk_size)
        self.kernel_length = check_positive_int("kernel_length", kernel_length)
        H, M = self.d_model, self.state_size // 2

        # HiPPO-LegS in DPLR form, one of each conjugate pair, the same for every channel.
        Lambda, P, B, _ = dplr_legs(self.state_size)
        Lambda, P, B = Lambda[:M], P[:M], B[:M]

        def tiled(z):  # (M,) complex -> (H, M, 2) float32
            return jnp.broadcast_to(complex_to_pair(z), (H, M, 2))

        self.log_Lambda_real = SSMParam(jnp.log(-jnp.asarray(np.broadcast_to(Lambda.real, (H, M)), jnp.float32)))
        self.Lambda_imag = SSMParam(jnp.asarray(np.broadcast_to(Lambda.imag, (H, M)), jnp.float32))
        self.P = SSMParam(tiled(P))
        self.B = SSMParam(tiled(B))
        self._init_log_step_size(rngs, (H,))
        c_shape = ((2,) if self.bidirectional else ()) + (H, M, 2)
        # Complex C̃ with E|C̃_n|² = 1: each part has variance 1/2.
        self.C_tilde = nnx.Param(jax.random.normal(rngs.params(), c_shape, jnp.float32) * np.float32(np.sqrt(0.5)))
        self._init_skip(rngs)

    # --- the continuous parameters as complex arrays ------------------------------------

    def eigenvalues(self, dtype=None) -> jax.Array:
        """Λ (H, M) complex, Re Λ = -exp(log_Lambda_real) < 0. ``dtype``: the real dtype to compute in."""
        re, im = (x if dtype is None else x.astype(dtype) for x in (self.log_Lambda_real[...], self.Lambda_imag[...]))
        return jax.lax.complex(-jnp.exp(re), im)

    def ssm_parameters(self, dtype=None):
        """(Λ, P, B, C̃, Δ): complex (H, M) each (C̃ (2, H, M) if bidirectional), Δ (H,)."""
        return (
            self.eigenvalues(dtype),
            pair_to_complex(self.P[...], dtype),
            pair_to_complex(self.B[...], dtype),
            pair_to_complex(self.C_tilde[...], dtype),
            self.step_sizes(dtype),
        )

    # --- convolution ---------------------------------------------------------------------

    def _kernel(self, length, dtype, B=None) -> jax.Array:
        """The S4 kernel of every channel: (H, L), or (2, H, L) if bidirectional.

        The first ``length`` taps of the kernel at L₁ = L₀ 2^k ≥ length, with C̃ converted from
        L₀ to L₁ by k doublings (none when length ≤ L₀). ``B``: another input vector in place
        of the layer's B, (..., H, M) complex (the state's term uses it, ``_state_terms``).
        """
        Lambda, P, B_layer, C_tilde, step = self.ssm_parameters(dtype)
        B = B_layer if B is None else B
        kernel_length = self.kernel_length
        if length > kernel_length:
            a, v, w, _ = self._bilinear(Lambda, P, B_layer, step)
            increment = _power_minus_identity(_dense_increment(a, v, w), kernel_length)  # Ā^L₀ - I
            M = Lambda.shape[-1]
            while length > kernel_length:
                # C̃_{2L} = C̃_L (I + Ā^L) = 2 C̃_L + C̃_L (Ā^L - I), a row vector times a matrix.
                C_full = conjugate_pairs(C_tilde)
                product = jnp.einsum("...m,...mn->...n", C_full, increment, precision=jax.lax.Precision.HIGHEST)
                C_tilde = (2 * C_full + product)[..., :M]  # the second half is its conjugate
                kernel_length *= 2
                if length > kernel_length:
                    # Ā^{2L} - I = 2 (Ā^L - I) + (Ā^L - I)²
                    increment = 2 * increment + jnp.matmul(increment, increment, precision=jax.lax.Precision.HIGHEST)
        kernel = s4_kernel(Lambda, P, B, C_tilde, step, kernel_length, chunk_size=self.chunk_size)
        return kernel[..., :length]

    # --- recurrence ----------------------------------------------------------------------

    @staticmethod
    def _bilinear(Lambda, P, B, step):
        """The bilinear discretisation in factored form: (a, v, w, B̄), see :class:`S4System`.

        Theorem 2's ``Ā = A1 A0`` is kept as ``Ā = I + 2 A1 A = I + diag(a) - v w*``: at small
        Δ, Ā is I plus a small increment, and forming that increment directly keeps it to
        float32 precision (A1 (A0 x) subtracts numbers of size 2/Δ, and lost 3 digits at
        Δ = 1e-5).
        """
        shift = (2 / step)[:, None]
        d = 1 / (shift - Lambda)  # D, the diagonal of (2/Δ - Λ)⁻¹
        dP = d * P
        denominator = (1 + _inner(P, dP))[:, None]  # 1 + P* D P (real)
        # A1 y = D y - D P (P* D y) / (1 + P* D P); A1 A = D Λ - (2/Δ) D P P* D / (1 + P* D P).
        a, v, w = 2 * d * Lambda, 2 * (shift * dP) / denominator, jnp.conj(d) * P
        dB = d * B
        B_bar = 2 * (dB - dP * _inner(P, dB)[:, None] / denominator)
        return a, v, w, B_bar

    def _discrete_system(self, length, dtype, step_sizes=None) -> S4System:
        """Discretise (bilinear) and convert C̃ to the output matrix C.

        C̃ = C (I - Ā^L₀) for the reference length L₀ = ``kernel_length`` gives
        ``C = C̃ (I - Ā^L₀)⁻¹``, with Ā^L₀ - I powered as a difference from I
        (:func:`_power_minus_identity`). C does not depend on ``length``: the recurrence is the
        convolution's system for every length (and for an unbounded sequence, ``length=None``).
        The dense power is the expensive part: compute the system once (``discrete_system()``)
        before stepping through a sequence.
        """
        Lambda, P, B, C_tilde, step = self.ssm_parameters(dtype)
        a, v, w, B_bar = self._bilinear(Lambda, P, B, step)
        # Dense Ā - I over all N states (O(N²) memory, O(N³ log L₀) time).
        power = _power_minus_identity(_dense_increment(a, v, w), self.kernel_length)  # Ā^L₀ - I
        # Row vector C solves C (I - Ā^L₀) = C̃, i.e. -(Ā^L₀ - I)ᵀ Cᵀ = C̃ᵀ.
        C_full = jnp.linalg.solve(-jnp.swapaxes(power, -1, -2), conjugate_pairs(C_tilde)[..., None])
        C = C_full[..., : Lambda.shape[-1], 0]  # the second half is its conjugate
        return S4System(a, v, w, B_bar, C)

    def _state_terms(self, u, state):
        """The state's term of the output and the final state, without stepping the input.

        State's term (the official S4's ``k_state``): C Ā^{ℓ+1} x₋₁ is the kernel C Ā^ℓ B̄(v)
        of an input vector v whose B̄(v) = 2 (2/Δ - A)⁻¹ v equals Ā x₋₁ = (2/Δ - A)⁻¹ (2/Δ + A) x₋₁,
        i.e. v = x₋₁/Δ + A x₋₁/2 (A = Λ - P P* applied in O(M)). So it is the same Cauchy and
        FFT machinery as K̄ (:meth:`_kernel`, from C̃, exact at every length and parallel in
        time), one kernel per sequence of the batch.

        Final state ``Ā^L x₋₁ + Σ_r (Ā^r B̄) u_{L-1-r}``: Ā is diagonal plus rank one, and its
        powers have no cheaper exact closed form than the dense N × N power (O(N³ log L) per
        channel) or the resolvent at L frequencies followed by a dense product; the cheapest
        exact route is one ``lax.scan`` over time of the states alone, x ← Ā x in the factored
        form of ``step`` (O(M) per channel and step), applied to B̄ (no batch: the columns
        Ā^r B̄, r < L) and to x₋₁ (Ā^L x₋₁), never to the input: u then enters by one
        contraction against the columns, O(B·H·M·L) as a matrix product.
        """
        Lambda, P, B, _, step = self.ssm_parameters(u.dtype)
        a, v, w, B_bar = self._bilinear(Lambda, P, B, step)
        L = u.shape[-2]

        def advance(x):  # Ā x = x + (diag(a) - v w*) x
            return x + a * x - v * _inner(w, x)[..., None]

        def one_step(carry, _):
            x_B, x_state = carry
            return (advance(x_B), None if x_state is None else advance(x_state)), x_B

        (_, powered_state), columns = jax.lax.scan(one_step, (B_bar, state), None, length=L)  # (L, H, M)
        reversed_u = jnp.flip(u, -2).astype(columns.dtype)  # u_{L-1-r} at r
        final = jnp.einsum("...rh,rhm->...hm", reversed_u, columns, precision=jax.lax.Precision.HIGHEST)
        if state is None:
            return None, final
        A_state = Lambda * state - P * _inner(P, state)[..., None]
        weights = state / step[:, None] + A_state / 2
        contribution = jnp.swapaxes(self._kernel(L, u.dtype, B=weights), -1, -2)  # (..., L, H)
        return contribution, final + powered_state

    def _init_state(self, batch_shape, dtype) -> jax.Array:
        """Zero state (*batch_shape, H, M) complex: one of each conjugate pair."""
        return jnp.zeros(batch_shape + (self.d_model, self.state_size // 2), complex_dtype(dtype))

    def _step(self, system: S4System, state, u_t):
        """x ← x + (a ⊙ x - v (w* x)) + B̄ u,  y = 2 Re(C x) + D u; O(M) per channel."""
        s = system
        increment = s.a * state - s.v * _inner(s.w, state)[..., None]  # (Ā - I) x
        state = state + increment + s.B_bar * u_t[..., None]
        out = 2 * jnp.sum(jnp.real(s.C * state), axis=-1) + self._skip(u_t.dtype) * u_t
        return state, out
