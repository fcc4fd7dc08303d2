"""Linear recurrences ``x_ℓ = a_ℓ ⊙ x_{ℓ-1} + b_ℓ`` (diagonal) and ``x_ℓ = Ā x_{ℓ-1} + B̄ u_ℓ``.

The sequential scan is the plain reference (``lax.scan``, one step after another); the
parallel scan (``lax.associative_scan``) computes the same states in O(log L) depth.
Time is the leading axis throughout, so the trailing axes are any batch of states.

:func:`selective_scan` is the selective SSM's recurrence with its readout, computed chunk
by chunk so that only one chunk of states exists at a time, in the forward pass and in
the backward pass.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["sequential_scan", "parallel_scan", "linear_recurrence", "ssm_recurrence", "binary_operator",
           "selective_scan", "selective_system", "SELECTIVE_SCAN_CHUNK_SIZE", "WITHIN_CHUNK"]


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


@functools.partial(jax.jit, static_argnames="reverse")
def parallel_scan(a, b, *, x0=None, reverse: bool = False):
    """The states of ``x_ℓ = a_ℓ ⊙ x_{ℓ-1} + b_ℓ`` by ``jax.lax.associative_scan``.

    Same arguments and result as :func:`sequential_scan`; O(L) work, O(log L) depth. Jitted:
    run eagerly, the scan's many small slicing operations would be dispatched one by one.
    """
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
    b = jnp.asarray(b)
    a = jnp.broadcast_to(a, b.shape)
    x = parallel_scan(jnp.moveaxis(a, axis, 0), jnp.moveaxis(b, axis, 0), reverse=reverse)
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


# --- the selective scan: states chunk by chunk, never all at once -----------------------------

# Steps per chunk. On the 2-core development CPU (B = 4, H = 64, N = 16, L = 1024 and 4096,
# benchmarks/bench_selective_scan.py) chunk sizes 16-256 were equally fast within the
# noise; the gradient's plan grows with one chunk of states (B·T·H·N numbers) above 64 and
# with the carried states (one (B, H, N) per chunk, B·L·H·N/T numbers) below it.
SELECTIVE_SCAN_CHUNK_SIZE = 64
WITHIN_CHUNK = ("sequential", "associative")


def selective_scan(u, step, A, B, C, *, chunk_size: int | None = SELECTIVE_SCAN_CHUNK_SIZE,
                   reverse: bool = False, within_chunk: str | None = None):
    """The readout ``y_ℓ = C_ℓ · x_ℓ`` of the selective recurrence (Mamba's S6, ZOH for A,
    Euler for B), without ever holding every state::

        x_ℓ = exp(Δ_ℓ A) ⊙ x_{ℓ-1} + (Δ_ℓ u_ℓ) B_ℓ      x (H, N) per sequence, x_{-1} = 0
        y_ℓ = Σ_n C_ℓn x_ℓ[:, n]                          (H,)

    The sequence is cut into chunks of ``chunk_size`` steps; ``lax.scan`` over the chunks
    carries the state (B, H, N); a chunk computes its decays, inputs and states from the
    carried state and reads them out at once, so only its y (B, T, H) and its last state
    leave it. The chunk is under ``jax.checkpoint``: the backward pass recomputes a chunk's
    states instead of storing them. Memory: O(B·L·(H + N) + B·(L/T)·H·N + B·T·H·N), against
    O(B·L·H·N) for the whole parallel scan.

    Args:
        u: (..., L, H) inputs.
        step: (..., L, H) Δ, the step of every channel at every position (> 0; a step of 0
            leaves the state unchanged).
        A: (H, N) the diagonal of A (negative real part for a stable recurrence).
        B, C: (..., L, N) the input and output vectors of every position.
        chunk_size: T, steps per chunk (an integer >= 1; T >= L is one chunk). None: no
            chunks, the states of all L steps by one parallel scan
            (:func:`linear_recurrence`), the O(B·L·H·N) reference.
        reverse: run backwards in time (``x_ℓ = exp(Δ_ℓ A) x_{ℓ+1} + Δ_ℓ u_ℓ B_ℓ``).
        within_chunk: how a chunk's states are computed: ``"sequential"`` (``lax.scan``,
            one step after another) or ``"associative"`` (``lax.associative_scan``, log-depth).
            None: sequential on a CPU, where it is about twice as fast (measured); associative
            elsewhere, where the steps of a chunk run in parallel (not measured here).

    Returns:
        y: (..., L, H), in the dtype of the inputs together.

    Raises:
        ValueError: naming the argument and its shape, unless u is (..., L, H), A (H, N),
            step u's shape and B, C (..., L, N), with L, H, N >= 1 (shapes only: under jit
            too, and no value is read).
    """
    shape = np.shape(u)
    if len(shape) < 2 or min(shape[-2:]) < 1:
        raise ValueError(f"u must have shape (..., L, H) with L, H >= 1; got shape {shape}.")
    if np.ndim(A) != 2 or np.shape(A)[0] != shape[-1] or np.shape(A)[1] < 1:
        raise ValueError(f"A must have shape (H, N) = ({shape[-1]}, N) with N >= 1 (H from u {shape}); "
                         f"got shape {np.shape(A)}.")
    N = np.shape(A)[1]
    for name, x, expected in (("step", step, shape), ("B", B, shape[:-1] + (N,)), ("C", C, shape[:-1] + (N,))):
        if np.shape(x) != expected:
            raise ValueError(f"{name} must have shape {expected} (from u {shape} and A {np.shape(A)}); "
                             f"got shape {np.shape(x)}.")
    dtype = jnp.result_type(u, step, A, B, C)
    u, step, A, B, C = (jnp.asarray(x, dtype) for x in (u, step, A, B, C))
    if chunk_size is None:  # every state at once: (..., L, H, N)
        states = linear_recurrence(*selective_system(step, A, B, u), axis=-3, reverse=reverse)
        return jnp.einsum("...ln,...lhn->...lh", C, states, precision=jax.lax.Precision.HIGHEST)
    if within_chunk is None:
        within_chunk = "sequential" if jax.default_backend() == "cpu" else "associative"
    *batch_shape, L, H = u.shape
    T = min(chunk_size, L)
    n_chunks = -(-L // T)

    def padded(x):
        """(..., L, ·) -> (batch, n_chunks·T, ·). The padding steps have Δ = 0: exp(0·A) = 1
        and 0·B = 0, so they pass the state through unchanged."""
        x = x.reshape(-1, L, x.shape[-1])
        return x if n_chunks * T == L else jnp.pad(x, ((0, 0), (0, n_chunks * T - L), (0, 0)))

    inputs = tuple(map(padded, (u, step, B, C)))
    one_chunk = _sequential_chunk if within_chunk == "sequential" else _associative_chunk

    @jax.checkpoint  # the backward pass recomputes the chunk's states from x and the inputs
    def chunk(x, index):
        # The chunk's steps, time-major (T, batch, ·), sliced here rather than passed as the
        # scan's xs: xs would be a transposed copy of every input.
        chunk_inputs = tuple(jnp.moveaxis(jax.lax.dynamic_slice_in_dim(z, index * T, T, axis=1), 1, 0)
                             for z in inputs)
        return one_chunk(A, x, chunk_inputs, reverse=reverse)

    x0 = jnp.zeros((inputs[0].shape[0], H, A.shape[-1]), dtype)
    _, y = jax.lax.scan(chunk, x0, jnp.arange(n_chunks), reverse=reverse)  # y (n_chunks, T, batch, H)
    y = jnp.moveaxis(y.reshape(n_chunks * T, -1, H)[:L], 0, 1)  # (batch, L, H)
    return y.reshape(*batch_shape, L, H)


def selective_system(step, A, B, u):
    """The decays exp(Δ A) and inputs Δ u B, (..., H, N), of steps Δ, u (..., H), B (..., N)."""
    return jnp.exp(step[..., None] * A), (step * u)[..., None] * B[..., None, :]


def _sequential_chunk(A, x, inputs, *, reverse: bool):
    """One chunk, step by step: state x (batch, H, N) and inputs (T, batch, ·) time-major ->
    (the state after the chunk, y (T, batch, H)). Each state is read out as it is made."""
    def one_step(x, inputs_t):
        u_t, step_t, B_t, C_t = inputs_t
        decay, drive = selective_system(step_t, A, B_t, u_t)
        x = decay * x + drive
        return x, jnp.einsum("bn,bhn->bh", C_t, x, precision=jax.lax.Precision.HIGHEST)

    return jax.lax.scan(one_step, x, inputs, reverse=reverse)


def _associative_chunk(A, x, inputs, *, reverse: bool):
    """One chunk by the parallel scan: the chunk's T states exist at once, (T, batch, H, N)."""
    u_c, step_c, B_c, C_c = inputs
    decay, drive = selective_system(step_c, A, B_c, u_c)
    first, last = (-1, 0) if reverse else (0, -1)  # first: the step that meets the carried state
    drive = drive.at[first].add(decay[first] * x)
    _, states = jax.lax.associative_scan(binary_operator, (decay, drive), reverse=reverse, axis=0)
    y = jnp.einsum("tbn,tbhn->tbh", C_c, states, precision=jax.lax.Precision.HIGHEST)
    return states[last], y
