"""Linear recurrences ``x_ℓ = a_ℓ ⊙ x_{ℓ-1} + b_ℓ`` (diagonal) and ``x_ℓ = Ā x_{ℓ-1} + B̄ u_ℓ``.

The sequential scan is the plain reference (``lax.scan``, one step after another); the
parallel scan (``lax.associative_scan``) computes the same states in O(log L) depth.
Time is the leading axis throughout, so the trailing axes are any batch of states.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ._validation import check_broadcast, check_finite

__all__ = ["sequential_scan", "parallel_scan", "linear_recurrence", "ssm_recurrence", "binary_operator"]


def _check_recurrence(a, b):
    if np.ndim(b) < 1:
        raise ValueError(f"b must have a leading time axis, shape (L, ...); got shape {np.shape(b)}.")
    _check_broadcasts_to_b(a, b)


def _check_broadcasts_to_b(a, b):
    message = f"a must broadcast to the shape of b {np.shape(b)}; got a {np.shape(a)}."
    if check_broadcast(message, np.shape(a), np.shape(b)) != np.shape(b):
        raise ValueError(message)


def sequential_scan(a, b, *, x0=None, reverse: bool = False):
    """States of the diagonal recurrence ``x_ℓ = a_ℓ ⊙ x_{ℓ-1} + b_ℓ``, one step at a time.

    Args:
        a: (L, ...) or broadcastable to b (a time-invariant ``a`` may omit the time axis).
        b: (L, ...).
        x0: initial state broadcastable to b.shape[1:]; zeros if None.
        reverse: run from ℓ = L-1 down to 0 (x_ℓ = a_ℓ x_{ℓ+1} + b_ℓ).

    Returns:
        (L, ...) states x_0 … x_{L-1}.
    """
    _check_recurrence(a, b)
    return _sequential_scan(a, b, x0=x0, reverse=reverse)


def _sequential_scan(a, b, *, x0=None, reverse: bool = False):
    """The algorithm of :func:`sequential_scan` (its arguments checked there): ``lax.scan``."""
    b = jnp.asarray(b)
    a = jnp.broadcast_to(jnp.asarray(a), b.shape).astype(jnp.result_type(a, b))
    x = jnp.zeros(b.shape[1:], a.dtype) if x0 is None else jnp.broadcast_to(jnp.asarray(x0, a.dtype), b.shape[1:])

    def step(x, ab):
        a_l, b_l = ab
        x = a_l * x + b_l
        return x, x

    _, xs = jax.lax.scan(step, x, (a, b.astype(a.dtype)), reverse=reverse)
    return xs


def binary_operator(left, right):
    """The associative operator of a diagonal linear recurrence.

    An element ``(a, b)`` is the affine map ``x ↦ a x + b``; composing "first left, then
    right" gives ``(a_r a_l, a_r b_l + b_r)``. Associativity of composition is what lets the
    states be computed by a parallel prefix scan.
    """
    a_l, b_l = left
    a_r, b_r = right
    return a_r * a_l, a_r * b_l + b_r


def parallel_scan(a, b, *, x0=None, reverse: bool = False):
    """The states of ``x_ℓ = a_ℓ ⊙ x_{ℓ-1} + b_ℓ`` by ``jax.lax.associative_scan``.

    Same arguments and result as :func:`sequential_scan`; O(L) work, O(log L) depth. Only
    shapes are checked (values are never read: a and b may be large device arrays).
    """
    _check_recurrence(a, b)
    return _parallel_scan(a, b, x0=x0, reverse=reverse)


@functools.partial(jax.jit, static_argnames="reverse")
def _parallel_scan(a, b, *, x0=None, reverse: bool = False):
    """The algorithm of :func:`parallel_scan` (its arguments checked there). Jitted here:
    run eagerly, the scan's many small slicing operations would be dispatched one by one."""
    b = jnp.asarray(b)
    a = jnp.broadcast_to(jnp.asarray(a), b.shape).astype(jnp.result_type(a, b))
    b = b.astype(a.dtype)
    if x0 is not None:
        # Fold the initial state into the first input: x_0 = a_0 x0 + b_0.
        first = -1 if reverse else 0
        b = b.at[first].add(a[first] * jnp.asarray(x0, a.dtype))
    _, xs = jax.lax.associative_scan(binary_operator, (a, b), reverse=reverse, axis=0)
    return xs


