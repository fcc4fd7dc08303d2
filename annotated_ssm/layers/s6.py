"""S6: the selective state space of Mamba, whose Δ, B and C depend on the input.

Each of the H channels runs N real states with a diagonal A (Gu and Dao, 2023, Algorithm 2)::

    Δ_ℓ = softplus(W_Δ u_ℓ + b)          (H,)   one step size per channel, from the input
    B_ℓ = W_B u_ℓ,  C_ℓ = W_C u_ℓ          (N,)   shared by the channels, from the input
    x_ℓ = exp(Δ_ℓ A) ⊙ x_{ℓ-1} + Δ_ℓ B_ℓ u_ℓ      ZOH for A, Euler (B̄ = ΔB) for B, as Mamba
    y_ℓ = C_ℓ · x_ℓ + D ⊙ u_ℓ

A_n = -(n + 1) at initialisation (S4D-Real), stored as ``log_A_real`` = log(-A). The system changes at every step, so there is
no convolution kernel: ``layer(u)`` runs :func:`annotated_ssm.scan.selective_scan`, which
cuts the sequence into chunks of ``chunk_size`` steps, carries the state (B, H, N) from
chunk to chunk and reads each chunk's states out with C inside the chunk, recomputing them
in the backward pass. Its memory is O(B·L·(H + N)) plus one chunk of states, not the
O(B·L·H·N) of all states at once (``chunk_size=None``, one parallel scan over the whole
sequence). Mamba's fused kernel goes further and keeps the states in on-chip memory.

The bias b is ``softplus⁻¹(exp(log_step_size))``: Δ = exp(log_step_size) where the
projection is 0, so ``log_step_size`` keeps the meaning (and the initial range) it has in
the other layers.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check_choice, check_positive_int
from ..scan import SELECTIVE_SCAN_CHUNK_SIZE, WITHIN_CHUNK, selective_scan, selective_system
from .base import SSMLayer, SSMParam

__all__ = ["S6Layer"]

# Every product (the projections, the readout) in full float32 precision, whatever the
# global default (a GPU's default float32 product is TF32).
_FULL = jax.lax.Precision.HIGHEST


def _inverse_softplus(x):
    """log(e^x - 1): the b with softplus(b) = x, for x > 0 (expm1 keeps small x accurate)."""
    return x + jnp.log(-jnp.expm1(-x))


class S6Layer(SSMLayer):
    """H channels of N real, input-dependent (selective) diagonal SSMs, via a chunked scan.

    Args:
        d_model: H, the number of channels.
        state_size: N, real states per channel.
        bidirectional: add the same selective SSM run backwards in time (non-causal).
        step_min, step_max: bounds of the log-uniform initial step size Δ where the
            projection is zero.
        dt_rank: R, the rank of the projection u ↦ W_Δ u (H → R → H); None: ⌈H/16⌉, Mamba's.
        chunk_size: steps per chunk of :func:`annotated_ssm.scan.selective_scan` (an integer
            >= 1; default ``scan.SELECTIVE_SCAN_CHUNK_SIZE``, measured). None: all states at
            once by one parallel scan, O(B·L·H·N) memory (the reference).
        within_chunk: ``"sequential"`` or ``"associative"``, how a chunk's states are
            computed; None: the scan's default for the backend (sequential on a CPU).
        rngs: nnx.Rngs; uses ``rngs.params()``.

    Parameters: ``log_A_real`` (H, N), log(-A) (A = -exp(log_A_real), real), and
    ``log_step_size`` (H,), log Δ, are :class:`SSMParam`;
    ``x_proj`` (H → R + 2N: the low-rank Δ input, B and C), ``dt_proj`` (R → H) and ``D``
    (H,) are ``nnx.Param``.

    Example::

        >>> import jax
        >>> from flax import nnx
        >>> from annotated_ssm.layers import S6Layer
        >>> layer = S6Layer(4, 8, rngs=nnx.Rngs(0))
        >>> u = jax.random.normal(jax.random.key(1), (2, 32, 4))
        >>> layer(u).shape  # Δ, B and C computed from each step of u
        (2, 32, 4)
    """

    def __init__(
        self,
        d_model: int,
        state_size: int = 16,
        *,
        bidirectional: bool = False,
        step_min: float = 1e-3,
        step_max: float = 1e-1,
        dt_rank: int | None = None,
        chunk_size: int | None = SELECTIVE_SCAN_CHUNK_SIZE,
        within_chunk: str | None = None,
        rngs: nnx.Rngs,
    ):
        self._init_contract(d_model, state_size, bidirectional=bidirectional, step_min=step_min,
                            step_max=step_max, rngs=rngs)
        H, N = self.d_model, self.state_size
        self.dt_rank = math.ceil(H / 16) if dt_rank is None else check_positive_int("dt_rank", dt_rank)
        self.chunk_size = None if chunk_size is None else check_positive_int("chunk_size", chunk_size)
        self.within_chunk = None if within_chunk is None else check_choice("within_chunk", within_chunk,
                                                                           WITHIN_CHUNK)
        A = np.broadcast_to(np.arange(1, N + 1, dtype=np.float32), (H, N))  # S4D-Real: -(n+1)
        self.log_A_real = SSMParam(jnp.asarray(np.log(A)))
        self._init_log_step_size(rngs, (H,))
        self.x_proj = nnx.Linear(H, self.dt_rank + 2 * N, use_bias=False, rngs=rngs)
        # Mamba initialises W_Δ uniformly in ±R^-1/2 so that Δ starts near its bias.
        bound = self.dt_rank ** -0.5
        self.dt_proj = nnx.Linear(
            self.dt_rank, H, use_bias=False, rngs=rngs,
            kernel_init=lambda key, shape, dtype: jax.random.uniform(key, shape, dtype, -bound, bound),
        )
        self._init_skip(rngs)

    def eigenvalues(self, dtype=None) -> jax.Array:
        """A (H, N), real and negative."""
        log_A_real = self.log_A_real[...] if dtype is None else self.log_A_real[...].astype(dtype)
        return -jnp.exp(log_A_real)

    def selection(self, u) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Δ (..., H), B (..., N), C (..., N) for inputs u (..., H) in their computation dtype."""
        R, N = self.dt_rank, self.state_size
        projected = self._linear(self.x_proj, u)
        low_rank, B, C = projected[..., :R], projected[..., R:R + N], projected[..., R + N:]
        bias = _inverse_softplus(self.step_sizes(u.dtype))
        return jax.nn.softplus(self._linear(self.dt_proj, low_rank) + bias), B, C

    @staticmethod
    def _linear(linear: nnx.Linear, x):
        return jnp.matmul(x, linear.kernel[...].astype(x.dtype), precision=_FULL)

    def _discretize(self, A, u):
        """Ā (..., H, N) and B̄u (..., H, N) for inputs u (..., H), and C (..., N)."""
        step, B, C = self.selection(u)
        return *selective_system(step, A, B, u), C

    def _forward(self, u, step_sizes=None):
        """The chunked-scan form: u (..., L, H) -> y (..., L, H)."""
        step, B, C = self.selection(u)  # (..., L, H), (..., L, N), (..., L, N)
        scan = functools.partial(selective_scan, u, step, self.eigenvalues(u.dtype), B, C,
                                 chunk_size=self.chunk_size, within_chunk=self.within_chunk)
        y = scan()
        if self.bidirectional:
            y = y + scan(reverse=True)
        return y + self._skip(u.dtype) * u

    def _forward_state(self, u, step_sizes, state):
        """The chunked scan started from ``state`` (None: zero), its last carry the final state."""
        step, B, C = self.selection(u)
        y, final = selective_scan(u, step, self.eigenvalues(u.dtype), B, C, chunk_size=self.chunk_size,
                                  within_chunk=self.within_chunk, initial_state=state, return_state=True)
        return y + self._skip(u.dtype) * u, final

    # --- the recurrence: A is all that does not depend on the input ------------------------

    def _discrete_system(self, length, dtype, step_sizes=None) -> jax.Array:
        """A (H, N): Δ, B and C come from each input, in ``step``."""
        return self.eigenvalues(dtype)

    def _init_state(self, batch_shape, dtype) -> jax.Array:
        """Zero state (*batch_shape, H, N), real."""
        return jnp.zeros(batch_shape + (self.d_model, self.state_size), dtype)

    def _step(self, A, state, u_t):
        A_bar, Bu, C = self._discretize(A, u_t)
        state = A_bar * state + Bu
        y = jnp.einsum("...n,...hn->...h", C, state, precision=_FULL)
        return state, y + self._skip(u_t.dtype) * u_t

