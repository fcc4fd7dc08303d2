"""The checks at the package's doors (the layers' public methods, the models, data loading,
configs and training): every message names the argument, what it got, and what is allowed,
so a user never meets a silent NaN or a traceback from deep in JAX. The numerics modules
check nothing: they trust their callers.

One generic rule, :func:`check` (``name must <allowed>; got <value>.``), and a few checks
built on it for the kinds of argument the package takes: integers (a bool, a float or an
integer beyond int32 is refused, never coerced), real numbers, flags, choices, dtypes,
arrays that must be finite (the first bad entry named by its position), integer arrays
(lengths, labels) and pytrees (a layer's state and system).

Value checks (finiteness, ranges of arrays) run only on concrete arrays; under ``jit`` the
values are tracers and only shapes and dtypes can be checked.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable

import jax
import jax.numpy as jnp
import numpy as np

INT32_MAX = 2**31 - 1  # lengths, sizes and counts: what the computation's int32 holds
MAX_SEED = 2**32 - 1  # numpy's legacy generators (mnist1d's) take seeds below 2**32
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
COMPLEX_DTYPES = ("complex64", "complex128")


def check(name: str, value: Any, ok: bool, allowed: str, got: str | None = None) -> Any:
    """Return ``value`` if ``ok``; else ValueError "``name`` must ``allowed``; got ``got``."
    (``got`` defaults to the value's repr)."""
    if not ok:
        raise ValueError(f"{name} must {allowed}; got {repr(value) if got is None else got}.")
    return value


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds values we can look at (not a tracer inside jit/grad/vmap)."""
    return not isinstance(x, jax.core.Tracer)


def is_integer(value: Any) -> bool:
    """A Python or NumPy integer; not a bool (``True`` is an int in Python)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real_number(value: Any) -> bool:
    """A Python or NumPy int or float scalar; not a bool."""
    return is_integer(value) or isinstance(value, (float, np.floating))


def check_positive_int(name: str, value: Any, minimum: int = 1, maximum: int = INT32_MAX) -> int:
    """``value`` as an int; ValueError unless it is an integer in [minimum, maximum]
    (2.5, True and "3" are refused, not converted; the default maximum is int32's)."""
    bounded = maximum != INT32_MAX or is_integer(value) and value > maximum  # (say the maximum)
    allowed = f"be an integer in [{minimum}, {maximum}]" if bounded else f"be an integer >= {minimum}"
    return int(check(name, value, is_integer(value) and minimum <= value <= maximum, allowed))


#: ``check_seed(name, value)``: ``value`` as an int; ValueError unless it is an integer in
#: [0, MAX_SEED] (a float such as 1.7 is refused, not truncated).
check_seed = functools.partial(check_positive_int, minimum=0, maximum=MAX_SEED)


def check_real_in(name: str, value: Any, low: float, high: float = np.inf, *,
                  closed_high: bool = True, open_low: bool = False) -> float:
    """``value`` as a float; ValueError unless it is a finite real number in [low, high]
    (or (low, …] / […, high) as asked)."""
    ok = (is_real_number(value) and np.isfinite(value)
          and (value > low if open_low else value >= low)
          and (value <= high if closed_high else value < high))
    spelled = f"{'(' if open_low else '['}{low}, {high}{']' if closed_high else ')'}"
    return float(check(name, value, ok, f"be a finite number in {spelled}"))


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a bool; ValueError unless it is True or False (``bool("no")`` is True: a
    flag given as a string would silently mean the opposite)."""
    return bool(check(name, value, isinstance(value, (bool, np.bool_)), "be True or False"))


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if not (isinstance(value, str) and value in choices):
        raise ValueError(f"unknown {name} {value!r}; choose one of: {', '.join(map(repr, choices))}.")
    return value


def check_step_bounds(step_min: Any, step_max: Any, dtype=np.float32) -> tuple[float, float]:
    """(step_min, step_max) as floats; ValueError unless each is a real number that is finite
    and a normal number > 0 in ``dtype`` (where log Δ is computed and stored: 1e-50 is 0 in
    float32 and 1e39 is inf, either gives a NaN log Δ), and step_min <= step_max."""
    info = np.finfo(dtype)
    for name, value in (("step_min", step_min), ("step_max", step_max)):
        real = is_real_number(value) and np.isfinite(value) and value > 0
        with np.errstate(over="ignore", under="ignore"):
            cast = np.asarray(value if real else np.nan, dtype)
        kind = ", subnormal" if 0 < cast < info.tiny else ""
        became = f" ({float(cast):.6g} in {info.dtype}{kind})" if real else ""
        check(name, value, cast >= info.tiny and np.isfinite(cast), f"be a real number > 0, "
              f"finite and normal in {info.dtype} (from {info.tiny:.3g} to {info.max:.3g}: log Δ "
              f"is computed in {info.dtype})", f"{value!r}{became}")
    check("step_min", step_min, step_min <= step_max, "be <= step_max",
          f"step_min={step_min}, step_max={step_max}")
    return float(step_min), float(step_max)


def check_batch_shape(name: str, batch_shape: Any) -> tuple[int, ...]:
    """A batch shape as a tuple: an integer n means (n,); every entry an integer >= 0."""
    shape = (batch_shape,) if is_integer(batch_shape) else batch_shape
    ok = isinstance(shape, (tuple, list)) and all(is_integer(n) and 0 <= n <= INT32_MAX
                                                  for n in shape)
    check(name, batch_shape, ok, "be an integer or a tuple of integers >= 0, e.g. () or (4,)")
    return tuple(int(n) for n in shape)


def check_rngs(rngs: Any) -> None:
    """TypeError unless ``rngs`` is an ``nnx.Rngs`` (else: "'int' object has no attribute
    'params'" from deep inside a constructor)."""
    from flax import nnx

    if not isinstance(rngs, nnx.Rngs):
        raise TypeError(f"rngs must be an nnx.Rngs, e.g. rngs=nnx.Rngs(0); got {rngs!r} "
                        f"({type(rngs).__name__}).")


def check_shape(name: str, x: Any, channels: int, ndims: tuple[int, ...] | None = (2, 3), *,
                time: bool = True, owner: str = "d_model") -> tuple[int, ...]:
    """``x``'s shape; ValueError unless it is (batch, length, channels) or (length, channels)
    with length >= 1 (``ndims`` (2, 3)), (..., length, channels) (``ndims`` None) or, without
    ``time``, (..., channels)."""
    shape, axes = np.shape(x), ("length", channels) if time else (channels,)
    spelled = (f"(..., {', '.join(map(str, axes))})" if ndims is None else
               f"{' or '.join(map(str, ndims))} dimensions, (batch, length, {channels}) or "
               f"(length, {channels})")
    ok = (len(shape) >= len(axes) and shape[-1] == channels and (not time or shape[-2] >= 1)
          and (ndims is None or len(shape) in ndims))
    check(name, x, ok, f"have shape {spelled}{' with length >= 1' * time}: {channels} channels "
          f"(the {owner})", f"shape {shape}")
    return shape


def dtype_of(x: Any) -> np.dtype:
    return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


def computation_dtypes(name: str, x: Any, *, kinds: str = "biuf") -> tuple[np.dtype, np.dtype]:
    """The dtype policy: (dtype to compute in, dtype to return) for an array ``x``
    (``kinds`` "biuf") or a ``dtype=`` argument (``kinds`` "f", or "fc"; None: the default).

    - float32, float64: computed and returned in that dtype (float64 needs
      ``jax_enable_x64``; without it float64 is float32 in JAX);
    - bfloat16, float16: computed in float32 (FFTs and long recurrences need it), returned
      in their dtype;
    - integers and bools (arrays only): computed and returned in the default float dtype
      (never cast back to an integer, which would truncate the output);
    - complex64/complex128 (with "c"): computed in their real part's dtype;
    - anything else: ValueError (the layers are real maps).
    """
    if x is None and "b" not in kinds:
        dtype = default_float_dtype()
    else:
        try:
            dtype = dtype_of(x) if "b" in kinds else np.dtype(jnp.dtype(x))
        except TypeError:
            dtype = None
    kind = None if dtype is None else "f" if dtype.name in FLOAT_DTYPES else (
        "c" if dtype.name in COMPLEX_DTYPES else dtype.kind)
    allowed = {"b": "bool", "i": "integer", "f": ", ".join(FLOAT_DTYPES), "c": ", ".join(COMPLEX_DTYPES)}
    spelled = ", ".join(dict.fromkeys(allowed[k] for k in kinds.replace("u", "i")))
    allowed = f"have a real dtype ({spelled})" if "b" in kinds else f"be one of {spelled}"
    check(name, x, kind is not None and kind in kinds, allowed,
          f"dtype {dtype}" if dtype is not None else f"{x!r}, which is not a dtype")
    if kind in "biu":
        return default_float_dtype(), default_float_dtype()
    if kind == "c":
        dtype = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
    if dtype.name in ("float16", "bfloat16"):
        return np.dtype(np.float32), dtype
    dtype = np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    return dtype, dtype


def default_float_dtype() -> np.dtype:
    """float32, or float64 when ``jax_enable_x64`` is on: the dtype of ``jnp.asarray(1.0)``."""
    return np.dtype(jax.dtypes.canonicalize_dtype(np.float64))


def _all_on_device(predicate, x) -> bool:
    """``predicate(x).all()`` for a concrete jax.Array, reduced where x lives: one bool comes
    back to the host, not the array (eagerly, even inside a trace)."""
    with jax.ensure_compile_time_eval():
        return bool(predicate(x).all())


def check_finite(name: str, x: Any, dtype, axes: tuple[str, ...] = (), *, positive: bool = False):
    """``x`` cast to ``dtype`` after checking that each entry is finite (and > 0 with
    ``positive``) *in that dtype* (1e39 is inf in float32, 1e-50 is 0): ValueError naming the
    first entry that is not, by its index (and ``axes``' names, from the last axis backwards),
    with its value before the cast. A jax.Array is cast and reduced on its device (one bool
    comes back); host input (NumPy, Python) is cast and checked on the host and returned as
    NumPy. Tracers (under jit, grad, vmap) are cast unchecked: their values do not exist yet.
    """
    source, complex_ok = dtype_of(x), np.dtype(dtype).kind == "c"
    real = source.kind in "biuf" or source.name in FLOAT_DTYPES or (complex_ok and source.kind == "c")
    check(name, x, real, "hold real numbers", f"dtype {source}")

    def good(v, xp=np):
        return xp.isfinite(v) & (v > 0) if positive else xp.isfinite(v)

    if isinstance(x, jax.Array):
        cast = x.astype(dtype)
        if not is_concrete(cast) or _all_on_device(lambda v: good(v, jnp), cast):
            return cast
    else:
        with np.errstate(all="ignore"):
            cast = np.asarray(x).astype(dtype, copy=False)
    values = np.asarray(cast)
    bad = ~good(values)
    if not bad.any():
        return cast
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    before, after = np.asarray(x)[index], values[index]
    was_good = good(np.asarray(before).astype(np.complex128 if complex_ok else np.float64))
    got = (f"{before} (which is {after} in {values.dtype}, the dtype it is computed in)"
           if was_good else f"{before}")
    named = ", ".join(f"{a} {i}" for a, i in zip(axes[len(axes) - len(index):], index))
    where = (f" at ({named}), index {index}" if named else f" at index {index}") if index else ""
    kind = "non-finite or <= 0" if positive else "non-finite"
    check(name, x, False, f"be finite{' and > 0' if positive else ''} in {values.dtype}",
          f"{got}{where} ({int(bad.sum())} {kind} in all)")


def check_integers(name: str, values: Any, shape: tuple[int, ...], what: str, low: int, high: int,
                   spelled: str | None = None) -> Any:
    """``values``, after checking that they have ``shape`` and an integer dtype and, where
    concrete, lie in [low, high] (``spelled``: that range in words): ValueError naming the
    first that does not, by its index. ``what``: what they are (lengths, class labels)."""
    check(name, values, np.shape(values) == tuple(shape), f"have shape {tuple(shape)}, one per "
          "sequence", f"shape {np.shape(values)}")
    check(name, values, jnp.issubdtype(dtype_of(values), jnp.integer), f"hold integer {what}",
          f"dtype {dtype_of(values)}")
    host = np.asarray(values) if is_concrete(values) else np.full(shape, low)  # (tracers: unseen)
    bad = np.argwhere((host < low) | (host > high))
    first = tuple(int(i) for i in bad[0]) if len(bad) else ()
    at = f" at index {first[0] if len(first) == 1 else first}" if first else ""
    check(name, values, not len(bad), f"hold {what} in {spelled or f'[{low}, {high}]'}",
          f"{host[first] if len(bad) else ''}{at}, the first of {len(bad)} out of range")
    return values


def check_tree(name: str, tree: Any, expected: Any, made_by: str, *, dtypes: bool = False,
               batch: tuple[int, ...] = (), structure_error: type = ValueError) -> None:
    """ValueError unless ``tree`` has the structure and shapes of ``expected`` (a pytree of
    ``jax.ShapeDtypeStruct`` made for the batch shape ``batch``) and, with ``dtypes``, leaves
    of the same kinds (float, complex, integer; another precision passes); a tree of the
    right structure for another batch shape is named by that batch shape.
    ``structure_error``: TypeError for another kind of object than the expected one."""
    leaves, want = jax.tree.leaves(tree), jax.tree.leaves(expected)
    same = jax.tree.structure(tree) == jax.tree.structure(expected) and all(
        hasattr(x, "shape") for x in leaves)
    if not same and structure_error is TypeError:
        raise TypeError(f"{name} must be {made_by}; got {type(tree).__name__} {_abbreviated(tree)}.")
    shapes = [np.shape(x) for x in leaves]
    n = len(shapes[0]) - len(want[0].shape) + len(batch) if same else -1
    got = (f"a {type(tree).__name__} of another structure ({_abbreviated(tree)})" if not same
           else f"one for batch shape {shapes[0][:n]}" if shapes != [e.shape for e in want] and n >= 0
           else f"shapes {shapes}" if shapes != [e.shape for e in want]
           else f"dtypes {[str(dtype_of(x)) for x in leaves]}")
    kinds_match = not dtypes or [dtype_of(x).kind for x in leaves] == [e.dtype.kind for e in want]
    check(name, tree, same and shapes == [e.shape for e in want] and kinds_match,
          f"be {made_by}, with shapes {[e.shape for e in want]}", got)


def _abbreviated(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
