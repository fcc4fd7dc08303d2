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

__all__ = ["sequential_scan", "parallel_scan", "linear_recurrence", "chunked_recurrence", "CHUNK_SIZE",
           "ssm_recurrence", "binary_operator",
           "selective_scan", "selective_system", "SELECTIVE_SCAN_CHUNK_SIZE", "WITHIN_CHUNK",
           "ssd_step", "ssd_recurrence", "segment_sum", "ssd_quadratic", "ssd_scan", "SSD_CHUNK_SIZE",
           "SSD_CHUNKS_PER_GROUP"]


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


def linear_recurrence(a, b, *, axis: int = 0, reverse: bool = False, initial_state=None):
    """The states of ``x_ℓ = a_ℓ ⊙ x_{ℓ-1} + b_ℓ`` along ``axis`` of b, by the parallel scan.

    The time-varying diagonal recurrence of S5 (its Λ̄ changes with each observation's time
    step) and of a selective SSM (Λ̄, B̄ depend on the input). ``a`` broadcasts against b,
    so a time-invariant a may omit the time axis (keep it as size 1). x starts at
    ``initial_state`` (zeros if None); ``reverse`` runs backwards in time,
    ``x_ℓ = a_ℓ x_{ℓ+1} + b_ℓ``. The final state is the last of the states (the first with
    ``reverse``): carried as the next piece's ``initial_state``, a long sequence runs in pieces.

    Args:
        a: broadcastable to b.
        b: (..., L, ...) with time on ``axis``.
        initial_state: x_{-1} (x_L with ``reverse``), broadcastable to b's shape without its
            time axis; None: zeros.

    Returns:
        The states, b's shape and the dtype of a and b together.
    """
    b = jnp.asarray(b)
    a = jnp.broadcast_to(a, b.shape)
    if initial_state is not None:
        initial_state = jnp.broadcast_to(initial_state, tuple(np.delete(b.shape, axis % b.ndim)))
    x = parallel_scan(jnp.moveaxis(a, axis, 0), jnp.moveaxis(b, axis, 0), x0=initial_state, reverse=reverse)
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
                   reverse: bool = False, within_chunk: str | None = None, initial_state=None,
                   return_state: bool = False):
    """The readout ``y_ℓ = C_ℓ · x_ℓ`` of the selective recurrence (Mamba's S6, ZOH for A,
    Euler for B), without ever holding every state::

        x_ℓ = exp(Δ_ℓ A) ⊙ x_{ℓ-1} + (Δ_ℓ u_ℓ) B_ℓ      x (H, N) per sequence, x_{-1} given or 0
        y_ℓ = Σ_n C_ℓn x_ℓ[:, n]                          (H,)

    The sequence is cut into chunks of ``chunk_size`` steps; ``lax.scan`` over the chunks
    carries the state (B, H, N); a chunk computes its decays, inputs and states from the
    carried state and reads them out as they are made, so only its y (B, T, H) and its last
    state leave it (the chunked engine below). The gradient is written by hand: the adjoint
    recurrence run backwards over the same chunks, each recomputing its states from the
    state that entered it (the only states kept), then pulling the cotangents of exp(ΔA) and
    ΔuB back to Δ, A, B, u in the same pass. Memory: O(B·L·(H + N) + B·(L/T)·H·N + B·T·H·N),
    against O(B·L·H·N) for the whole parallel scan.

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
        initial_state: (..., H, N) the state before the first step (after the last one with
            ``reverse``); None: zeros.
        return_state: also return the final state (x_{L-1}; x_0 with ``reverse``), the
            ``initial_state`` of the sequence's next piece.

    Returns:
        y: (..., L, H), in the dtype of the inputs together; with ``return_state``,
        ``(y, final_state)``, final_state (..., H, N).

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
    state_shape = shape[:-2] + (shape[-1], N)
    if initial_state is not None and np.shape(initial_state) != state_shape:
        raise ValueError(f"initial_state must have shape {state_shape} (u's batch shape, H, N); got "
                         f"shape {np.shape(initial_state)}.")
    given = () if initial_state is None else (initial_state,)
    dtype = jnp.result_type(u, step, A, B, C, *given)
    u, step, A, B, C, *given = (jnp.asarray(x, dtype) for x in (u, step, A, B, C, *given))
    if chunk_size is None:  # every state at once: (..., L, H, N)
        states = linear_recurrence(*selective_system(step, A, B, u), axis=-3, reverse=reverse,
                                   initial_state=given[0] if given else None)
        y = jnp.einsum("...ln,...lhn->...lh", C, states, precision=jax.lax.Precision.HIGHEST)
        return (y, states[..., 0 if reverse else -1, :, :]) if return_state else y
    if within_chunk is None:
        within_chunk = "sequential" if jax.default_backend() == "cpu" else "associative"
    *batch_shape, L, H = u.shape
    inputs = tuple(x.reshape(-1, L, x.shape[-1]) for x in (u, step, B, C))  # (batch, L, ·)
    # The engine's state is (batch, N, H), each state transposed: a step's readout C · h then
    # sums N rows of H numbers (not H rows of N, a reduction along the contiguous axis that
    # the CPU does one short row at a time), measured 2-3× faster for the forward pass.
    x0 = (jnp.swapaxes(given[0].reshape(-1, H, N), -1, -2) if given
          else jnp.zeros((inputs[0].shape[0], N, H), dtype))
    y, final = _engine(_selective_chunk_system, _selective_readout, min(chunk_size, L), reverse, within_chunk,
                       A.T, inputs, x0)
    y = y.reshape(*batch_shape, L, H)
    return (y, jnp.swapaxes(final, -1, -2).reshape(state_shape)) if return_state else y


def selective_system(step, A, B, u):
    """The decays exp(Δ A) and inputs Δ u B, (..., H, N), of steps Δ, u (..., H), B (..., N)."""
    return jnp.exp(step[..., None] * A), (step * u)[..., None] * B[..., None, :]


def _selective_chunk_system(A_T, inputs):
    """a, b (..., N, H), the transposed decays exp(Δ A)ᵀ and inputs (Δ u B)ᵀ, of A_T = Aᵀ
    (N, H) and S6 inputs u, Δ (..., H), B, C (..., N): a chunk's or one step's."""
    u, step, B, _ = inputs
    return jnp.exp(step[..., None, :] * A_T), B[..., :, None] * (step * u)[..., None, :]


def _selective_readout(A_T, inputs, states):
    """y = C · h, (..., H), of transposed states (..., N, H): a chunk's (T, batch, ·) or one step's."""
    return jnp.einsum("...n,...nh->...h", inputs[3], states, precision=jax.lax.Precision.HIGHEST)


# --- the chunked engine: one chunk of states at a time, forwards and backwards --------------
#
# A recurrence h_t = a_t ⊙ h_{t-1} + b_t whose a, b are made chunk by chunk from compact
# inputs by a `system` (S6's exp(Δ A) and Δ u B are B·L·H·N numbers each, its inputs
# B·L·(2H + 2N)) and whose states are read out as they are made by a `readout` (S6's
# y = C·h). Only the state entering each chunk is kept for the backward pass, which runs the
# adjoint recurrence backwards in time, chunk by chunk:
#
#     g_t = ∂L/∂h_t (through the readout of step t)  +  a_{t+1} ⊙ g_{t+1}
#     ∂L/∂a_t = g_t ⊙ h_{t-1},     ∂L/∂b_t = g_t,     ∂L/∂h_{-1} = a_0 ⊙ g_0
#
# (products, not conjugates, for complex numbers too: JAX's cotangents transpose a linear
# map, they do not take its adjoint). A chunk recomputes its T states from the state
# entering it, runs the adjoint over them and pulls ∂L/∂a, ∂L/∂b back to the inputs through
# its own `system`: the backward pass holds one chunk of states, never all of them.
#
# Within a chunk, two methods. "sequential": one step after another, each step making its
# own a_t, b_t and reading its state out, so that nothing of size T·(state) exists but the
# states the backward pass recomputes (on a CPU, where the loop costs little, the fastest
# and smallest). "associative": the chunk's a, b made at once and its states (and adjoints)
# by ``lax.associative_scan``, log-depth (for a GPU, where the T steps run in parallel).
#
# The engine's layout: xs leaves (batch, L, ...) (a chunk is a slice along axis 1, handed to
# system and readout time-major, (T, batch, ...), or one step (batch, ...)), the state
# (batch, ...), ys (batch, L, ...). system(params, xs) -> (a, b), a broadcastable to b;
# readout(params, xs, h) -> y; both work on a chunk or on one step alike.


def _chunk_states(a, b, h, *, reverse: bool, method: str):
    """The T states of h_t = a_t h_{t-1} + b_t, (T, ...), from the state h entering the chunk
    (h_{-1}; h_T with ``reverse``), step by step or by the associative scan."""
    a = jnp.broadcast_to(a, b.shape)
    if method == "associative":
        first = -1 if reverse else 0
        b = b.at[first].add(a[first] * h)  # fold the entering state into the first step
        return jax.lax.associative_scan(binary_operator, (a, b), reverse=reverse, axis=0)[1]

    def step(h, ab):
        h = ab[0] * h + ab[1]
        return h, h

    return jax.lax.scan(step, h, (a, b), reverse=reverse)[1]


def _shifted(x, edge, *, later: bool):
    """x (T, ...) moved one step in time, ``edge`` filling the gap: ``later`` puts x_{t+1}
    at t (edge at T-1), otherwise x_{t-1} (edge at 0)."""
    edge = jnp.broadcast_to(edge, x.shape[1:])[None]
    return jnp.concatenate([x[1:], edge]) if later else jnp.concatenate([edge, x[:-1]])


def _sum_to_shape(x, shape):
    """x summed over the axes that broadcasting added or stretched to get from ``shape``."""
    x = jnp.sum(x, axis=tuple(range(x.ndim - len(shape))))
    return jnp.sum(x, axis=tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1), keepdims=True)


def _padded(tree, T: int):
    """Every leaf (batch, L, ...) zero-padded along time to a whole number of chunks."""
    def pad(x):
        extra = -x.shape[1] % T
        return jnp.pad(x, [(0, 0), (0, extra)] + [(0, 0)] * (x.ndim - 2)) if extra else x
    return jax.tree.map(pad, tree)


def _read_chunk(tree, start, T: int):
    """The T steps from ``start`` of every leaf (batch, L, ...), time-major (T, batch, ...)."""
    return jax.tree.map(lambda x: jnp.moveaxis(jax.lax.dynamic_slice_in_dim(x, start, T, axis=1), 1, 0), tree)


def _write_chunk(tree, chunk, start):
    """Every leaf (batch, L, ...) with the time-major chunk (T, batch, ...) written at
    ``start`` (in place: the buffers are a loop's carry)."""
    return jax.tree.map(lambda x, c: jax.lax.dynamic_update_slice_in_dim(x, jnp.moveaxis(c, 0, 1), start, axis=1),
                        tree, chunk)


def _masked_system(system, params, xs, positions, length: int, padded: bool):
    """(a, b) of the steps at ``positions`` (a scalar for one step, (T,) for a chunk); the
    padding past ``length`` gets a = 1, b = 0, so the state passes it unchanged."""
    a, b = system(params, xs)
    if not padded:
        return a, b
    valid = (positions < length).reshape(jnp.shape(positions) + (1,) * (b.ndim - jnp.ndim(positions)))
    return jnp.where(valid, a, 1).astype(a.dtype), jnp.where(valid, b, 0).astype(b.dtype)


def _chunk_forward(system, readout, params, xs, positions, h, length, padded, *, reverse, method):
    """One chunk from its entering state h: (its last state, ys (T, batch, ...), states (T, ...))."""
    if method == "associative":
        a, b = _masked_system(system, params, xs, positions, length, padded)
        states = _chunk_states(a, b, h, reverse=reverse, method=method)
        return states[0 if reverse else -1], readout(params, xs, states), states

    def step(h, inputs):
        xs_t, position = inputs
        a, b = _masked_system(system, params, xs_t, position, length, padded)
        h = a * h + b
        return h, (readout(params, xs_t, h), h)

    last, (ys, states) = jax.lax.scan(step, h, (xs, positions), reverse=reverse)
    return last, ys, states


def _chunk_backward(system, readout, params, xs, positions, h, d_ys, d_last, length, padded, *, reverse, method):
    """One chunk's cotangents from d_ys (T, batch, ...) and d_last = ∂L/∂(its last state)
    from the later chunks: (d_params, d_xs (T, batch, ...), ∂L/∂h for the entering state)."""
    first = -1 if reverse else 0

    def pullback(xs, positions, states, previous, d_ys, g_from_later):
        """Cotangents of params and xs from the readout and the system, given the chunk's (or
        step's) states (None: made here from the previous ones, h_t = a_t h_{t-1} + b_t) and
        the adjoint flowing in from the steps after; also a ⊙ g, sent back to the state before."""
        (a, b), system_vjp = jax.vjp(lambda p, x: _masked_system(system, p, x, positions, length, padded),
                                     params, xs)
        states = a * previous + b if states is None else states
        _, readout_vjp = jax.vjp(readout, params, xs, states)
        d_params_readout, d_xs_readout, d_states = readout_vjp(d_ys)
        g = g_from_later(a, d_states)
        d_params_system, d_xs_system = system_vjp((_sum_to_shape(g * previous, a.shape), g))
        return (jax.tree.map(jnp.add, d_params_readout, d_params_system),
                jax.tree.map(jnp.add, d_xs_readout, d_xs_system), jnp.broadcast_to(a, g.shape) * g)

    if method == "associative":
        _, _, states = _chunk_forward(system, readout, params, xs, positions, h, length, padded,
                                      reverse=reverse, method=method)
        previous = _shifted(states, h, later=reverse)  # h_{t-1} (h_{t+1} with reverse)

        def adjoint(a, d_states):
            # g_t = d_states_t + a_{t+1} g_{t+1}: the recurrence backwards in time, a shifted by
            # one step (step t+1 carries g_{t+1} back to h_t), d_last entering.
            a = jnp.broadcast_to(a, d_states.shape)
            return _chunk_states(_shifted(a, 1, later=not reverse), d_states, d_last, reverse=not reverse,
                                 method=method)

        d_params, d_xs, a_g = pullback(xs, positions, states, previous, d_ys, adjoint)
        return d_params, d_xs, a_g[first]

    # Sequential: the chunk's states recomputed, each kept as the state *entering* its step
    # (h_{t-1}; h_{t+1} with reverse); the adjoint's step remakes its a_t, b_t (it needs them
    # anyway) and from them its own state, so no shifted copy of the states is made.
    def recompute(h, inputs):
        a, b = _masked_system(system, params, *inputs, length, padded)
        return a * h + b, h

    _, previous = jax.lax.scan(recompute, h, (xs, positions), reverse=reverse)

    def step(carry, inputs):
        d_params, a_g_later = carry  # a_{t+1} g_{t+1}, what step t+1 sends back to h_t
        xs_t, position, previous_t, d_ys_t = inputs
        d_p, d_x, a_g = pullback(xs_t, position, None, previous_t, d_ys_t, lambda a, d_states: d_states + a_g_later)
        return (jax.tree.map(jnp.add, d_params, d_p), a_g), d_x

    zeros = jax.tree.map(jnp.zeros_like, params)
    (d_params, d_entering), d_xs = jax.lax.scan(step, (zeros, d_last), (xs, positions, previous, d_ys),
                                                reverse=not reverse)
    return d_params, d_xs, d_entering


def _engine_forward(system, readout, T, reverse, method, params, xs, h0):
    """(ys (batch, L, ...), the final state, the state entering each chunk (n_chunks, batch, ...))."""
    length = jax.tree.leaves(xs)[0].shape[1]
    padded = length % T != 0
    xs = _padded(xs, T)
    starts = jnp.arange(0, length, T)
    ys_shape = jax.eval_shape(lambda: readout(params, _read_chunk(xs, 0, T), jnp.zeros((T,) + h0.shape, h0.dtype)))
    ys = jax.tree.map(lambda y: jnp.zeros((y.shape[1], len(starts) * T) + y.shape[2:], y.dtype), ys_shape)

    def chunk(carry, start):
        h, ys = carry
        last, ys_c, _ = _chunk_forward(system, readout, params, _read_chunk(xs, start, T), start + jnp.arange(T),
                                       h, length, padded, reverse=reverse, method=method)
        return (last, _write_chunk(ys, ys_c, start)), h

    (final, ys), entering = jax.lax.scan(chunk, (h0, ys), starts, reverse=reverse)
    return jax.tree.map(lambda y: y[:, :length], ys), final, entering


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _engine(system, readout, T, reverse, method, params, xs, h0):
    """The chunked recurrence from h0 (batch, ...): (ys (batch, L, ...), the final state)."""
    ys, final, _ = _engine_forward(system, readout, T, reverse, method, params, xs, h0)
    return ys, final


def _engine_fwd(system, readout, T, reverse, method, params, xs, h0):
    ys, final, entering = _engine_forward(system, readout, T, reverse, method, params, xs, h0)
    return (ys, final), (params, xs, entering)


def _engine_bwd(system, readout, T, reverse, method, residuals, cotangents):
    """The adjoint recurrence, chunk by chunk in the opposite direction of time."""
    params, xs, entering = residuals
    d_ys, d_final = cotangents
    length = jax.tree.leaves(xs)[0].shape[1]
    padded = length % T != 0
    xs, d_ys = _padded(xs, T), _padded(d_ys, T)

    def chunk(carry, inputs):
        d_params, d_last, d_xs = carry  # d_last: ∂L/∂(the chunk's last state), from the later chunks
        h, start = inputs
        d_p, d_x, d_entering = _chunk_backward(
            system, readout, params, _read_chunk(xs, start, T), start + jnp.arange(T), h,
            _read_chunk(d_ys, start, T), d_last, length, padded, reverse=reverse, method=method)
        return (jax.tree.map(jnp.add, d_params, d_p), d_entering, _write_chunk(d_xs, d_x, start)), None

    zeros = jax.tree.map(jnp.zeros_like, (params, xs))
    (d_params, d_h0, d_xs), _ = jax.lax.scan(chunk, (zeros[0], d_final, zeros[1]),
                                             (entering, jnp.arange(0, length, T)), reverse=not reverse)
    return d_params, jax.tree.map(lambda d: d[:, :length], d_xs), d_h0


_engine.defvjp(_engine_fwd, _engine_bwd)


def _given_system(params, xs):
    """A recurrence whose a and b are given step by step: xs = (a, b)."""
    return xs


def _invariant_system(a, b):
    """A recurrence with one a for every step (params), b given step by step (xs)."""
    return a, b


def _states(params, xs, h):
    """The readout that returns the states themselves."""
    return h


#: Steps per chunk of :func:`chunked_recurrence` when a caller has no reason to choose.
CHUNK_SIZE = 64


def chunked_recurrence(a, b, *, axis: int = 0, reverse: bool = False, initial_state=None,
                       chunk_size: int = CHUNK_SIZE, within_chunk: str | None = None):
    """The states of ``x_ℓ = a_ℓ ⊙ x_{ℓ-1} + b_ℓ`` along ``axis`` of b, and the final state,
    by the chunked engine: the states chunk by chunk from the state carried between chunks,
    and a gradient that is the adjoint recurrence run backwards over the same chunks from
    the states entering each chunk (no per-step residuals). Same recurrence, arguments and
    states as :func:`linear_recurrence` (which runs one associative scan over all L steps).

    Args:
        a: broadcastable to b; a time-invariant a has size 1 on the time axis (or omits it
            with every axis before it) and stays that small.
        b: (..., L, ...) with time on ``axis``.
        reverse: run backwards in time, ``x_ℓ = a_ℓ x_{ℓ+1} + b_ℓ``.
        initial_state: x_{-1} (x_L with ``reverse``), broadcastable to b's shape without the
            time axis; None: zeros.
        chunk_size: T, steps per chunk (an integer >= 1; T >= L is one chunk).
        within_chunk: "sequential" or "associative" (see :func:`selective_scan`); None: the
            backend's default.

    Returns:
        (states, final_state): states of b's shape, final_state (x_{L-1}; x_0 with
        ``reverse``) of b's shape without the time axis, in the dtype of a and b together.
    """
    b = jnp.asarray(b)
    axis = axis % b.ndim
    dtype = jnp.result_type(a, b)
    a = jnp.asarray(a, dtype).reshape((1,) * (b.ndim - jnp.ndim(a)) + jnp.shape(a))
    batch, L, rest = b.shape[:axis], b.shape[axis], b.shape[axis + 1:]
    flat = (int(np.prod(batch)), L) + rest  # (batch, L, ...), the engine's layout; a reshape, no copy
    if within_chunk is None:
        within_chunk = "sequential" if jax.default_backend() == "cpu" else "associative"
    h0 = (jnp.zeros(flat[:1] + rest, dtype) if initial_state is None
          else jnp.broadcast_to(jnp.asarray(initial_state, dtype), batch + rest).reshape(flat[:1] + rest))
    args = (min(chunk_size, L), reverse, within_chunk)
    if a.shape[axis] == 1 and L > 1:  # time invariant: a enters as a parameter, (batch or 1, ...)
        a = jnp.squeeze(a, axis)
        a = a.reshape((1,) + a.shape[axis:]) if np.prod(a.shape[:axis]) == 1 else \
            jnp.broadcast_to(a, batch + a.shape[axis:]).reshape(flat[:1] + a.shape[axis:])
        states, final = _engine(_invariant_system, _states, *args, a, b.astype(dtype).reshape(flat), h0)
    else:
        # a keeps its own size-1 axes after time (a decay shared by a row of states stays one
        # number per step); only its batch axes are made b's, to be flattened with them.
        a = jnp.broadcast_to(a, batch + a.shape[axis:]).reshape(flat[:2] + a.shape[axis + 1:])
        states, final = _engine(_given_system, _states, *args, (), (a, b.astype(dtype).reshape(flat)), h0)
    return states.reshape(b.shape), final.reshape(batch + rest)


# =============================================================================================
# SSD (Mamba-2): a scalar decay per head, three algorithms for one recurrence
# =============================================================================================
#
# Per head, with a_t = exp(log_a_t) (a scalar) and h_t a (P, N) matrix:
#
#     h_t = a_t h_{t-1} + x_t b_tᵀ          x_t (P,), b_t (N,)
#     y_t = h_t c_t                          c_t (N,), y_t (P,)
#
# Unrolled, y_t = Σ_{s ≤ t} exp(Σ_{k=s+1}^{t} log_a_k) (c_t · b_s) x_s: the output is a
# matrix over time, M = L ∘ (C Bᵀ), applied to x, with L the 1-semiseparable mask of
# cumulative decays (masked linear attention without a softmax). Three ways to compute it:
# step by step (:func:`ssd_recurrence`), as the whole L × L matrix (:func:`ssd_quadratic`),
# and chunk by chunk (:func:`ssd_scan`, Mamba-2's algorithm: the matrix cut into blocks).
# Shapes follow Mamba's ``ssd_minimal_discrete``: x (batch, length, heads, head_dim),
# log_a (batch, length, heads), b and c (batch, length, heads, state); the state is
# (batch, heads, head_dim, state). As in Mamba-2's kernels, b and c may also be shared by
# groups of heads, (batch, length, groups, state) with groups dividing heads: head k reads
# group k // (heads / groups), and C Bᵀ is computed once per group. A discretised SSM
# enters as x = Δ·u and log_a = Δ·A.

#: The chunk size of :func:`ssd_scan` when a caller has no reason to choose (Mamba-2's
#: minimal listing uses 64; its fused kernel 256).
SSD_CHUNK_SIZE = 64

#: The most chunks :func:`ssd_scan` computes at once by default: longer sequences run as a
#: loop over groups of chunks, recomputed in the backward pass (memory O(group), not
#: O(length), for the blocks: at batch 8, 16,384 steps, 4 heads of 64, state 64, the fwd+bwd
#: plan is 818 MiB instead of 2,047). Up to this many chunks the program has no loop:
#: chapter 10 counts its FLOPs with XLA's cost analysis, which counts a loop's body once
#: (its programs have 16 and at most 32 chunks).
SSD_CHUNKS_PER_GROUP = 32

_HIGHEST = jax.lax.Precision.HIGHEST


def _check_ssd(x, log_a, b, c, initial_state=None):
    """Shapes of the SSD arguments (values are not read): ValueError naming the argument."""
    x_shape = np.shape(x)
    if len(x_shape) != 4 or x_shape[1] < 1:
        raise ValueError(f"x must have shape (batch, length, heads, head_dim) with length >= 1; "
                         f"got shape {x_shape}.")
    batch, length, heads, head_dim = x_shape
    if np.shape(log_a) != (batch, length, heads):
        raise ValueError(f"log_a must have shape {(batch, length, heads)} (x's batch, length, heads); "
                         f"got shape {np.shape(log_a)}.")
    if np.ndim(b) != 4 or np.shape(b)[:2] != (batch, length) or heads % max(np.shape(b)[2], 1):
        raise ValueError(f"b must have shape {(batch, length, heads)} + (state,), or (batch, length, "
                         f"groups, state) with groups dividing heads = {heads}; got shape {np.shape(b)}.")
    state = np.shape(b)[3]
    if np.shape(c) != np.shape(b):
        raise ValueError(f"c must have b's shape {np.shape(b)}; got shape {np.shape(c)}.")
    if initial_state is not None and np.shape(initial_state) != (batch, heads, head_dim, state):
        raise ValueError(f"initial_state must have shape {(batch, heads, head_dim, state)} "
                         f"(batch, heads, head_dim, state); got shape {np.shape(initial_state)}.")


def _ssd_arrays(*arrays):
    """The arrays (None passes through) as jax.Arrays of their common dtype."""
    dtype = jnp.result_type(*(a for a in arrays if a is not None))
    return tuple(None if a is None else jnp.asarray(a, dtype) for a in arrays)


def _per_head(z, heads: int):
    """(..., groups, state) -> (..., heads, state): each group's vector for its heads."""
    return jnp.repeat(z, heads // z.shape[-2], axis=-2)


def ssd_step(state, x_t, log_a_t, b_t, c_t):
    """One step of the SSD recurrence, for every head at once.

    Args:
        state: (..., heads, head_dim, state) h_{t-1}.
        x_t: (..., heads, head_dim); log_a_t: (..., heads);
        b_t, c_t: (..., heads, state), or (..., groups, state) shared by groups of heads.

    Returns:
        (h_t, y_t) with h_t = exp(log_a_t) h_{t-1} + x_t b_tᵀ and y_t = h_t c_t
        (..., heads, head_dim).
    """
    heads = x_t.shape[-2]
    b_t, c_t = _per_head(b_t, heads), _per_head(c_t, heads)
    state = jnp.exp(log_a_t)[..., None, None] * state + x_t[..., :, None] * b_t[..., None, :]
    return state, jnp.einsum("...pn,...n->...p", state, c_t, precision=_HIGHEST)


def ssd_recurrence(x, log_a, b, c, *, initial_state=None):
    """SSD by its recurrence, one time step after another (``lax.scan``): the reference.

    Args:
        x: (batch, length, heads, head_dim) inputs (a discretised SSM's Δ·u).
        log_a: (batch, length, heads) log of each step's decay (Δ·A, <= 0 for a stable SSM).
        b, c: (batch, length, heads, state) input and output vectors, or (batch, length,
            groups, state) shared by groups of heads (groups dividing heads).
        initial_state: (batch, heads, head_dim, state) h_{-1}; zeros if None.

    Returns:
        (y, final_state): y (batch, length, heads, head_dim), final_state h_{L-1}
        (batch, heads, head_dim, state), in the dtype of the inputs together. Only shapes
        are checked.
    """
    _check_ssd(x, log_a, b, c, initial_state)
    x, log_a, b, c, initial_state = _ssd_arrays(x, log_a, b, c, initial_state)
    batch, _, heads, head_dim = x.shape
    if initial_state is None:
        initial_state = jnp.zeros((batch, heads, head_dim, b.shape[-1]), x.dtype)
    time_major = tuple(jnp.moveaxis(z, 1, 0) for z in (x, log_a, b, c))
    final_state, y = jax.lax.scan(lambda h, inputs: ssd_step(h, *inputs), initial_state, time_major)
    return jnp.moveaxis(y, 0, 1), final_state


def segment_sum(log_a):
    """The stable segment sums of ``log_a`` over its last axis T: (..., T) -> (..., T, T),

        S[..., t, s] = Σ_{k=s+1}^{t} log_a[..., k]   for t >= s (0 on the diagonal),  -inf above,

    so that exp(S) is the 1-semiseparable mask of cumulative decays (0 above the diagonal).
    Each entry is a sum of its own terms only: the row of log_a is broadcast to (T, T),
    masked to the strictly lower triangle and summed down the columns. The shortcut
    cumsum_t - cumsum_s subtracts two long sums and loses the short ones to rounding.
    """
    T = log_a.shape[-1]
    terms = jnp.broadcast_to(log_a[..., :, None], log_a.shape + (T,))  # terms[t, s] = log_a[t]
    strictly_lower = jnp.tril(jnp.ones((T, T), bool), k=-1)
    sums = jnp.cumsum(jnp.where(strictly_lower, terms, 0), axis=-2)
    return jnp.where(jnp.tril(jnp.ones((T, T), bool)), sums, -jnp.inf)


def _grouped(x, log_a, b):
    """Split the heads into (groups, heads per group): x (batch, length, heads, P) ->
    (batch, length, G, R, P) and log_a (batch, length, heads) -> (batch, length, G, R)."""
    groups = b.shape[-2]
    return (x.reshape(x.shape[:2] + (groups, -1, x.shape[-1])),
            log_a.reshape(log_a.shape[:2] + (groups, -1)))


def _diagonal_blocks(x, log_a, b, c):
    """Masked attention within each chunk, and each chunk's own final state.

    x (batch, C, T, G, R, P), log_a (batch, C, G, R, T), b and c (batch, C, T, G, N), for C
    chunks of T steps, G groups of R heads. Returns y (batch, C, T, G, R, P), the output of
    the chunk's own inputs, y_t = Σ_{s ≤ t in the chunk} exp(Σ_{k=s+1}^{t} log_a_k)
    (c_t · b_s) x_s, and the state they leave, (batch, C, G, R, P, N): step s decays by
    the log_a after it, Σ_{k=s+1}^{T-1} log_a_k, the last row of the segment sums.
    """
    segments = segment_sum(log_a)  # (batch, C, G, R, T, T)
    scores = jnp.einsum("bctgn,bcsgn->bcgts", c, b, precision=_HIGHEST)  # C Bᵀ, once per group
    y = jnp.einsum("bcgrts,bcsgrp->bctgrp", jnp.exp(segments) * scores[:, :, :, None], x,
                   precision=_HIGHEST)
    decay_to_end = jnp.moveaxis(jnp.exp(segments[..., -1, :]), -1, 2)  # (batch, C, T, G, R)
    states = jnp.einsum("bcsgrp,bcsgn->bcgrpn", decay_to_end[..., None] * x, b, precision=_HIGHEST)
    return y, states


def ssd_quadratic(x, log_a, b, c):
    """SSD as masked attention: y = (L ∘ C Bᵀ) x, the whole length × length matrix at once.

    ``L[t, s] = exp(Σ_{k=s+1}^{t} log_a_k)`` for t >= s and 0 above (:func:`segment_sum`),
    ``(C Bᵀ)[t, s] = c_t · b_s``: the "attention" of query c_t to key b_s, decayed by the
    time between them, applied to the values x. O(length²) work and memory per head: for
    teaching and short sequences. The state starts at zero.

    Args:
        x: (batch, length, heads, head_dim); log_a: (batch, length, heads);
        b, c: (batch, length, heads, state), or (batch, length, groups, state) shared by
            groups of heads (groups dividing heads).

    Returns:
        y: (batch, length, heads, head_dim), in the dtype of the inputs together. Only shapes
        are checked.
    """
    _check_ssd(x, log_a, b, c)
    x, log_a, b, c = _ssd_arrays(x, log_a, b, c)
    x_g, log_a_g = _grouped(x, log_a, b)
    y, _ = _diagonal_blocks(x_g[:, None], jnp.moveaxis(log_a_g, 1, -1)[:, None], b[:, None], c[:, None])
    return y[:, 0].reshape(x.shape)  # one chunk: the whole sequence


def _ssd_chunks(x, log_a, b, c, initial_state, T: int):
    """Steps 1-4 of :func:`ssd_scan` over a whole sequence at once, for T dividing its length.

    x (batch, S, G, R, P), log_a (batch, S, G, R), b and c (batch, S, G, N), initial_state
    (batch, G, R, P, N), for S = n_chunks · T steps, G groups of R heads. Returns y
    (batch, S, G, R, P) and the final state (batch, G, R, P, N).
    """
    batch, S = x.shape[:2]
    n_chunks = S // T
    x, log_a, b, c = (z.reshape((batch, n_chunks, T) + z.shape[2:]) for z in (x, log_a, b, c))
    log_a = jnp.moveaxis(log_a, 2, -1)  # (batch, n_chunks, G, R, T)

    # 1. and 2. Diagonal blocks (masked attention within each chunk) and each chunk's state.
    y_diag, chunk_states = _diagonal_blocks(x, log_a, b, c)

    # 3. The states entering each chunk: h_c = exp(Σ_chunk log_a) h_{c-1} + chunk_states_c.
    chunk_decay = jnp.exp(jnp.sum(log_a, axis=-1))[..., None, None]  # (batch, n_chunks, G, R, 1, 1)
    chunk_states = chunk_states.at[:, 0].add(chunk_decay[:, 0] * initial_state)
    _, ends = jax.lax.associative_scan(binary_operator, (chunk_decay, chunk_states), axis=1)
    entering = jnp.concatenate([initial_state[:, None], ends[:, :-1]], axis=1)

    # 4. Off-diagonal blocks: the entering state read out by c, decayed from the chunk's
    #    start to each step, Σ_{k=0}^{t} log_a_k (a cumulative sum from the start only).
    decay_from_start = jnp.moveaxis(jnp.exp(jnp.cumsum(log_a, axis=-1)), -1, 2)  # (batch, n_chunks, T, G, R)
    y_off = jnp.einsum("bctgn,bcgrpn->bctgrp", c, entering, precision=_HIGHEST)
    y = y_diag + decay_from_start[..., None] * y_off
    return y.reshape((batch, S) + y.shape[3:]), ends[:, -1]


def ssd_scan(x, log_a, b, c, *, chunk_size: int = SSD_CHUNK_SIZE, initial_state=None,
             chunks_per_group: int | None = SSD_CHUNKS_PER_GROUP):
    """SSD by Mamba-2's chunked algorithm (Dao and Gu, 2024, Listing 1; ``ssd_minimal.py``).

    The length × length matrix L ∘ C Bᵀ is cut into blocks of ``chunk_size`` = T steps:

    1. the diagonal blocks, by the quadratic form inside each chunk (:func:`ssd_quadratic`);
    2. each chunk's own final state, from its inputs decayed to the chunk's end
       (the right factor B of the low-rank off-diagonal blocks);
    3. a scan over chunks (``lax.associative_scan``: no loop, so XLA's cost analysis counts
       every operation) of the states entering each chunk, a
       whole chunk decaying by exp(Σ log_a) over it, starting from ``initial_state``
       (the middle factor: the decays between chunks);
    4. each chunk's output from the state entering it, decayed from the chunk's start
       (the left factor C).

    Everything but step 3 is a batch of matrix products. Work O(length·T·(state + head_dim)
    + length·head_dim·state); memory O(length·T) per head for the blocks and one state per
    chunk. A length that is not a multiple of T is padded at the end with steps of
    log_a = 0 and b = 0 (decay 1, no input): they carry the last state unchanged, so the
    final state is that of the real last step; their outputs are dropped.

    Long sequences, of more than ``chunks_per_group`` chunks, are cut into groups of at
    most that many chunks (as equal as the chunks allow), run one group after another by
    ``lax.scan`` with the state carried from group to group, each group under
    ``jax.checkpoint``: the backward pass keeps one state per group and recomputes the
    group's blocks, so the memory of the blocks is that of one group, not of the whole
    sequence. The values are those of the one-program algorithm (to rounding: the state
    passing is grouped differently). That program has a loop, whose body XLA's cost
    analysis counts once; ``chunks_per_group=None`` never groups.

    Args:
        x: (batch, length, heads, head_dim) inputs (a discretised SSM's Δ·u).
        log_a: (batch, length, heads) log of each step's decay (Δ·A, <= 0 for a stable SSM).
        b, c: (batch, length, heads, state) input and output vectors, or (batch, length,
            groups, state) shared by groups of heads (groups dividing heads; C Bᵀ is then
            computed once per group, as in Mamba-2's kernels).
        chunk_size: T, an integer >= 1; T >= length is one chunk (the quadratic form).
        initial_state: (batch, heads, head_dim, state) h_{-1}; zeros if None.
        chunks_per_group: an integer >= 1, the most chunks computed at once, or None (all
            of them: one program without a loop).

    Returns:
        (y, final_state): y (batch, length, heads, head_dim), final_state
        (batch, heads, head_dim, state), in the dtype of the inputs together (float64 end to
        end under ``jax_enable_x64``). Only shapes are checked.
    """
    _check_ssd(x, log_a, b, c, initial_state)
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1; got {chunk_size!r}.")
    if chunks_per_group is not None and (isinstance(chunks_per_group, bool) or not isinstance(
            chunks_per_group, (int, np.integer)) or chunks_per_group < 1):
        raise ValueError(f"chunks_per_group must be an integer >= 1 or None; got {chunks_per_group!r}.")
    x, log_a, b, c, initial_state = _ssd_arrays(x, log_a, b, c, initial_state)
    batch, length, heads, head_dim = x.shape
    groups, state = b.shape[-2:]
    T = min(chunk_size, length)
    n_chunks = -(-length // T)
    n_groups = 1 if chunks_per_group is None else -(-n_chunks // chunks_per_group)
    group_length = -(-n_chunks // n_groups) * T  # steps per group, a multiple of T
    pad = n_groups * group_length - length

    def padded(z):
        """Zeros on the padded steps (x = 0, log_a = 0, b = 0, c = 0: decay 1, no input, an
        output that is dropped)."""
        return jnp.pad(z, [(0, 0), (0, pad)] + [(0, 0)] * (z.ndim - 2)) if pad else z

    x, log_a = _grouped(x, log_a, b)
    x, log_a, b, c = map(padded, (x, log_a, b, c))
    if initial_state is None:
        initial_state = jnp.zeros((batch, heads, head_dim, state), x.dtype)
    initial_state = initial_state.reshape(batch, groups, -1, head_dim, state)
    if n_groups == 1:
        y, final_state = _ssd_chunks(x, log_a, b, c, initial_state, T)
    else:
        def group(h, inputs):
            y, h = _ssd_chunks(*inputs, h, T)
            return h, y

        def by_group(z):  # (batch, n_groups · group_length, ...) -> (n_groups, batch, group_length, ...)
            return jnp.moveaxis(z.reshape((batch, n_groups, group_length) + z.shape[2:]), 1, 0)

        final_state, y = jax.lax.scan(jax.checkpoint(group), initial_state,
                                      tuple(map(by_group, (x, log_a, b, c))))
        y = jnp.moveaxis(y, 0, 1).reshape((batch, n_groups * group_length) + y.shape[3:])
    return y[:, :length].reshape(batch, length, heads, head_dim), final_state.reshape(batch, heads, head_dim, state)
