"""The DSS layer (Gupta, Gu & Berant 2022): a diagonal state space with the skew-HiPPO spectrum.

Each of the H channels is a SISO SSM with the same N/2 complex eigenvalues λ (shared by the
channels, as in the paper), its own step Δ and its own weights W = B ∘ C (B and C of a
diagonal SSM only ever appear through their product). The kernel comes from Proposition 1:

    DSS-exp      K̄_ℓ = 2 Re Σ_n W_n (e^{λ_nΔ} - 1)/λ_n · e^{λ_nΔℓ},     Re(λ) = -exp(·) < 0
    DSS-softmax  K̄_ℓ = 2 Re Σ_n (W_n/λ_n) · softmax_ℓ(λ_nΔℓ),           Re(λ) free

The recurrent view (DSS §3.4) runs one scalar recurrence per state. For a softmax
coordinate with Re(λ) > 0 the state is kept in rescaled form so that nothing overflows:
with ``K̄_ℓ = 2 Re c e^{λΔ(ℓ - (L-1))}``,

    g_ℓ = g_{ℓ-1} + e^{-λΔℓ} u_ℓ,      y_ℓ = 2 Re c e^{λΔ(ℓ - (L-1))} g_ℓ,

where every exponential has a non-positive real part for ℓ <= L-1 (the ordinary state
would be ``x_ℓ = e^{λΔℓ} g_ℓ``, which overflows). This recurrence depends on the time index,
so the state carries it.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check_choice, check_even, check_positive_int
from ..init import diagonal_init, log_step
from ..kernels import DSS_VARIANTS, dss_coefficients, dss_kernel
from .base import ConvolutionalSSMLayer, SSMParam

__all__ = ["DSSLayer", "DSSSystem", "skew_hippo_eigenvalues"]


def skew_hippo_eigenvalues(state_size: int) -> np.ndarray:
    """DSS's "skew-HiPPO" initialisation: the N/2 eigenvalues of HiPPO-N (``A^(N)``, the normal
    part of HiPPO-LegS) with positive imaginary part, largest first. Real parts are all -1/2.

    This is the S4D-LegS initialisation under its DSS name: ``diagonal_init("legs", N)``.

    Returns:
        (N/2,) complex128.
    """
    check_even("state_size", check_positive_int("state_size", state_size), "conjugate pairs: N/2 states are kept")
    return diagonal_init("legs", state_size)


class DSSSystem(NamedTuple):
    """Everything the recurrent step needs, per channel and state: shapes (H, N/2).

    ``A_bar = e^{λΔ}``; ``C`` carries the weights c_n (and the factor 2 of conjugate
    symmetry); ``dtLambda = λΔ``; ``positive`` marks softmax states with Re(λ) > 0, which
    use the rescaled recurrence; ``last = L - 1`` for the softmax variant (0 for exp).
    """

    A_bar: jax.Array
    C: jax.Array
    dtLambda: jax.Array
    positive: jax.Array
    last: jax.Array


class DSSLayer(ConvolutionalSSMLayer):
    """Diagonal State Space layer: (B, L, H) or (L, H) -> same shape.

    Args:
        d_model: H, the number of channels.
        state_size: N (even); N/2 complex eigenvalues are stored.
        bidirectional: add a second kernel (own W, same λ and Δ) run backwards in time.
        step_min, step_max: range of the log-uniform initialisation of Δ per channel.
        rngs: nnx.Rngs (streams "params").
        variant: "exp" (Re(λ) = -exp(Lambda_re) < 0) or "softmax" (Re(λ) = Lambda_re, free).
        eps: regulariser of the softmax reciprocal (see ``kernels.dss_coefficients``).

    Parameters: ``Lambda_re``, ``Lambda_im`` (N/2,) and ``log_step`` (H,) are SSMParam;
    ``W`` (H, N/2, 2) or (2, H, N/2, 2) (real, imaginary) and ``D`` (H,) are nnx.Param.
    """

    def __init__(
        self,
        d_model: int,
        state_size: int = 64,
        *,
        bidirectional: bool = False,
        step_min: float = 1e-3,
        step_max: float = 1e-1,
        rngs: nnx.Rngs,
        variant: str = "softmax",
        eps: float = 1e-10,
    ):
        self.d_model = check_positive_int("d_model", d_model)
        self.state_size = check_positive_int("state_size", state_size, minimum=2)
        check_even("state_size", state_size, "conjugate pairs: the layer keeps N/2 complex states")
        self.variant = check_choice("variant", variant, DSS_VARIANTS)
        self.bidirectional = bool(bidirectional)
        self.eps = float(eps)
        half = state_size // 2

        Lambda = skew_hippo_eigenvalues(state_size)
        # exp: Re(λ) = -exp(Lambda_re) keeps the real part negative whatever the optimiser
        # does; softmax: Re(λ) = Lambda_re is free (the softmax kernel stays bounded).
        real = np.log(-Lambda.real) if variant == "exp" else Lambda.real
        self.Lambda_re = SSMParam(jnp.asarray(real, jnp.float32))
        self.Lambda_im = SSMParam(jnp.asarray(Lambda.imag, jnp.float32))
        self.log_step = SSMParam(log_step(rngs.params(), (d_model,), step_min, step_max))
        w_shape = ((2,) if self.bidirectional else ()) + (d_model, half, 2)
        self.W = nnx.Param(jax.random.normal(rngs.params(), w_shape, jnp.float32))
        self.D = nnx.Param(jax.random.normal(rngs.params(), (d_model,), jnp.float32))

    # --- the parameters as the formulas use them ---------------------------------------

    def eigenvalues(self) -> jax.Array:
        """λ, (N/2,) complex."""
        real = self.Lambda_re[...]
        if self.variant == "exp":
            real = -jnp.exp(real)
        return jax.lax.complex(real, self.Lambda_im[...])

    def weights(self) -> jax.Array:
        """W, (H, N/2) or (2, H, N/2) complex."""
        W = self.W[...]
        return jax.lax.complex(W[..., 0], W[..., 1])

    def step_size(self) -> jax.Array:
        """Δ, (H,)."""
        return jnp.exp(self.log_step[...])

    # --- convolutional view ----------------------------------------------------------------

    def kernel(self, length: int) -> jax.Array:
        """(H, L), or (2, H, L) when bidirectional."""
        return dss_kernel(self.eigenvalues(), self.weights(), self.step_size(), length, self.variant, eps=self.eps)

    # --- recurrent view --------------------------------------------------------------------

    def discrete_system(self, length: int | None = None) -> DSSSystem:
        """The per-state scalar recurrences for sequences of ``length`` steps.

        The softmax normalises over the whole sequence, so its kernel (and recurrence)
        depends on L: ``length`` is required for variant "softmax" and the recurrence is
        valid for the first ``length`` steps. DSS-exp works for any length (None).
        """
        if self.variant == "softmax":
            if length is None:
                raise ValueError(
                    "length must be given for variant 'softmax' (the softmax normalises over the "
                    "sequence length); got None. Call discrete_system(L) and pass it to step()."
                )
            length = check_positive_int("length", length)
        W = self.weights()
        if self.bidirectional:
            W = W[0]  # never used: step refuses bidirectional layers
        coef, shift, dtLambda = dss_coefficients(
            self.eigenvalues(), W, self.step_size(), length or 1, self.variant, eps=self.eps
        )
        return DSSSystem(
            A_bar=jnp.exp(dtLambda),
            C=2 * coef,
            dtLambda=dtLambda,
            positive=shift > 0,
            last=jnp.asarray(0 if length is None else length - 1, jnp.int32),
        )

    def init_state(self, batch_shape: tuple[int, ...] = ()):
        """(x, t): x (*batch_shape, H, N/2) complex zeros, t = 0 the time index (int32 scalar)."""
        dtype = jnp.result_type(self.W[...].dtype, jnp.complex64)
        x = jnp.zeros(tuple(batch_shape) + (self.d_model, self.state_size // 2), dtype)
        return x, jnp.zeros((), jnp.int32)

    def _step(self, system: DSSSystem, state, u_t):
        x, t = state
        time = t.astype(system.dtLambda.real.dtype)
        u = u_t[..., None]
        # Ordinary states: x ← e^{λΔ} x + u, read out with C. Rescaled states (softmax,
        # Re(λ) > 0): g ← g + e^{-λΔt} u, read out with C e^{λΔ(t - (L-1))}. The exponents are
        # zeroed where unused, so no exponential of a positive real part is ever formed
        # (not even in the discarded branch of the `where`, which grad would see).
        pos = system.positive
        into = jnp.exp(jnp.where(pos, -system.dtLambda * time, 0))
        out = jnp.exp(jnp.where(pos, system.dtLambda * (time - system.last), 0))
        x = jnp.where(pos, x, system.A_bar * x) + into * u
        y = jnp.real(jnp.sum(system.C * out * x, axis=-1)) + self.D[...] * u_t
        return (x, t + 1), y.astype(u_t.dtype)
