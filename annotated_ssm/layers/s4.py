"""The S4 layer: H SISO state space models with a diagonal-plus-low-rank state matrix.

Each channel h has its own continuous SSM with ``A = diag(Λ) - P P*`` (HiPPO-LegS in its
DPLR form at initialisation, chapter 2), its own step Δ_h, output vector C̃_h and skip D_h.
The layer convolves each channel with the kernel of S4's Algorithm 1
(:func:`annotated_ssm.kernels.s4_kernel`) and can also run as a recurrence (S4 Theorem 2).

Conjugate symmetry: of the N eigenvalues of the real matrix A, which come in conjugate
pairs, only the M = N/2 with positive imaginary part are stored (so N must be even). Every
vector of the diagonal basis (Λ, P, B, C̃, the state) is conjugate-paired, so the full
N-dimensional quantities are ``[x, conj(x)]`` and an inner product over the N states is
``2 Re Σ_{n<M} conj(a_n) b_n``.

Shapes: H = d_model channels, M = state_size // 2 stored states, L sequence length.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check_positive_int
from ..discretize import dplr_bilinear
from ..hippo import dplr_legs
from ..kernels import s4_kernel
from .base import ConvolutionalSSMLayer, SSMParam, complex_dtype, complex_to_pair, pair_to_complex

__all__ = ["S4Layer", "S4System", "conjugate_pairs"]


def conjugate_pairs(x):
    """(..., M) -> (..., 2M): the full conjugate-symmetric vector ``[x, conj(x)]``."""
    return jnp.concatenate([x, jnp.conj(x)], axis=-1)


class S4System(NamedTuple):
    """The discrete S4 recurrence of H channels in factored (DPLR) form, for one length L.

    ``x ← Ā x + B̄ u`` with ``Ā = A1 A0`` applied in O(M) per step; ``y = 2 Re Σ C_n x_n``.
    Shapes (H, M) complex, ``denominator`` (H,) real.
    """

    Lambda: jax.Array
    P: jax.Array
    shift: jax.Array  # 2/Δ, (H, 1)
    d: jax.Array  # 1 / (2/Δ - Λ)
    dP: jax.Array  # d ⊙ P
    denominator: jax.Array  # 1 + Q* D P over all N states (real)
    B_bar: jax.Array
    C: jax.Array


def _inner(a, b):
    """``a* b`` over all N = 2M states of conjugate-paired vectors: 2 Re Σ conj(a) b (real)."""
    return 2 * jnp.sum(jnp.real(jnp.conj(a) * b), axis=-1)


class S4Layer(ConvolutionalSSMLayer):
    """S4: H channels, each a DPLR state space model of (real) size N, applied by convolution.

    Args:
        d_model: H, the number of channels.
        state_size: N, the state size of each channel's real SSM; must be even (one of each
            conjugate pair is stored, M = N/2).
        bidirectional: also run a second kernel backwards in time (same Λ, P, B, Δ, its own
            C̃), for non-causal tasks such as classification.
        step_min, step_max: log Δ ~ U[log step_min, log step_max], one Δ per channel.
        chunk_size: passed to :func:`annotated_ssm.kernels.s4_kernel`: evaluate the kernel's
            frequencies in chunks to bound memory and time (None: the measured default
            ``kernels.S4_CHUNK_SIZE``; ``chunk_size >= L // 2 + 1``: all at once).
        rngs: nnx.Rngs for C̃, D and Δ.

    Parameters (complex ones stored as (..., 2) real arrays: real and imaginary part):
        Lambda_re (H, M) SSMParam: Re Λ = -exp(Lambda_re) < 0 (keeps every channel stable).
        Lambda_im (H, M) SSMParam; P (H, M, 2), B (H, M, 2) SSMParam; log_step (H,) SSMParam.
        C_tilde (H, M, 2) or (2, H, M, 2) when bidirectional, nnx.Param, complex N(0, 1).
        D (H,) nnx.Param, N(0, 1).
    """

    def __init__(
        self,
        d_model: int,
        state_size: int = 64,
        *,
        bidirectional: bool = False,
        step_min: float = 1e-3,
        step_max: float = 1e-1,
        chunk_size: int | None = None,
        rngs: nnx.Rngs,
    ):
        self._init_contract(
            d_model, state_size, bidirectional=bidirectional, step_min=step_min, step_max=step_max,
            even_state="S4 keeps one of each conjugate pair of states, N/2 of them",
        )
        self.chunk_size = None if chunk_size is None else check_positive_int("chunk_size", chunk_size)
        H, M = self.d_model, self.state_size // 2

        # HiPPO-LegS in DPLR form, one of each conjugate pair, the same for every channel.
        Lambda, P, B, _ = dplr_legs(self.state_size)
        Lambda, P, B = Lambda[:M], P[:M], B[:M]

        def tiled(z):  # (M,) complex -> (H, M, 2) float32
            return jnp.broadcast_to(complex_to_pair(z), (H, M, 2))

        self.Lambda_re = SSMParam(jnp.log(-jnp.asarray(np.broadcast_to(Lambda.real, (H, M)), jnp.float32)))
        self.Lambda_im = SSMParam(jnp.asarray(np.broadcast_to(Lambda.imag, (H, M)), jnp.float32))
        self.P = SSMParam(tiled(P))
        self.B = SSMParam(tiled(B))
        self._init_log_step(rngs, (H,))
        c_shape = ((2,) if self.bidirectional else ()) + (H, M, 2)
        # Complex C̃ with E|C̃_n|² = 1: each part has variance 1/2.
        self.C_tilde = nnx.Param(jax.random.normal(rngs.params(), c_shape, jnp.float32) * np.sqrt(0.5))
        self._init_skip(rngs)

    # --- the continuous parameters as complex arrays ------------------------------------

    def eigenvalues(self, dtype=None) -> jax.Array:
        """Λ (H, M) complex, Re Λ = -exp(Lambda_re) < 0. ``dtype``: the real dtype to compute in."""
        re, im = (x if dtype is None else x.astype(dtype) for x in (self.Lambda_re[...], self.Lambda_im[...]))
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

    def kernel(self, length: int, *, dtype=None) -> jax.Array:
        """The S4 kernel of every channel: (H, L), or (2, H, L) if bidirectional."""
        Lambda, P, B, C_tilde, step = self.ssm_parameters(dtype)
        return s4_kernel(Lambda, P, B, C_tilde, step, length, chunk_size=self.chunk_size)

    # --- recurrence ----------------------------------------------------------------------

    def _discrete_system(self, length, dtype) -> S4System:
        """Discretise (bilinear, factored Ā = A1 A0) and convert C̃ to C for sequences of ``length``.

        The kernel of S4 is defined by C̃ = C (I - Ā^L): the convolution of length L equals
        the recurrence with ``C = C̃ (I - Ā^L)⁻¹``. ``length=None`` takes C = C̃ (the limit
        L → ∞ of a stable system, where Ā^L → 0).
        """
        Lambda, P, B, C_tilde, step = self.ssm_parameters(dtype)
        shift = (2 / step)[:, None]
        d = 1 / (shift - Lambda)
        dP = d * P
        denominator = 1 + _inner(P, dP)
        # B̄ = 2 A1 B with A1 y = D y - D P (Q* D y) / (1 + Q* D P)
        dB = d * B
        B_bar = 2 * (dB - dP * (_inner(P, dB) / denominator)[:, None])
        if length is None:
            C = C_tilde
        else:
            # C = C̃ (I - Ā^L)⁻¹ needs Ā^L: build the dense N × N Ā once (O(N³ log L)).
            A_bar, _ = dplr_bilinear(conjugate_pairs(Lambda), conjugate_pairs(P), conjugate_pairs(B), step)
            N = A_bar.shape[-1]
            I_minus_power = jnp.eye(N, dtype=A_bar.dtype) - jnp.linalg.matrix_power(A_bar, length)
            # Row vector C solves C (I - Ā^L) = C̃, i.e. (I - Ā^L)ᵀ Cᵀ = C̃ᵀ.
            C_full = jnp.linalg.solve(jnp.swapaxes(I_minus_power, -1, -2), conjugate_pairs(C_tilde)[..., None])[..., 0]
            C = C_full[..., : N // 2]  # the second half is its conjugate
        return S4System(Lambda, P, shift, d, dP, denominator, B_bar, C)

    def _init_state(self, batch_shape, dtype) -> jax.Array:
        """Zero state (*batch_shape, H, M) complex: one of each conjugate pair."""
        return jnp.zeros(batch_shape + (self.d_model, self.state_size // 2), complex_dtype(dtype))

    def _step(self, system: S4System, state, u_t):
        """x ← A1 (A0 x) + B̄ u,  y = 2 Re(C x) + D u; O(M) per channel."""
        s = system
        # A0 x = (2/Δ + Λ) x - P (Q* x)
        y = (s.shift + s.Lambda) * state - s.P * _inner(s.P, state)[..., None]
        # A1 y = D y - D P (Q* D y) / (1 + Q* D P)
        dy = s.d * y
        state = dy - s.dP * (_inner(s.P, dy) / s.denominator)[..., None] + s.B_bar * u_t[..., None]
        out = 2 * jnp.sum(jnp.real(s.C * state), axis=-1) + self._skip(u_t.dtype) * u_t
        return state, out
