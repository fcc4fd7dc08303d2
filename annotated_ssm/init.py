"""Initialisations: step sizes Δ, the diagonal state matrices of S4D/DSS, and S5's blocks."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._validation import check_positive_finite

__all__ = ["log_step"]


# --- Step sizes -------------------------------------------------------------------------

def log_step(key: jax.Array, shape, step_min: float = 1e-3, step_max: float = 1e-1) -> jax.Array:
    """``log Δ ~ U[log step_min, log step_max]``, the step initialisation of S4, DSS, S4D and S5.

    Returns:
        float32 array of ``shape`` holding log Δ (layers store log Δ and use exp of it, which
        keeps Δ positive during training).
    """
    check_positive_finite("step_min", step_min)
    check_positive_finite("step_max", step_max)
    if step_min > step_max:
        raise ValueError(f"step_min must be <= step_max; got step_min={step_min}, step_max={step_max}.")
    return jax.random.uniform(key, shape, jnp.float32, jnp.log(step_min), jnp.log(step_max))


# --- Diagonal initialisations of S4D and DSS (chapter 6) --------------------------------


# --- S5: block-diagonal HiPPO-N initialisation (chapter 7) -------------------------------
