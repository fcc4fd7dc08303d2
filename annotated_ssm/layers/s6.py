"""S6: the selective state space of Mamba, whose Δ, B and C depend on the input.

Each of the H channels runs N real states with a diagonal A (Gu and Dao, 2023, Algorithm 2)::

    Δ_ℓ = softplus(W_Δ u_ℓ + b)          (H,)   one step per channel, from the input
    B_ℓ = W_B u_ℓ,  C_ℓ = W_C u_ℓ          (N,)   shared by the channels, from the input
    x_ℓ = exp(Δ_ℓ A) ⊙ x_{ℓ-1} + Δ_ℓ B_ℓ u_ℓ      ZOH for A, Euler (B̄ = ΔB) for B, as Mamba
    y_ℓ = C_ℓ · x_ℓ + D ⊙ u_ℓ

A_n = -(n + 1) at initialisation (S4D-Real). The system changes at every step, so there is
no convolution kernel: ``layer(u)`` computes all states with the parallel scan of
:func:`annotated_ssm.scan.linear_recurrence`, the one S5 uses for its time-varying steps.
Its memory is O(B·L·H·N): every state of every step exists at once. Mamba's fused kernel
keeps the states in on-chip memory and writes only y (B·L·H); this layer does not.

The bias b is ``softplus⁻¹(exp(log_step))``: Δ = exp(log_step) where the projection is 0,
so ``log_step`` keeps the meaning (and the initial range) it has in the other layers.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check_positive_int
from ..scan import _linear_recurrence
from .base import SSMLayer, SSMParam

__all__ = ["S6Layer"]

# Every product (the projections, the readout) in full float32 precision, whatever the
# global default (a GPU's default float32 product is TF32).
_FULL = jax.lax.Precision.HIGHEST


def _inverse_softplus(x):
    """log(e^x - 1): the b with softplus(b) = x, for x > 0 (expm1 keeps small x accurate)."""
    return x + jnp.log(-jnp.expm1(-x))


class S6Layer(SSMLayer):
    """H channels of N real, input-dependent (selective) diagonal SSMs, via a parallel scan.

    Args:
        d_model: H, the number of channels.
        state_size: N, real states per channel.
        bidirectional: add the same selective SSM run backwards in time (non-causal).
        step_min, step_max: range of the log-uniform Δ where the projection is zero.
        dt_rank: R, the rank of the projection u ↦ W_Δ u (H → R → H); None: ⌈H/16⌉, Mamba's.
        rngs: nnx.Rngs; uses ``rngs.params()``.

    Parameters: ``A_log`` (H, N) (A = -exp(A_log)) and ``log_step`` (H,) are :class:`SSMParam`;
    ``x_proj`` (H → R + 2N: the low-rank Δ input, B and C), ``dt_proj`` (R → H) and ``D``
    (H,) are ``nnx.Param``.
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
        rngs: nnx.Rngs,
    ):
        self._init_contract(d_model, state_size, bidirectional=bidirectional, step_min=step_min,
                            step_max=step_max)
        H, N = self.d_model, self.state_size
        self.dt_rank = math.ceil(H / 16) if dt_rank is None else check_positive_int("dt_rank", dt_rank)
        A = np.broadcast_to(np.arange(1, N + 1, dtype=np.float32), (H, N))  # S4D-Real: -(n+1)
        self.A_log = SSMParam(jnp.asarray(np.log(A)))
        self._init_log_step(rngs, (H,))
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
        A_log = self.A_log[...] if dtype is None else self.A_log[...].astype(dtype)
        return -jnp.exp(A_log)

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
        A_bar = jnp.exp(step[..., None] * A)
        Bu = (step * u)[..., None] * B[..., None, :]
        return A_bar, Bu, C

    def _forward(self, u, steps=None):
        """The parallel-scan form: u (..., L, H) -> y (..., L, H)."""
        A_bar, Bu, C = self._discretize(self.eigenvalues(u.dtype), u)  # (..., L, H, N), (..., L, N)
        states = _linear_recurrence(A_bar, Bu, axis=-3)  # all L states at once: (..., L, H, N)
        y = jnp.einsum("...ln,...lhn->...lh", C, states, precision=_FULL)
        if self.bidirectional:
            backward = _linear_recurrence(A_bar, Bu, axis=-3, reverse=True)
            y = y + jnp.einsum("...ln,...lhn->...lh", C, backward, precision=_FULL)
        return y + self._skip(u.dtype) * u

    # --- the recurrence: A is all that does not depend on the input ------------------------

    def _discrete_system(self, length, dtype, steps=None) -> jax.Array:
        """A (H, N): Δ, B and C come from each input, in ``step``."""
        return self.eigenvalues(dtype)

    def _init_state(self, batch_shape, dtype) -> jax.Array:
        """Zero state (*batch_shape, H, N), real."""
        return jnp.zeros(batch_shape + (self.d_model, self.state_size), dtype)

    def _step(self, A, state, u_t):
        A_bar, Bu, C = self._discretize(A, u_t)
        state = A_bar * state + Bu
        readout = jnp.einsum("...n,...hn->...h", C, state, precision=_FULL)
        return state, readout + self._skip(u_t.dtype) * u_t

