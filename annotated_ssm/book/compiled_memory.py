"""What a compiled layer plans to hold in memory, from XLA's own analysis (nothing is run).

Used by chapter 9 and ``benchmarks/bench_selective_memory.py`` to compare the selective
layer's parallel scan, which materialises all B·L·H·N states, with a convolutional layer.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["planned_temp_bytes"]


def planned_temp_bytes(layer: nnx.Module, shape: tuple[int, ...], *,
                       gradient: bool = False) -> int:
    """XLA's temporary bytes for ``layer(u)``, or for the gradient of ``sum(layer(u)²)``
    with respect to the layer's state, for a float32 u of ``shape`` (B, L, H).

    The program is compiled for the default backend, never run: the figure is the
    compiler's plan (``memory_analysis().temp_size_in_bytes``), what the computation needs
    beyond its inputs and outputs, not a measured peak.
    """
    if not (isinstance(shape, tuple) and all(isinstance(n, int) and n > 0 for n in shape)):
        raise ValueError(f"shape must be a tuple of positive integers, e.g. (B, L, H); "
                         f"got {shape!r}.")
    graphdef, state = nnx.split(layer)

    def forward(state, u):
        return nnx.merge(graphdef, state)(u)

    def loss(state, u):
        return jnp.sum(forward(state, u) ** 2)

    function = jax.grad(loss) if gradient else forward
    u = jax.ShapeDtypeStruct(shape, jnp.float32)
    return jax.jit(function).lower(state, u).compile().memory_analysis().temp_size_in_bytes
