"""The interface every SSM layer shares, and the convolution machinery of S4, DSS and S4D.

A layer maps a sequence of H-channel vectors to another: ``(B, L, H) -> (B, L, H)``
(a single sequence ``(L, H)`` works too). Each layer offers two ways to compute it:

- ``layer(u)``: the whole sequence at once (FFT convolution for S4/DSS/S4D, a parallel
  scan for S5). This is what training uses.
- ``layer.step(state, u_t, system)``: one time step of the equivalent recurrence, for
  online inference and autoregressive generation. ``system = layer.discrete_system(L)``
  precomputes the discrete matrices once; ``layer.recurrent(u)`` runs ``step`` over a
  whole sequence and must reproduce ``layer(u)`` for a causal layer.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check_ndim
from ..kernels import causal_conv

__all__ = ["SSMParam", "SSMLayer", "ConvolutionalSSMLayer", "DiagonalSystem", "diagonal_step", "check_sequence_input"]


class SSMParam(nnx.Param):
    """A parameter of the state space itself: A (or Λ, P), B and log Δ.

    The papers train these with their own (smaller) learning rate and no weight decay;
    tagging them with this type lets the training loop find them with
    ``nnx.state(model, SSMParam)``. C, D and the position-wise layers are plain ``nnx.Param``.
    """


def check_sequence_input(u, d_model: int) -> None:
    """Raise ValueError unless ``u`` has shape (B, L, H) or (L, H) with H = d_model."""
    check_ndim("u", u, (2, 3), "(batch, length, channels) or (length, channels)")
    if np.shape(u)[-1] != d_model:
        raise ValueError(
            f"u must have {d_model} channels on its last axis (the layer's d_model); got shape {np.shape(u)}."
        )
    if np.shape(u)[-2] < 1:
        raise ValueError(f"u must have length L >= 1; got shape {np.shape(u)}.")


class SSMLayer(nnx.Module):
    """Base class of the sequence layers. Subclasses set ``d_model`` and ``bidirectional``
    and implement ``__call__``, ``discrete_system``, ``init_state`` and ``_step``."""

    d_model: int
    bidirectional: bool

    def discrete_system(self, length: int | None = None) -> Any:
        """Precompute the discrete recurrence for sequences of ``length`` (None: unbounded)."""
        raise NotImplementedError

    def init_state(self, batch_shape: tuple[int, ...] = ()) -> Any:
        """The zero state for a batch of sequences."""
        raise NotImplementedError

    def _step(self, system: Any, state: Any, u_t: jax.Array) -> tuple[Any, jax.Array]:
        raise NotImplementedError

    def step(self, state, u_t, system=None):
        """Advance the recurrence one step.

        Args:
            state: from ``init_state`` or a previous ``step``.
            u_t: (..., H) the input at this time step.
            system: from ``discrete_system(L)``; computed for unbounded length if None.

        Returns:
            (new_state, y_t) with y_t of shape (..., H).
        """
        if self.bidirectional:
            raise ValueError("step needs a causal layer; this layer was built with bidirectional=True.")
        if np.shape(u_t)[-1:] != (self.d_model,):
            raise ValueError(f"u_t must have shape (..., {self.d_model}); got {np.shape(u_t)}.")
        if system is None:
            system = self.discrete_system(None)
        return self._step(system, state, u_t)

    def recurrent(self, u):
        """Run ``step`` over a whole sequence ``u`` (B, L, H) or (L, H); returns y of the same shape."""
        check_sequence_input(u, self.d_model)
        system = self.discrete_system(np.shape(u)[-2])
        state = self.init_state(np.shape(u)[:-2])
        time_major = jnp.moveaxis(jnp.asarray(u), -2, 0)

        def body(state, u_t):
            return self.step(state, u_t, system)

        _, y = jax.lax.scan(body, state, time_major)
        return jnp.moveaxis(y, 0, -2)


class ConvolutionalSSMLayer(SSMLayer):
    """H independent SISO SSMs applied by FFT convolution with a length-L kernel.

    Subclasses implement ``kernel(L)``: shape (H, L), or (2, H, L) when bidirectional (the
    second kernel runs backwards in time). They also own ``self.D``, the skip term, (H,).
    """

    def kernel(self, length: int) -> jax.Array:
        raise NotImplementedError

    def __call__(self, u):
        """y = K̄ * u + D u per channel. u: (B, L, H) or (L, H) -> same shape."""
        check_sequence_input(u, self.d_model)
        u = jnp.asarray(u)
        L = u.shape[-2]
        K = self.kernel(L)
        channels_last = jnp.swapaxes(u, -1, -2)  # (..., H, L)
        if self.bidirectional:
            y = causal_conv(channels_last, K[0])
            y = y + jnp.flip(causal_conv(jnp.flip(channels_last, -1), K[1]), -1)
        else:
            y = causal_conv(channels_last, K)
        return jnp.swapaxes(y, -1, -2).astype(u.dtype) + self.D[...] * u


class DiagonalSystem(NamedTuple):
    """A discrete diagonal SSM per channel: x ← Ā ⊙ x + B̄ u,  y = Re(Σ_n C_n x_n).

    With conjugate symmetry, C already carries the factor 2 (y = 2·Re of the kept half).
    Shapes: (H, N) each, complex.
    """

    A_bar: jax.Array
    B_bar: jax.Array
    C: jax.Array


def diagonal_step(system: DiagonalSystem, state: jax.Array, u_t: jax.Array, D: jax.Array):
    """One step of H diagonal SSMs. state: (..., H, N) complex; u_t: (..., H) real."""
    state = system.A_bar * state + system.B_bar * u_t[..., None]
    y = jnp.real(jnp.sum(system.C * state, axis=-1)) + D * u_t
    return state, y.astype(u_t.dtype)
