"""SSD: the state space layer of Mamba-2, a scalar decay per head (Dao and Gu, 2024).

The H = d_model channels are cut into heads of P = ``head_dim`` channels. Each head runs one
(P × N) state whose decay is a scalar, the same for all of its P·N entries::

    Δ_ℓ = softplus(W_Δ u_ℓ + b)              (heads,)  one step size per head, from the input
    B_ℓ = W_B u_ℓ,  C_ℓ = W_C u_ℓ              (groups, N) shared by the heads of a group
    h_ℓ = exp(Δ_ℓ A) h_{ℓ-1} + (Δ_ℓ x_ℓ) B_ℓᵀ   x_ℓ (P,) the head's channels of u_ℓ, A < 0 scalar
    y_ℓ = h_ℓ C_ℓ + D ⊙ x_ℓ

(ZOH for A, Euler for B, as Mamba and S6.) S6 is the same recurrence with a diagonal A of N
different values per channel and P = 1; SSD ties A across a head's N states and shares B, C
across its P channels, which turns the recurrence into masked attention, y = (L ∘ C Bᵀ) x,
and lets ``layer(u)`` run :func:`annotated_ssm.scan.ssd_scan`: Mamba-2's chunked algorithm,
matrix products within chunks of ``chunk_size`` steps and a scan of one state per chunk
(past ``scan.SSD_CHUNKS_PER_GROUP`` chunks, in groups recomputed in the backward pass).
``step`` is one step of the recurrence (:func:`annotated_ssm.scan.ssd_step`).

Initialisation as Mamba-2's ``mamba2_simple.py``: A = -exp(``log_A_real``) with -A ~ U[1, 16]
per head; the bias b = softplus⁻¹(Δ₀) with Δ₀ = exp(``log_step_size``) log-uniform in
[step_min, step_max], so that Δ = Δ₀ where the projection is zero (``log_step_size`` keeps
the meaning it has in every layer, as in S6).

This is the SSM of Mamba-2 alone, the analogue of S6 in Mamba: the Mamba-2 block around it
(one input projection for x, z, B, C and Δ, a causal convolution, the gated RMSNorm and the
output projection) is not here. Differences from ``mamba2_simple.py`` that stay, so that the
layer keeps the contract of ``layers/base.py``: D is one value per channel (d_model,), drawn
N(0, 1) as every layer's skip (Mamba-2 starts D = 1, one per head, or per channel with its
``D_has_hdim``); B, C and Δ come from u itself, not from a convolution of a projection; there
is no learnable initial state and no Δ floor or limit (Mamba-2's ``dt_init_floor`` = 1e-4 is
below the default step_min); ``bidirectional`` adds the same SSM run backwards in time (as
S6 does; Mamba-2 has no such variant).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from .._validation import check, check_positive_int
from ..scan import SSD_CHUNK_SIZE, ssd_scan, ssd_step
from .base import SSMLayer, SSMParam

__all__ = ["SSDLayer"]

# Every product (the projection, the readout) in full float32 precision, whatever the
# global default (a GPU's default float32 product is TF32).
_FULL = jax.lax.Precision.HIGHEST

#: The largest head size the default picks (Mamba-2's minimal listing uses 64).
DEFAULT_MAX_HEAD_DIM = 64


def _inverse_softplus(x):
    """log(e^x - 1): the b with softplus(b) = x, for x > 0 (expm1 keeps small x accurate)."""
    return x + jnp.log(-jnp.expm1(-x))


def default_head_dim(d_model: int) -> int:
    """The largest divisor of d_model that is at most 64: 64 when 64 divides d_model,
    d_model itself up to 64 (one head)."""
    return max(p for p in range(1, min(DEFAULT_MAX_HEAD_DIM, d_model) + 1) if d_model % p == 0)


class SSDLayer(SSMLayer):
    """Mamba-2's SSD: heads of P channels, each with a scalar input-dependent decay, via the
    chunked algorithm.

    Args:
        d_model: H, the number of channels.
        state_size: N, the state's columns per head (the head's state is P × N).
        bidirectional: add the same SSM run backwards in time (non-causal).
        step_min, step_max: bounds of the log-uniform initial step size Δ where the
            projection is zero.
        head_dim: P, channels per head, a divisor of d_model; heads = d_model // P. None:
            the largest divisor of d_model that is at most 64 (64 when it divides d_model).
        n_groups: G, groups of heads that share B and C, a divisor of the number of heads
            (1: all heads share them, Mamba-2's default; heads: one B, C per head).
        chunk_size: steps per chunk of :func:`annotated_ssm.scan.ssd_scan`, an integer >= 1.
        rngs: nnx.Rngs; uses ``rngs.params()``.

    Parameters: ``log_A_real`` (heads,), log(-A), and ``log_step_size`` (heads,), log Δ₀,
    are :class:`SSMParam`; ``x_proj`` (H → 2·G·N + heads: B, C and the Δ input) and ``D``
    (H,) are ``nnx.Param``.

    Example::

        >>> import jax
        >>> from flax import nnx
        >>> from annotated_ssm.layers import SSDLayer
        >>> layer = SSDLayer(8, 4, head_dim=4, rngs=nnx.Rngs(0))
        >>> u = jax.random.normal(jax.random.key(1), (2, 32, 8))
        >>> layer.n_heads, layer(u).shape
        (2, (2, 32, 8))
    """

    takes_step_sizes = False

    def __init__(
        self,
        d_model: int,
        state_size: int = 64,
        *,
        bidirectional: bool = False,
        step_min: float = 1e-3,
        step_max: float = 1e-1,
        head_dim: int | None = None,
        n_groups: int = 1,
        chunk_size: int = SSD_CHUNK_SIZE,
        rngs: nnx.Rngs,
    ):
        self._init_contract(d_model, state_size, bidirectional=bidirectional, step_min=step_min,
                            step_max=step_max, rngs=rngs)
        H, N = self.d_model, self.state_size
        if head_dim is None:
            self.head_dim = default_head_dim(H)
        else:
            self.head_dim = check_positive_int("head_dim", head_dim)
            check("head_dim", head_dim, H % head_dim == 0, f"divide d_model = {H} (heads of "
                  "head_dim channels each)")
        self.n_heads = H // self.head_dim
        self.n_groups = check_positive_int("n_groups", n_groups)
        check("n_groups", n_groups, self.n_heads % n_groups == 0, f"divide the number of heads, "
              f"{self.n_heads} (d_model {H} / head_dim {self.head_dim})")
        self.chunk_size = check_positive_int("chunk_size", chunk_size)
        # Mamba-2: -A ~ U[1, 16] per head, stored as its log.
        minus_A = jax.random.uniform(rngs.params(), (self.n_heads,), jnp.float32, 1.0, 16.0)
        self.log_A_real = SSMParam(jnp.log(minus_A))
        self._init_log_step_size(rngs, (self.n_heads,))
        self.x_proj = nnx.Linear(H, 2 * self.n_groups * N + self.n_heads, use_bias=False, rngs=rngs)
        self._init_skip(rngs)

    def eigenvalues(self, dtype=None) -> jax.Array:
        """A (heads,), real and negative: the decay of head h over a step Δ is exp(Δ A_h)."""
        log_A_real = self.log_A_real[...] if dtype is None else self.log_A_real[...].astype(dtype)
        return -jnp.exp(log_A_real)

    def selection(self, u) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Δ (..., heads), B (..., groups, N), C (..., groups, N) for inputs u (..., H) in
        their computation dtype; head k reads group k // (heads / groups)."""
        G, N = self.n_groups, self.state_size
        projected = jnp.matmul(u, self.x_proj.kernel[...].astype(u.dtype), precision=_FULL)
        B, C, step_input = projected[..., :G * N], projected[..., G * N:2 * G * N], projected[..., 2 * G * N:]
        bias = _inverse_softplus(self.step_sizes(u.dtype))
        grouped = lambda z: z.reshape(z.shape[:-1] + (G, N))  # noqa: E731
        return jax.nn.softplus(step_input + bias), grouped(B), grouped(C)

    def _ssd_inputs(self, A, u):
        """x = Δ·u (..., heads, P), log_a = Δ·A (..., heads), B and C (..., groups, N)."""
        step, B, C = self.selection(u)
        x = step[..., None] * u.reshape(u.shape[:-1] + (self.n_heads, self.head_dim))
        return x, step * A, B, C

    def _forward(self, u, step_sizes=None):
        """The chunked algorithm: u (..., L, H) -> y (..., L, H)."""
        L, H = u.shape[-2:]
        inputs = self._ssd_inputs(self.eigenvalues(u.dtype), u.reshape(-1, L, H))
        y, _ = ssd_scan(*inputs, chunk_size=self.chunk_size)
        if self.bidirectional:  # the same SSM backwards in time: the scan of the reversed sequence
            backward, _ = ssd_scan(*(jnp.flip(z, axis=1) for z in inputs), chunk_size=self.chunk_size)
            y = y + jnp.flip(backward, axis=1)
        return y.reshape(u.shape) + self._skip(u.dtype) * u

    def _forward_state(self, u, step_sizes, state):
        """The chunked algorithm from ``state`` (None: zero) to the final state it returns."""
        L, H = u.shape[-2:]
        inputs = self._ssd_inputs(self.eigenvalues(u.dtype), u.reshape(-1, L, H))
        state_shape = (self.n_heads, self.head_dim, self.state_size)
        initial = None if state is None else state.reshape((-1,) + state_shape)
        y, final = ssd_scan(*inputs, chunk_size=self.chunk_size, initial_state=initial)
        return y.reshape(u.shape) + self._skip(u.dtype) * u, final.reshape(u.shape[:-2] + state_shape)

    # --- the recurrence: A is all that does not depend on the input ------------------------

    def _discrete_system(self, length, dtype, step_sizes=None) -> jax.Array:
        """A (heads,): Δ, B and C come from each input, in ``step``."""
        return self.eigenvalues(dtype)

    def _init_state(self, batch_shape, dtype) -> jax.Array:
        """Zero state (*batch_shape, heads, P, N), real."""
        return jnp.zeros(batch_shape + (self.n_heads, self.head_dim, self.state_size), dtype)

    def _step(self, A, state, u_t):
        state, y = ssd_step(state, *self._ssd_inputs(A, u_t))
        return state, y.reshape(u_t.shape) + self._skip(u_t.dtype) * u_t
