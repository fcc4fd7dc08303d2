"""Input checks at the package's doors (the layers' public methods, the models, configs, data
and training): every message names the argument, what it got, and what is allowed, so a
user never meets a silent NaN or a traceback from deep in JAX. The numerics modules check
nothing: they trust their callers.

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


def _all_on_device(predicate, x) -> bool:
    """``predicate(x).all()`` for a concrete jax.Array, reduced where x lives: one bool comes
    back to the host, not the array. (Eagerly even inside a trace, where a concrete array
    met as a constant would otherwise become a tracer.)"""
    with jax.ensure_compile_time_eval():
        return bool(predicate(x).all())


def check_finite(name: str, x: Any) -> None:
    """Raise ValueError if a concrete ``x`` has a NaN or infinite entry.

    Host input (NumPy, Python) is checked on the host, a jax.Array on its device; tracers
    (under jit, grad, vmap) are skipped: their values do not exist yet."""
    if not is_concrete(x) or (isinstance(x, jax.Array) and _all_on_device(jax.numpy.isfinite, x)):
        return
    values = np.asarray(x)
    if not np.all(np.isfinite(values)):
        bad = np.size(values) - np.count_nonzero(np.isfinite(values))
        raise ValueError(f"{name} must be finite; got {bad} non-finite entr{'y' if bad == 1 else 'ies'} (NaN or inf).")


def cast_positive_finite(name: str, x: Any, dtype) -> jax.Array:
    """``x`` as a jax.Array of real ``dtype``, after checking that every entry is finite and
    > 0 *in that dtype* (1e39 is inf in float32 and 1e-50 is 0): ValueError naming the first
    entry that is not, with its value before the cast. Tracers are cast unchecked."""
    if np.iscomplexobj(x):
        raise ValueError(f"{name} must be real, finite and > 0; got a complex array (dtype {np.result_type(x)}).")
    if isinstance(x, jax.Array):  # on its device, or a tracer
        cast = x.astype(dtype)
        if not is_concrete(cast) or _all_on_device(lambda v: jax.numpy.isfinite(v) & (v > 0), cast):
            return cast
        cast_values, host = np.asarray(cast), np.asarray(x)
    else:
        host = np.asarray(x)
        if host.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be real numbers, finite and > 0; got dtype {host.dtype}.")
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            cast_values = host.astype(dtype)
        cast = cast_values
    bad = ~(np.isfinite(cast_values) & (cast_values > 0))
    if not bad.any():
        return jax.numpy.asarray(cast)
    first = tuple(np.argwhere(bad)[0])
    before, after = host[first], cast_values[first]
    got = f"{before}" if not np.isfinite(before) or before <= 0 else (
        f"{before} (which is {after} in {np.dtype(dtype).name}, the dtype it is computed in)")
    where = f" at index {tuple(int(i) for i in first)}" if first else ""
    count = int(bad.sum())
    more = f", the first of {count} such entries" if count > 1 else ""
    raise ValueError(f"{name} must be finite and > 0 in {np.dtype(dtype).name}; got {got}{where}{more}.")


def check_ndim(name: str, x: Any, allowed: Iterable[int], meaning: str = "") -> None:
    allowed = tuple(allowed)
    if np.ndim(x) not in allowed:
        spelled = " or ".join(str(a) for a in allowed)
        extra = f" ({meaning})" if meaning else ""
        raise ValueError(f"{name} must have {spelled} dimensions{extra}; got shape {np.shape(x)}.")


def check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """Return ``value`` as int, or raise ValueError unless it is an integer >= minimum."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    return int(value)


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of: {', '.join(map(repr, choices))}.")
    return value


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` as bool, or raise ValueError unless it is True or False.

    ``bool("no")`` is True: a flag given as a string would silently mean the opposite."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r}.")
    return bool(value)


def is_real_number(value: Any) -> bool:
    """A Python or NumPy int or float scalar; not a bool (``True`` is an int in Python)."""
    return (not isinstance(value, (bool, np.bool_))
            and isinstance(value, (int, float, np.integer, np.floating)))


def check_positive_real(name: str, value: Any) -> float:
    """Return a scalar ``value`` as float, or raise ValueError unless it is real, finite and > 0."""
    if not (is_real_number(value) and np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a real number, finite and > 0; got {value!r}.")
    return float(value)


MAX_SEED = 2**32 - 1  # numpy's legacy generators (mnist1d's) take seeds below 2**32


def check_seed(name: str, value: Any) -> int:
    """Return ``value`` as int; ValueError unless it is an integer in [0, MAX_SEED]
    (a float such as 1.7 is refused, not truncated)."""
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer))
            or not 0 <= value <= MAX_SEED):
        raise ValueError(f"{name} must be an integer in [0, {MAX_SEED}]; got {value!r}.")
    return int(value)


def check_real_in(name: str, value: Any, low: float, high: float = np.inf, *,
                  closed_high: bool = True, open_low: bool = False) -> float:
    """Return ``value`` as float; ValueError unless it is a finite real in [low, high]
    (or (low, …] / […, high) as asked)."""
    ok = (is_real_number(value) and np.isfinite(value)
          and (value > low if open_low else value >= low)
          and (value <= high if closed_high else value < high))
    if not ok:
        spelled = f"{'(' if open_low else '['}{low}, {high}{']' if closed_high else ')'}"
        raise ValueError(f"{name} must be a finite number in {spelled}; got {value!r}.")
    return float(value)


def check_step_bounds(step_min: Any, step_max: Any, dtype=np.float32) -> tuple[float, float]:
    """Return (step_min, step_max) as floats, or raise ValueError unless each is a real number
    that is finite and a normal number > 0 in ``dtype`` (where log Δ is computed and stored:
    1e-50 is 0 in float32 and 1e39 is inf, either gives a NaN log Δ), and step_min <= step_max.
    """
    info = np.finfo(dtype)
    for name, value in (("step_min", step_min), ("step_max", step_max)):
        real = is_real_number(value)
        with np.errstate(over="ignore", under="ignore"):
            cast = np.asarray(value, dtype) if real else None
        if not (real and np.isfinite(value) and value > 0 and np.isfinite(cast) and cast >= info.tiny):
            became = ""
            if real and np.isfinite(value) and value > 0:
                kind = ", subnormal" if 0 < cast < info.tiny else ""
                became = f" ({float(cast):.6g} in {info.dtype}{kind})"
            raise ValueError(
                f"{name} must be a real number > 0, finite and normal in {info.dtype} (from "
                f"{info.tiny:.3g} to {info.max:.3g}: log Δ is computed in {info.dtype}); "
                f"got {value!r}{became}."
            )
    if step_min > step_max:
        raise ValueError(f"step_min must be <= step_max; got step_min={step_min}, step_max={step_max}.")
    return float(step_min), float(step_max)


def check_batch_shape(name: str, batch_shape: Any) -> tuple[int, ...]:
    """A batch shape as a tuple: an integer n means (n,); every entry an integer >= 0."""
    shape = (batch_shape,) if isinstance(batch_shape, (int, np.integer)) and not isinstance(batch_shape, bool) else batch_shape
    try:
        entries = tuple(shape)
    except TypeError:
        entries = None
    if entries is None or not all(
        isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in entries
    ):
        raise ValueError(f"{name} must be an integer or a tuple of integers >= 0, e.g. () or (4,); got {batch_shape!r}.")
    return tuple(int(n) for n in entries)


FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
COMPLEX_DTYPES = ("complex64", "complex128")


def default_float_dtype() -> np.dtype:
    """float32, or float64 when ``jax_enable_x64`` is on: the dtype of ``jnp.asarray(1.0)``."""
    return np.dtype(jax.dtypes.canonicalize_dtype(np.float64))


def computation_dtypes(name: str, x: Any) -> tuple[np.dtype, np.dtype]:
    """The dtype policy of the layers: (dtype to compute in, dtype to return) for input ``x``.

    - float32, float64: computed and returned in that dtype (float64 needs ``jax_enable_x64``);
    - bfloat16, float16: computed in float32 (FFTs and long recurrences need it), returned
      in the input's dtype;
    - integers and bools: computed and returned in the default float dtype (never cast back
      to an integer, which would truncate the output);
    - complex or non-numeric: ValueError (the layers are real maps).

    Without ``jax_enable_x64``, float64 is float32 in JAX, so float64 input gives float32.
    """
    dtype = np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype
    if dtype.name in FLOAT_DTYPES:
        return float_computation_dtypes(dtype)
    if dtype == np.dtype(bool) or np.issubdtype(dtype, np.integer):
        return default_float_dtype(), default_float_dtype()
    raise ValueError(
        f"{name} must be real (float, integer or bool); got dtype {dtype}. "
        f"For complex data, pass the real and imaginary parts as separate channels."
    )


def float_computation_dtypes(dtype) -> tuple[np.dtype, np.dtype]:
    """(dtype to compute in, dtype to return) for a floating ``dtype``: float32 and float64
    as themselves (float64 is float32 without ``jax_enable_x64``); bfloat16 and float16 are
    computed in float32 and returned in their dtype."""
    dtype = np.dtype(dtype)
    if dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        dtype = np.dtype(jax.dtypes.canonicalize_dtype(dtype))
        return dtype, dtype
    if dtype in (np.dtype(jax.numpy.bfloat16), np.dtype(np.float16)):
        return np.dtype(np.float32), dtype
    raise ValueError(f"dtype must be float16, bfloat16, float32 or float64; got {dtype}.")


def check_float_dtype(name: str, dtype: Any, *, complex_allowed: bool = False) -> np.dtype:
    """Return ``dtype`` as a NumPy dtype; ValueError unless it is a floating dtype (or, with
    ``complex_allowed``, complex64/complex128). An integer or bool computation dtype would
    truncate parameters silently (A = -(1, 2, 3, 4) in int32 after exp and log)."""
    allowed = FLOAT_DTYPES + (COMPLEX_DTYPES if complex_allowed else ())
    try:
        resolved = None if dtype is None else np.dtype(jax.numpy.dtype(dtype))
    except TypeError:
        resolved = None
    if resolved is None or resolved.name not in allowed:
        got = f"dtype {resolved.name}" if resolved is not None else f"{dtype!r}, which is not a dtype"
        raise ValueError(f"{name} must be a floating dtype ({', '.join(allowed)}); got {got}.")
    return resolved


def check_finite_at(name: str, x: Any, axis_names: tuple[str, ...], *,
                    original: Any = None) -> None:
    """Raise ValueError naming the first non-finite entry of a concrete ``x`` by its position.

    ``axis_names`` names x's axes from the last one backwards, e.g. ("batch", "time",
    "channel") for (B, L, H); a 2-D x uses the last two. A jax.Array is reduced on its
    device (one bool comes back; the array is copied only to name a bad entry). Skipped
    for tracers (under jit, grad, vmap): their values do not exist yet.
    ``original``: the values before a cast to x's dtype, named in the message where the
    cast made a finite entry non-finite (1e39 is inf in float32).
    """
    if not is_concrete(x):
        return
    if isinstance(x, jax.Array) and _all_on_device(jax.numpy.isfinite, x):
        return
    values = np.asarray(x)
    finite = np.isfinite(values)
    if finite.all():
        return
    position = np.argwhere(~finite)[0]
    names = axis_names[len(axis_names) - values.ndim:]
    where = ", ".join(f"{n} {int(i)}" for n, i in zip(names, position))
    bad = values.size - int(np.count_nonzero(finite))
    got = values[tuple(position)]
    before = None if original is None else np.asarray(original)[tuple(position)]
    if before is not None and np.isfinite(before):
        got = f"{before} (which is {got} in {values.dtype}, the dtype it is computed in)"
    raise ValueError(
        f"{name} must be finite; got {got} at ({where}), the first of {bad} "
        f"non-finite entr{'y' if bad == 1 else 'ies'}. (A NaN or inf would spread through the "
        f"convolution to earlier time steps.)"
    )
