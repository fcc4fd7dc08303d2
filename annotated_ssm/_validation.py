"""Input checks shared by the package: every message names the argument, what it got,
and what is allowed, so a user never meets a silent NaN or a traceback from deep in JAX.

Value checks (finiteness, positivity) run only on concrete arrays; under ``jit`` the
values are tracers and only shapes can be checked.
"""

from __future__ import annotations

from typing import Any, Iterable

import jax
import numpy as np


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds values we can look at (not a tracer inside jit/grad/vmap)."""
    return not isinstance(x, jax.core.Tracer)


def check_finite(name: str, x: Any) -> None:
    """Raise ValueError if a concrete ``x`` has a NaN or infinite entry."""
    if is_concrete(x):
        values = np.asarray(x)
        if not np.all(np.isfinite(values)):
            bad = np.size(values) - np.count_nonzero(np.isfinite(values))
            raise ValueError(f"{name} must be finite; got {bad} non-finite entr{'y' if bad == 1 else 'ies'} (NaN or inf).")


def check_positive_finite(name: str, x: Any) -> None:
    """Raise ValueError unless every entry of a concrete ``x`` is finite and > 0."""
    check_finite(name, x)
    if is_concrete(x):
        values = np.asarray(x)
        if np.iscomplexobj(values):
            raise ValueError(
                f"{name} must be real, finite and > 0; got a complex array (dtype {values.dtype}). "
                f"Pass the real step sizes (e.g. jnp.real or exp of a real log-step)."
            )
        if not np.all(values > 0):
            raise ValueError(f"{name} must be real, finite and > 0; got {values.min()} (its smallest entry).")


def check_ndim(name: str, x: Any, allowed: Iterable[int], meaning: str = "") -> None:
    allowed = tuple(allowed)
    if np.ndim(x) not in allowed:
        spelled = " or ".join(str(a) for a in allowed)
        extra = f" ({meaning})" if meaning else ""
        raise ValueError(f"{name} must have {spelled} dimensions{extra}; got shape {np.shape(x)}.")


def check_square(name: str, A: Any) -> None:
    """Raise ValueError unless ``A`` is a (batch of) square matrix, shape (..., N, N)."""
    shape = np.shape(A)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"{name} must be a square matrix of shape (..., N, N); got shape {shape}.")


def check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """Return ``value`` as int, or raise ValueError unless it is an integer >= minimum."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    return int(value)


def check_even(name: str, value: int, why: str) -> None:
    if value % 2:
        raise ValueError(f"{name} must be even ({why}); got {value}.")


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of: {', '.join(map(repr, choices))}.")
    return value
