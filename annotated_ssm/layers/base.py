"""The contract every SSM layer keeps, and the convolution machinery of S4, DSS and S4D.

A layer maps a sequence of H-channel vectors to another: ``(B, L, H) -> (B, L, H)``
(a single sequence ``(L, H)`` works too). Each layer offers two ways to compute it:

- ``layer(u)``: the whole sequence at once (FFT convolution for S4/DSS/S4D, a parallel
  scan for S5). This is what training uses.
- ``layer.step(state, u_t, system)``: one time step of the equivalent recurrence, for
  online inference and autoregressive generation. ``system = layer.discrete_system(L)``
  precomputes the discrete matrices once; ``layer.recurrent(u)`` runs the steps over a
  whole sequence and reproduces ``layer(u)``.

The contract (checked for every layer in ``LAYERS`` by ``tests/test_layer_contract.py``):

Constructor
    ``Layer(d_model, state_size=64, *, bidirectional=False, step_min=1e-3, step_max=1e-1,
    rngs, ...)``. Every argument is checked when the layer is built (ValueError naming it).
    Every layer has ``log_step`` (an :class:`SSMParam`; ``step_sizes()`` gives Δ = exp of
    it) and the skip term ``D`` (H,). Complex parameters are stored as real arrays with a
    trailing (real, imaginary) axis: :func:`complex_to_pair` / :func:`pair_to_complex`.

Bidirectional layers
    ``layer(u)`` runs a second SSM backwards in time and adds it; the layer is then
    non-causal, so it has no recurrence: ``discrete_system``, ``init_state``, ``step`` and
    ``recurrent`` raise ValueError. (``kernel(L)`` of a convolutional layer returns both
    kernels, (2, H, L).)

dtypes (:func:`annotated_ssm._validation.computation_dtypes`)
    float32 and float64 inputs are computed and returned in their dtype (float64 end to
    end under ``jax_enable_x64``; the float32 parameters are promoted); bfloat16 and
    float16 are computed in float32 and returned in the input's dtype; integers and bools
    are computed and returned in the default float dtype; complex input is a ValueError.
    ``discrete_system`` and ``init_state`` take ``dtype=`` (the real dtype of the
    computation, default: the default float dtype) so that a recurrence can run in float64.

Validation
    Arguments are checked at the public methods, eagerly, apart from the algorithms.
    A concrete input with a NaN or inf is rejected with a ValueError naming the first bad
    position (batch, time, channel). Under ``jit``/``grad``/``vmap`` the values are tracers
    and cannot be inspected without a device-to-host copy, so only shapes and dtypes are
    checked there: a non-finite input then gives a non-finite output (for the
    convolutional layers at every time step, through the FFT).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import (
    check_batch_shape,
    check_bool,
    check_finite_at,
    check_ndim,
    check_positive_int,
    check_step_bounds,
    computation_dtypes,
    default_float_dtype,
)
from ..init import log_step
from ..kernels import bidirectional_conv, causal_conv

__all__ = [
    "SSMParam",
    "SSMLayer",
    "ConvolutionalSSMLayer",
    "DiagonalSystem",
    "diagonal_step",
    "check_sequence_input",
    "complex_to_pair",
    "pair_to_complex",
    "complex_dtype",
]


class SSMParam(nnx.Param):
    """A parameter of the state space itself: A (or Λ, P), B and log Δ.

    The papers train these with their own (smaller) learning rate and no weight decay;
    tagging them with this type lets the training loop find them with
    ``nnx.state(model, SSMParam)``. C, D and the position-wise layers are plain ``nnx.Param``.
    """


# --- complex parameters -------------------------------------------------------------------


def complex_to_pair(z) -> jax.Array:
    """Complex (...) -> float32 (..., 2) holding (real, imaginary): how layers store complex
    parameters (optimisers and weight decay then treat both parts as ordinary reals)."""
    z = np.asarray(z) if not isinstance(z, jax.Array) else z
    return jnp.stack([jnp.real(z), jnp.imag(z)], axis=-1).astype(jnp.float32)


def pair_to_complex(x, dtype=None) -> jax.Array:
    """(..., 2) (real, imaginary) -> complex (...); ``dtype`` is the real dtype to compute in
    (float32 -> complex64, float64 -> complex128), default: that of ``x``."""
    x = jnp.asarray(x) if dtype is None else jnp.asarray(x).astype(dtype)
    return jax.lax.complex(x[..., 0], x[..., 1])


def complex_dtype(dtype) -> np.dtype:
    """The complex dtype of a real computation dtype: float32 -> complex64, float64 -> complex128."""
    return np.result_type(np.dtype(dtype), np.complex64)


def _real_dtype(dtype) -> np.dtype:
    """The real dtype of a computation: ``dtype`` if given, else the default float dtype."""
    return default_float_dtype() if dtype is None else np.dtype(dtype)


# --- input checks ---------------------------------------------------------------------------


def check_sequence_input(u, d_model: int) -> None:
    """Raise ValueError unless ``u`` has shape (B, L, H) or (L, H) with H = d_model, L >= 1."""
    check_ndim("u", u, (2, 3), "(batch, length, channels) or (length, channels)")
    if np.shape(u)[-1] != d_model:
        raise ValueError(
            f"u must have {d_model} channels on its last axis (the layer's d_model); got shape {np.shape(u)}."
        )
    if np.shape(u)[-2] < 1:
        raise ValueError(f"u must have length L >= 1; got shape {np.shape(u)}.")


def _prepare(name: str, u, axis_names: tuple[str, ...]) -> tuple[jax.Array, np.dtype]:
    """Apply the dtype policy and the finiteness check: (u in its computation dtype, output dtype).

    Finite after the cast: float64 1e39 is inf in float32. Host input (NumPy, Python) is cast
    and checked on the host, before it goes to the device."""
    compute, output = computation_dtypes(name, u)
    if isinstance(u, jax.Array):  # a device array or a tracer
        u = u.astype(compute)
        check_finite_at(name, u, axis_names)
        return u, output
    host = np.asarray(u)
    with np.errstate(over="ignore", invalid="ignore"):
        cast = host.astype(compute)
    check_finite_at(name, cast, axis_names, original=host)
    return jnp.asarray(cast), output


def compiled(layer: "SSMLayer", method: str, *args) -> Any:
    """``getattr(layer, method)(*args)`` as one compiled program when called eagerly.

    ``layer(u)`` and ``layer.recurrent(u)`` check their input, then compute through this.
    Op by op, a layer's first eager call compiled about a hundred small programs (S4: 2.7 s
    on a CPU, where one program compiles in 0.5 s); later calls with the same shapes reuse
    the program. The layer goes in as (structure, arrays) through plain ``jax.jit``, which
    reads the parameters and writes nothing back. Under a transformation (jit, grad, vmap:
    tracers among the inputs or parameters) the method is traced inline instead: a jit
    nested in a training step made S4D's step 20% slower on a CPU.
    """
    graphdef, state = nnx.split(layer)
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((state, args))):
        return getattr(layer, method)(*args)
    return _compiled_method(graphdef, method, state, *args)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _compiled_method(graphdef, method, state, *args):
    return getattr(nnx.merge(graphdef, state), method)(*args)


class SSMLayer(nnx.Module):
    """Base class of the sequence layers: the shared constructor pieces, the checks of the
    public methods, the dtype and bidirectional policies (see the module docstring).

    A subclass calls ``_init_contract`` first in its constructor, ``_init_log_step`` and
    ``_init_skip`` where its parameters are drawn, and implements:

    - ``_forward(u)``: the whole sequence, u already checked and in its computation dtype;
    - ``_discrete_system(length, dtype)``: the discrete recurrence (length None: unbounded);
    - ``_init_state(batch_shape, dtype)``: the zero state;
    - ``_step(system, state, u_t)``: one step, returning ``(state, y_t)``.
    """

    d_model: int
    state_size: int
    bidirectional: bool

    # --- constructor pieces -------------------------------------------------------------

    def _init_contract(self, d_model, state_size, *, bidirectional, step_min, step_max,
                       even_state: str | None = None) -> None:
        """Check and store the arguments every layer shares.

        ``even_state``: if given, the state size must be even and this says why.
        """
        self.d_model = check_positive_int("d_model", d_model)
        self.state_size = check_positive_int("state_size", state_size, minimum=2 if even_state else 1)
        if even_state and self.state_size % 2:
            raise ValueError(f"state_size must be even ({even_state}); got {self.state_size}.")
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.step_min, self.step_max = check_step_bounds(step_min, step_max)

    def _init_log_step(self, rngs: nnx.Rngs, shape) -> None:
        """``log_step``: log Δ ~ U[log step_min, log step_max] of the given shape."""
        self.log_step = SSMParam(log_step(rngs.params(), shape, self.step_min, self.step_max))

    def _init_skip(self, rngs: nnx.Rngs) -> None:
        """``D``: the skip term y += D ⊙ u, (H,), N(0, 1) as in the papers' code."""
        self.D = nnx.Param(jax.random.normal(rngs.params(), (self.d_model,), jnp.float32))

    # --- parameters in a computation dtype ---------------------------------------------

    def step_sizes(self, dtype=None) -> jax.Array:
        """Δ = exp(log_step): (H,) for S4, DSS, S4D (one per channel), (P',) for S5 (one per
        state). ``dtype``: the real dtype to compute in (default: the parameter's)."""
        log_dt = self.log_step[...]
        return jnp.exp(log_dt if dtype is None else log_dt.astype(dtype))

    def _skip(self, dtype) -> jax.Array:
        return self.D[...].astype(dtype)

    # --- the whole sequence ----------------------------------------------------------------

    def __call__(self, u):
        """Apply the layer to a whole sequence.

        Args:
            u: (B, L, H) or (L, H), real (float, integer or bool; see the dtype policy).

        Returns:
            y of u's shape: in u's dtype for floats, the default float dtype for integers/bools.

        Raises:
            ValueError: bad shape, complex dtype, or (for a concrete u, not under jit) a NaN
            or inf in u, named by its position.
        """
        u, out_dtype = self._check_input(u)
        return compiled(self, "_forward", u).astype(out_dtype)

    def _check_input(self, u) -> tuple[jax.Array, np.dtype]:
        check_sequence_input(u, self.d_model)
        return _prepare("u", u, ("batch", "time", "channel"))

    def _forward(self, u: jax.Array) -> jax.Array:
        raise NotImplementedError

    # --- the recurrence ----------------------------------------------------------------------

    def _require_causal(self, method: str) -> None:
        if self.bidirectional:
            raise ValueError(
                f"{method} needs a causal layer (a recurrence runs forwards in time only); this layer "
                f"was built with bidirectional=True. Use layer(u) for the bidirectional output."
            )

    def discrete_system(self, length: int | None = None, *, dtype=None) -> Any:
        """Precompute the discrete recurrence for sequences of ``length`` steps.

        Args:
            length: L, an integer >= 1, or None for an unbounded sequence (where the layer
                allows it).
            dtype: the real dtype of the computation (default: the default float dtype,
                float64 under ``jax_enable_x64``).

        Raises:
            ValueError: on a bidirectional layer, or for a bad ``length``.
        """
        self._require_causal("discrete_system")
        if length is not None:
            length = check_positive_int("length", length)
        return self._discrete_system(length, _real_dtype(dtype))

    def init_state(self, batch_shape=(), *, dtype=None) -> Any:
        """The zero state for a batch of sequences.

        Args:
            batch_shape: () for one sequence, an integer B or a tuple such as (B,).
            dtype: the real dtype of the computation (default: the default float dtype);
                the state is complex of that precision.
        """
        self._require_causal("init_state")
        return self._init_state(check_batch_shape("batch_shape", batch_shape), _real_dtype(dtype))

    def step(self, state, u_t, system=None):
        """Advance the recurrence one step.

        Args:
            state: from ``init_state`` or a previous ``step``.
            u_t: (..., H) the input at this time step (dtype policy as ``layer(u)``).
            system: from ``discrete_system(L)``; computed for unbounded length if None.

        Returns:
            (new_state, y_t) with y_t of shape (..., H).
        """
        self._require_causal("step")
        if np.ndim(u_t) < 1 or np.shape(u_t)[-1] != self.d_model:
            raise ValueError(f"u_t must have shape (..., {self.d_model}); got {np.shape(u_t)}.")
        u_t, out_dtype = _prepare("u_t", u_t, ("batch", "channel"))
        self._check_state(state, u_t.shape[:-1])
        if system is None:
            system = self.discrete_system(None, dtype=u_t.dtype)
        state, y = self._step(system, state, u_t)
        return state, y.astype(out_dtype)

    def _check_state(self, state, batch_shape: tuple[int, ...]) -> None:
        """ValueError unless ``state`` has the structure and shapes of ``init_state(batch_shape)``
        (shapes only: nothing is read from the device)."""
        expected = jax.eval_shape(lambda: self._init_state(batch_shape, jnp.float32))
        leaves, structure = jax.tree.flatten(state)
        got = [np.shape(x) for x in leaves]
        if structure == jax.tree.structure(expected) and got == [e.shape for e in jax.tree.leaves(expected)]:
            return
        if structure == jax.tree.structure(expected):
            single = jax.tree.leaves(jax.eval_shape(lambda: self._init_state((), jnp.float32)))[0].shape
            first, n = got[0], len(got[0]) - len(single)
            found = (f"one for batch shape {first[:n]}" if n >= 0 and first[n:] == single
                     else f"leaves of shapes {got}")
        else:
            found = f"a {type(state).__name__} of another structure"
        raise ValueError(
            f"state must be this layer's state for u_t's batch shape {batch_shape} (made by "
            f"init_state({batch_shape}) or returned by step); got {found}."
        )

    def recurrent(self, u):
        """Run the recurrence over a whole sequence u (B, L, H) or (L, H): y of the same shape,
        equal to ``layer(u)`` up to rounding. Causal layers only."""
        self._require_causal("recurrent")
        u, out_dtype = self._check_input(u)
        return compiled(self, "_recurrent", u).astype(out_dtype)

    def _recurrent(self, u: jax.Array) -> jax.Array:
        """The loop of ``recurrent``: u already checked and in its computation dtype."""
        system = self._discrete_system(u.shape[-2], u.dtype)
        state = self._init_state(u.shape[:-2], u.dtype)

        def body(state, u_t):
            return self._step(system, state, u_t)

        _, y = jax.lax.scan(body, state, jnp.moveaxis(u, -2, 0))
        return jnp.moveaxis(y, 0, -2)

    def _discrete_system(self, length: int | None, dtype) -> Any:
        raise NotImplementedError

    def _init_state(self, batch_shape: tuple[int, ...], dtype) -> Any:
        raise NotImplementedError

    def _step(self, system: Any, state: Any, u_t: jax.Array) -> tuple[Any, jax.Array]:
        raise NotImplementedError


