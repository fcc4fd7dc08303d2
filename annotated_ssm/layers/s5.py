"""S5: one multi-input, multi-output (MIMO) diagonal SSM computed with a linear scan.

Where S4, DSS and S4D run H independent single-input SSMs of size N each (and convolve),
S5 runs a single SSM with state size P that reads all H channels and writes all H
channels (Smith, Warrington and Linderman, 2023)::

    x_ℓ = Λ̄ ⊙ x_{ℓ-1} + B̄ u_ℓ          Λ̄ = exp(ΛΔ),  B̄ = (Λ̄ - 1)/Λ · B̃   (ZOH, row-wise)
    y_ℓ = 2·Re(C̃ x_ℓ) + D ⊙ u_ℓ        (conjugate symmetry: P/2 complex states kept)

Λ is diagonal, so the recurrence is a diagonal linear recurrence:
:func:`annotated_ssm.scan.parallel_scan` computes all the states in O(log L) depth, as the
paper does. The layer runs :func:`annotated_ssm.scan.chunked_recurrence`, the same states
chunk by chunk, with a gradient that is the recurrence's adjoint run backwards over the same
chunks (no associative-scan levels to store; ``benchmarks/bench_scans.py`` measures both).

Time-varying step sizes. ``layer(u, step_sizes=s)`` takes the time elapsed before each
observation, ``s_ℓ > 0`` in units of the training sampling interval, and discretises observation ℓ with
``Δ_{ℓ,p} = s_ℓ · Δ_p`` (each state keeps its own learned timescale Δ_p; the observation
time only stretches it). ``s ≡ 1`` is the ordinary layer; ``s ≡ 2`` is the same model
run on data sampled at half the rate (the zero-shot rate change of the paper); random
``s`` handles irregularly sampled observations. A convolution kernel cannot do this: the
recurrence is no longer time invariant, but the scan does not care.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from .._validation import check, check_bool, check_choice, check_positive_int
from ..discretize import METHODS, discretize_diagonal
from ..initialization import s5_init
from ..scan import chunked_recurrence
from .base import SSMLayer, SSMParam, complex_dtype, complex_to_pair, pair_to_complex

__all__ = ["S5Layer", "S5System", "ACTIVATIONS"]

ACTIVATIONS = ("none", "gelu", "half_glu", "full_glu")


class S5System(NamedTuple):
    """The discrete S5 recurrence: x ← Λ̄ ⊙ x + B̄ u,  y = Re(C x).

    Shapes: Lambda_bar (..., P'), B_bar (..., P', H), C (H, P'), complex; the batch axes
    ``...`` only for a batch of time steps (``recurrent(u, step_sizes)``). With conjugate
    symmetry C already carries the factor 2.
    """

    Lambda_bar: jax.Array
    B_bar: jax.Array
    C: jax.Array


# Every product (the projections, the readout, the gates) in full float32 precision,
# whatever the global default (a GPU's default float32 product is TF32).
_FULL = jax.lax.Precision.HIGHEST


@jax.custom_vjp
def _product(x, W):
    """x Wᵀ for real x (..., K) and W (M, K): (..., M), the layer's input and output products.

    Its gradient is written out only to choose the transpose: the weight's cotangent
    Σ_ℓ dy_ℓ x_ℓᵀ contracts the long axis of two (B·L, ·) arrays, and XLA's CPU product needs
    one of them transposed in memory first. Left to itself it transposed the larger one (the
    (B·L, H) cotangent of y, fused with the work that makes it, 0.3 s of the 1.7 s gradient
    measured at L = 4096 under load); here the narrower of x and dy is transposed."""
    return jnp.matmul(x, W.T, precision=_FULL)


def _product_fwd(x, W):
    return _product(x, W), (x, W)


def _product_bwd(residuals, dy):
    x, W = residuals
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])  # (B·L, K), (B·L, M)
    if x2.shape[1] <= dy2.shape[1]:
        dW = jnp.matmul(x2.T, dy2, precision=_FULL).T
    else:
        dW = jnp.matmul(dy2.T, x2, precision=_FULL)
    return jnp.matmul(dy, W, precision=_FULL), dW


_product.defvjp(_product_fwd, _product_bwd)


def _real_matmul(u, M):
    """M u for real u (..., H) and complex M (P, H) or (..., P, H): (..., P) complex.

    One real product with the real and imaginary parts of M stacked, (2P, H), instead of
    promoting u to complex first (which would make XLA do a complex product, twice the
    arithmetic) or taking two products (one larger product is faster on a CPU, measured)."""
    P = M.shape[-2]
    stacked = jnp.concatenate([M.real, M.imag], axis=-2)  # (..., 2P, H)
    if M.ndim == 2:
        both = _product(u, stacked)
    else:
        both = jnp.einsum("...ph,...h->...p", stacked, u, precision=_FULL)
    return jax.lax.complex(both[..., :P], both[..., P:])


def _real_readout(C, x):
    """Re(C x) for complex C (H, P) and x (..., P): (..., H) real, without the imaginary part:
    one real product of the pairs (Re x, Im x) (..., 2P) with (Re C, -Im C) (H, 2P)."""
    pairs = jnp.concatenate([x.real, x.imag], axis=-1)
    return _product(pairs, jnp.concatenate([C.real, -C.imag], axis=-1))


class S5Layer(SSMLayer):
    """One MIMO SSM with P states (P/2 complex ones with conjugate symmetry), via a linear scan.

    Args:
        d_model: H, channels in and out.
        state_size: P, the state size of the (real) system; with ``conj_sym`` the layer
            stores P/2 complex states.
        blocks: J, the number of HiPPO-N blocks of the initialisation (P/J each).
        bidirectional: add a second scan running backwards in time (its own half of C̃,
            shape H × 2P' in total); the layer is then non-causal and has no ``step``.
        step_min, step_max: bounds of the log-uniform initial step size Δ, one per state.
        discretization: "zoh" (default, as in the paper), "bilinear" or "euler"
            (:data:`annotated_ssm.discretize.METHODS`).
        conj_sym: keep one state of each conjugate pair and output 2·Re(C̃x).
        activation: applied to ``y + Du`` inside the layer, in both the scan and ``step``:
            "none" (default, the shared layer interface: model.py adds GELU/GLU and mixing),
            "gelu", "half_glu" (the paper's gate GELU(y) ⊙ σ(W·GELU(y))) or "full_glu"
            ((W₁g) ⊙ σ(W₂g), g = GELU(y)).
        rngs: nnx.Rngs; uses ``rngs.params()``.

    ``layer(u, step_sizes=s)``, ``recurrent(u, step_sizes=s)`` and
    ``discrete_system(step_sizes=s)`` take the step size before each observation (module
    docstring).

    Parameters: ``Lambda`` (P', 2), ``B_tilde`` (P', H, 2), ``log_step_size`` (P', log Δ) are
    :class:`SSMParam`; ``C_tilde`` (H, P' or 2P', 2) and ``D`` (H,) are ``nnx.Param``
    (complex numbers stored as (real, imaginary) pairs).

    Example: an irregularly sampled sequence, one step size per observation::

        >>> import jax, jax.numpy as jnp
        >>> from flax import nnx
        >>> from annotated_ssm.layers import S5Layer
        >>> layer = S5Layer(4, 8, rngs=nnx.Rngs(0))
        >>> u = jax.random.normal(jax.random.key(1), (2, 32, 4))
        >>> layer(u, step_sizes=jnp.linspace(0.5, 2.0, 32)).shape
        (2, 32, 4)
    """

    takes_step_sizes = True

    def __init__(
        self,
        d_model: int,
        state_size: int = 64,
        *,
        blocks: int = 1,
        bidirectional: bool = False,
        step_min: float = 1e-3,
        step_max: float = 1e-1,
        discretization: str = "zoh",
        conj_sym: bool = True,
        activation: str = "none",
        rngs: nnx.Rngs,
    ):
        self._init_contract(d_model, state_size, bidirectional=bidirectional, step_min=step_min, step_max=step_max,
                            rngs=rngs)
        self.blocks = check_positive_int("blocks", blocks)
        block_size = self.state_size // self.blocks
        check("blocks", blocks, not (self.state_size % self.blocks or conj_sym is True and block_size % 2),
              "divide state_size, and state_size / blocks must be even with conj_sym=True (one state "
              "of each conjugate pair is kept)", f"state_size={self.state_size}, blocks={self.blocks}")
        self.discretization = check_choice("discretization", discretization, METHODS)
        self.conj_sym = check_bool("conj_sym", conj_sym)
        self.activation = check_choice("activation", activation, ACTIVATIONS)

        init = s5_init(rngs.params(), d_model, state_size, blocks, conj_sym=conj_sym, bidirectional=self.bidirectional)
        self.Lambda = SSMParam(complex_to_pair(init.Lambda))
        self.B_tilde = SSMParam(complex_to_pair(init.B_tilde))
        self._init_log_step_size(rngs, init.Lambda.shape)
        self.C_tilde = nnx.Param(complex_to_pair(init.C_tilde))
        self._init_skip(rngs)
        if activation == "half_glu":
            self.gate = nnx.Linear(d_model, d_model, precision=_FULL, rngs=rngs)
        elif activation == "full_glu":
            self.value = nnx.Linear(d_model, d_model, precision=_FULL, rngs=rngs)
            self.gate = nnx.Linear(d_model, d_model, precision=_FULL, rngs=rngs)

    # --- continuous-time parameters ---------------------------------------------------

    def eigenvalues(self, dtype=None) -> jax.Array:
        """Λ (P',) complex. The real part is kept ≤ -1e-4 so that training cannot make the
        system unstable (|Λ̄| < 1 for every Δ > 0); at initialisation it is -1/2.
        ``dtype``: the real dtype to compute in (default: the parameters')."""
        Lambda = pair_to_complex(self.Lambda[...], dtype)
        return jax.lax.complex(jnp.minimum(Lambda.real, -1e-4), Lambda.imag)

    def _discretize(self, step, dtype):
        """Λ̄ and the row factor f with B̄ = f ⊙ B̃ (row-wise), for Δ broadcast against Λ."""
        # With B = 1 the diagonal discretisation returns exactly the factor f of each row.
        return discretize_diagonal(self.eigenvalues(dtype), 1.0, step, self.discretization)

    def _output_matrix(self, dtype) -> jax.Array:
        """C̃ (H, P' or 2P') with the factor 2 of conjugate symmetry folded in."""
        C = pair_to_complex(self.C_tilde[...], dtype)
        return 2 * C if self.conj_sym else C

    # --- full sequence: chunked scan --------------------------------------------------

    def _forward(self, u, step_sizes=None):
        """The scan form. u (..., L, H) checked, in its computation dtype;
        step_sizes: None or the per-observation factor of Δ, broadcastable to u.shape[:-1]."""
        return self._scan(u, step_sizes)[0]

    def _forward_state(self, u, step_sizes, state):
        """The scan started from ``state`` (None: zero); its last state is the final state."""
        return self._scan(u, step_sizes, state)

    def _scan(self, u, step_sizes=None, state=None):
        """(y, the last state) by the chunked scan from ``state`` (forward direction)."""
        scale = step_sizes
        dtype = u.dtype
        step = self.step_sizes(dtype)
        B_tilde = pair_to_complex(self.B_tilde[...], dtype)
        C = self._output_matrix(dtype)
        if scale is None:
            # Time invariant: fold the discretisation factor into B̄ once, (P', H).
            Lambda_bar, factor = self._discretize(step, dtype)
            Bu = _real_matmul(u, factor[:, None] * B_tilde)  # B̄ u_ℓ, (..., L, P')
            Bu_forward = Bu_backward = Bu
        else:
            # One discretisation per observation: (..., L, P') factors applied to B̃ u_ℓ.
            scale = scale[..., None]
            Lambda_bar, factor = self._discretize(scale * step, dtype)
            Bu = _real_matmul(u, B_tilde)
            Bu_forward = factor * Bu
        P = Lambda_bar.shape[-1]
        states, final = chunked_recurrence(Lambda_bar, Bu_forward, axis=-2, initial_state=state)
        y = _real_readout(C[:, :P], states)
        if self.bidirectional:
            if scale is not None:
                # Backwards, state ℓ decays over the interval to observation ℓ+1.
                if scale.ndim >= 2 and u.shape[-2] > 1:
                    scale = jnp.concatenate([scale[..., 1:, :], scale[..., -1:, :]], axis=-2)
                Lambda_bar, factor = self._discretize(scale * step, dtype)
                Bu_backward = factor * Bu
            backward, _ = chunked_recurrence(Lambda_bar, Bu_backward, axis=-2, reverse=True)
            y = y + _real_readout(C[:, P:], backward)
        return self._activate(y + self._skip(dtype) * u), final

    def _activate(self, y):
        if self.activation == "none":
            return y
        g = jax.nn.gelu(y)
        if self.activation == "gelu":
            return g
        if self.activation == "half_glu":
            return g * jax.nn.sigmoid(self.gate(g))
        return self.value(g) * jax.nn.sigmoid(self.gate(g))

    # --- recurrent mode -----------------------------------------------------------------

    def _discrete_system(self, length, dtype, step_sizes=None) -> S5System:
        """Λ̄, B̄, C for Δ (times ``step_sizes``: None, a scalar, or a batch (...,) of time
        steps). A recurrence needs no ``length``."""
        step = self.step_sizes(dtype)
        if step_sizes is not None:
            step = jnp.asarray(step_sizes, dtype)[..., None] * step  # (..., P')
        Lambda_bar, factor = self._discretize(step, dtype)
        B_bar = factor[..., :, None] * pair_to_complex(self.B_tilde[...], dtype)
        return S5System(Lambda_bar, B_bar, self._output_matrix(dtype)[:, : Lambda_bar.shape[-1]])

    def impulse_response(self, length: int) -> jax.Array:
        """The MIMO kernel K̄_ℓ = Re(C Λ̄^ℓ B̄), shape (length, H_out, H_in), of a causal layer.

        ``layer(u)`` equals the causal convolution of u with it plus ``D ⊙ u`` (before any
        activation): S5 is still a convolution, just one with an H×H matrix per lag.
        """
        length = check_positive_int("length", length)
        self._require_causal("impulse_response")
        system = self.discrete_system(length)
        powers = system.Lambda_bar[None, :] ** jnp.arange(length)[:, None]  # (L, P')
        return jnp.einsum("hp,lp,pk->lhk", system.C, powers, system.B_bar, precision=_FULL).real

    def _init_state(self, batch_shape, dtype) -> jax.Array:
        """Zero state (*batch_shape, P'), complex of ``dtype``'s precision."""
        return jnp.zeros(batch_shape + (self.Lambda.shape[0],), complex_dtype(dtype))

    def _step(self, system: S5System, state, u_t):
        state = system.Lambda_bar * state + _real_matmul(u_t, system.B_bar)
        return state, self._readout(system.C, state, u_t)

    def _readout(self, C, state, u_t):
        """y_t = Re(C x_t) + D u_t (then the activation). C: (H, P'), state: (..., P')."""
        return self._activate(_real_readout(C, state) + self._skip(u_t.dtype) * u_t)