def linear_recurrence(a, b, *, axis: int = 0, reverse: bool = False):
    """The states of ``x_ℓ = a_ℓ ⊙ x_{ℓ-1} + b_ℓ`` along ``axis`` of b, by the parallel scan.

    The time-varying diagonal recurrence of S5 (its Λ̄ changes with each observation's time
    step) and of a selective SSM (Λ̄, B̄ depend on the input). ``a`` broadcasts against b,
    so a time-invariant a may omit the time axis (keep it as size 1). x starts at zero;
    ``reverse`` runs backwards in time, ``x_ℓ = a_ℓ x_{ℓ+1} + b_ℓ``.

    Args:
        a: broadcastable to b.
        b: (..., L, ...) with time on ``axis``.

    Returns:
        The states, b's shape and the dtype of a and b together.
    """
    if np.ndim(b) < 1 or not -np.ndim(b) <= axis < np.ndim(b):
        raise ValueError(f"axis must name an axis of b (the time axis); got axis {axis} for b of "
                         f"shape {np.shape(b)}.")
    _check_broadcasts_to_b(a, b)
    return _linear_recurrence(a, b, axis=axis, reverse=reverse)


def _linear_recurrence(a, b, *, axis: int, reverse: bool = False):
    """The algorithm of :func:`linear_recurrence` (its arguments checked there)."""
    b = jnp.asarray(b)
    a = jnp.broadcast_to(a, b.shape)
    x = _parallel_scan(jnp.moveaxis(a, axis, 0), jnp.moveaxis(b, axis, 0), reverse=reverse)
    return jnp.moveaxis(x, 0, axis)


def ssm_recurrence(A_bar, B_bar, C, u, D=0.0, *, x0=None):
    """Run a single discrete SSM step by step:
    ``x_ℓ = Ā x_{ℓ-1} + B̄ u_ℓ``, ``y_ℓ = C x_ℓ + D u_ℓ``.

    Args:
        A_bar: dense (N, N) or diagonal (N,).
        B_bar: (N,) for a scalar input, or (N, M) for an M-dimensional input.
        C: (N,) for a scalar output, or (P, N).
        u: (L,) or (L, M).
        D: scalar, or (P, M).
        x0: (N,) initial state; zeros if None.

    Returns:
        states: (L, N); y: (L,) or (L, P). y is real when every input is real.
    """
    A_bar, B_bar, C, u = (jnp.asarray(x) for x in (A_bar, B_bar, C, u))
    _check_ssm_recurrence(A_bar, B_bar, C, u)
    return _ssm_recurrence(A_bar, B_bar, C, u, D, x0=x0)


def _check_ssm_recurrence(A_bar, B_bar, C, u):
    if B_bar.ndim not in (1, 2):
        raise ValueError(f"B_bar must have shape (N,) or (N, M); got {B_bar.shape}.")
    N = B_bar.shape[0]
    if A_bar.shape not in ((N, N), (N,)):
        raise ValueError(f"A_bar must have shape ({N}, {N}) or ({N},) to match B_bar "
                         f"{B_bar.shape}; got {A_bar.shape}.")
    if C.shape[-1] != N:
        raise ValueError(f"C must have shape (N,) or (P, N) with N = {N}; got {C.shape}.")
    if u.ndim != B_bar.ndim or (u.ndim == 2 and u.shape[1] != B_bar.shape[1]):
        raise ValueError(f"u must have shape (L,) for B_bar (N,) or (L, M) for B_bar (N, M); "
                         f"got u {u.shape}, B_bar {B_bar.shape}.")
    check_finite("u", u)


def _ssm_recurrence(A_bar, B_bar, C, u, D=0.0, *, x0=None):
    """The algorithm of :func:`ssm_recurrence` (its arguments checked there)."""
    dense = A_bar.ndim == 2
    dtype = jnp.result_type(A_bar, B_bar, C, u)
    x = jnp.zeros(B_bar.shape[0], dtype) if x0 is None else jnp.asarray(x0, dtype)

    product = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)

    def step(x, u_l):
        x = ((product(A_bar, x) if dense else A_bar * x)
             + (product(B_bar, u_l) if B_bar.ndim == 2 else B_bar * u_l))
        y = product(C, x) + (product(D, u_l) if jnp.ndim(D) == 2 else D * u_l)
        return x, (x, y)

    _, (states, y) = jax.lax.scan(step, x, u.astype(dtype))
    return states, y
