"""The DSS layer (Gupta, Gu & Berant 2022): a diagonal state space with the skew-HiPPO spectrum.

Each of the H channels is a SISO SSM with the same N/2 complex eigenvalues λ (shared by the
channels, as in the paper), its own step size Δ and its own weights W = B ∘ C (B and C of a
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

from .._validation import check, check_choice, check_real_in
from ..initialization import diagonal_init
from ..kernels import DSS_VARIANTS, dss_coefficients, dss_kernel
from .base import ConvolutionalSSMLayer, SSMParam, complex_dtype, diagonal_state_terms, pair_to_complex

__all__ = ["DSSLayer", "DSSSystem", "REAL_PARAMETERS"]

#: variant -> the parameter holding the real part of λ: log(-Re λ) for "exp", Re λ for "softmax".
REAL_PARAMETERS = {"exp": "log_Lambda_real", "softmax": "Lambda_real"}


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
        step_min, step_max: bounds of the log-uniform initial step size Δ, one per channel.
        rngs: nnx.Rngs (streams "params").
        variant: "exp" (Re(λ) = -exp(log_Lambda_real) < 0) or "softmax" (Re(λ) =
            Lambda_real, free).
        eps: regulariser of the softmax reciprocal (see ``kernels.dss_coefficients``).

    Parameters, SSMParam: the real part of λ (N/2,), named after what it holds:
    ``log_Lambda_real`` = log(-Re λ) for "exp", ``Lambda_real`` = Re λ for "softmax"
    (:data:`REAL_PARAMETERS`); ``Lambda_imag`` = Im λ (N/2,); ``log_step_size`` = log Δ
    (H,). nnx.Param: ``W`` (H, N/2, 2) or (2, H, N/2, 2) (real, imaginary) and ``D`` (H,).

    Example::

        >>> import jax
        >>> from flax import nnx
        >>> from annotated_ssm.layers import DSSLayer
        >>> layer = DSSLayer(4, 8, variant="exp", rngs=nnx.Rngs(0))
        >>> u = jax.random.normal(jax.random.key(1), (2, 32, 4))
        >>> layer(u).shape, layer.eigenvalues().shape  # λ shared by the channels
        ((2, 32, 4), (4,))
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
        self._init_contract(
            d_model, state_size, bidirectional=bidirectional, step_min=step_min, step_max=step_max,
            rngs=rngs, even_state="conjugate pairs: the layer keeps N/2 complex states",
        )
        self.variant = check_choice("variant", variant, DSS_VARIANTS)
        self.eps = check_real_in("eps", eps, 0.0, open_low=True)
        H, half = self.d_model, self.state_size // 2

        # DSS's "skew-HiPPO" initialisation: the N/2 eigenvalues of HiPPO-N (the normal part
        # of HiPPO-LegS) with positive imaginary part, real parts -1/2. This is S4D-LegS.
        Lambda = diagonal_init("legs", self.state_size)
        # exp: Re(λ) = -exp(log_Lambda_real) keeps the real part negative whatever the
        # optimiser does; softmax: Re(λ) = Lambda_real is free (the softmax kernel stays bounded).
        real = np.log(-Lambda.real) if variant == "exp" else Lambda.real
        setattr(self, REAL_PARAMETERS[variant], SSMParam(jnp.asarray(real, jnp.float32)))
        self.Lambda_imag = SSMParam(jnp.asarray(Lambda.imag, jnp.float32))
        self._init_log_step_size(rngs, (H,))
        w_shape = ((2,) if self.bidirectional else ()) + (H, half, 2)
        self.W = nnx.Param(jax.random.normal(rngs.params(), w_shape, jnp.float32))
        self._init_skip(rngs)

    # --- the parameters as the formulas use them ---------------------------------------

    def eigenvalues(self, dtype=None) -> jax.Array:
        """λ, (N/2,) complex. ``dtype``: the real dtype to compute in (default: the parameters')."""
        stored = getattr(self, REAL_PARAMETERS[self.variant])
        real, imag = (x if dtype is None else x.astype(dtype) for x in (stored[...], self.Lambda_imag[...]))
        if self.variant == "exp":
            real = -jnp.exp(real)
        return jax.lax.complex(real, imag)

    def weights(self, dtype=None) -> jax.Array:
        """W, (H, N/2) or (2, H, N/2) complex."""
        return pair_to_complex(self.W[...], dtype)

    # --- convolutional view ----------------------------------------------------------------

    def _kernel(self, length, dtype) -> jax.Array:
        """(H, L), or (2, H, L) when bidirectional."""
        return dss_kernel(self.eigenvalues(dtype), self.weights(dtype), self.step_sizes(dtype),
                          length, self.variant, eps=self.eps)

    # --- recurrent view --------------------------------------------------------------------

    def _discrete_system(self, length, dtype, step_sizes=None) -> DSSSystem:
        """The per-state scalar recurrences for sequences of ``length`` steps.

        The softmax normalises over the whole sequence, so its kernel (and recurrence)
        depends on L: ``length`` is required for variant "softmax" and the recurrence is
        valid for the first ``length`` steps. DSS-exp works for any length (None).
        """
        check("length", length, length is not None or self.variant != "softmax", "be given for "
              "variant 'softmax' (the softmax normalises over the sequence length): call "
              "discrete_system(L) and pass it to step()")
        coef, shift, dtLambda = dss_coefficients(
            self.eigenvalues(dtype), self.weights(dtype), self.step_sizes(dtype), length or 1, self.variant, eps=self.eps
        )
        return DSSSystem(
            A_bar=jnp.exp(dtLambda),
            C=2 * coef,
            dtLambda=dtLambda,
            positive=shift > 0,
            last=jnp.asarray(0 if length is None else length - 1, jnp.int32),
        )

    def _state_refusal(self):
        if self.variant == "softmax" and not self.bidirectional:
            return ("state and return_state need DSS with variant='exp': the softmax kernel is "
                    "normalised over the whole length L of a call, so a piece of a sequence is "
                    "not computed by the kernel of the whole (DSS-exp is the same layer without "
                    "that normalisation).")
        return super()._state_refusal()

    def _state_terms(self, u, state):
        """DSS-exp is a diagonal system x ← e^{λΔ} x + u read out by C = 2 c (B̄ = 1): its
        state's term and final state are Vandermonde products with log Ā = λΔ exactly
        (:func:`~annotated_ssm.layers.base.diagonal_state_terms`); the time index advances by L."""
        system = self._discrete_system(None, u.dtype)
        x, t = (None, jnp.zeros((), jnp.int32)) if state is None else state
        contribution, x = diagonal_state_terms(system.dtLambda, jnp.ones_like(system.A_bar), system.C, u, x)
        return contribution, (x, t + u.shape[-2])

    def _init_state(self, batch_shape, dtype):
        """(x, t): x (*batch_shape, H, N/2) complex zeros, t = 0 the time index (int32 scalar)."""
        x = jnp.zeros(batch_shape + (self.d_model, self.state_size // 2), complex_dtype(dtype))
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
        y = jnp.real(jnp.sum(system.C * out * x, axis=-1)) + self._skip(u_t.dtype) * u_t
        return (x, t + 1), y