class ConvolutionalSSMLayer(SSMLayer):
    """H independent SISO SSMs applied by FFT convolution with a length-L kernel.

    Subclasses implement ``kernel(L, dtype=None)``: shape (H, L), or (2, H, L) when
    bidirectional (the second kernel runs backwards in time).
    """

    def kernel(self, length: int, *, dtype=None) -> jax.Array:
        raise NotImplementedError

    def _forward(self, u):
        """y = K̄ * u + D u per channel. u: (B, L, H) or (L, H) -> same shape."""
        K = self.kernel(u.shape[-2], dtype=u.dtype)
        channels_last = jnp.swapaxes(u, -1, -2)  # (..., H, L)
        if self.bidirectional:
            y = bidirectional_conv(channels_last, K[0], K[1])
        else:
            y = causal_conv(channels_last, K)
        return jnp.swapaxes(y, -1, -2) + self._skip(u.dtype) * u


class DiagonalSystem(NamedTuple):
    """A discrete diagonal SSM per channel: x ← Ā ⊙ x + B̄ u,  y = Re(Σ_n C_n x_n).

    With conjugate symmetry, C already carries the factor 2 (y = 2·Re of the kept half).
    Shapes: (H, N) each, complex.
    """

    A_bar: jax.Array
    B_bar: jax.Array
    C: jax.Array


def diagonal_step(system: DiagonalSystem, state: jax.Array, u_t: jax.Array, D: jax.Array):
    """One step of H diagonal SSMs. state: (..., H, N) complex; u_t: (..., H) real; D: (H,)."""
    state = system.A_bar * state + system.B_bar * u_t[..., None]
    y = jnp.real(jnp.sum(system.C * state, axis=-1)) + D * u_t
    return state, y
