"""The contract every SSM layer keeps: read this file to write a new layer.

A layer maps a sequence of H-channel vectors to another, ``(B, L, H) -> (B, L, H)`` (or
``(L, H)``), in two equivalent ways: ``layer(u)`` computes the whole sequence at once
(training), and ``layer.step(state, u_t, system)`` advances the recurrence one step
(generation); ``layer.recurrent(u)`` runs the steps and reproduces ``layer(u)``.

The public methods below check their arguments and apply the dtype policy; a layer
implements only the hooks, which receive checked arrays in their computation dtype:

- ``_forward_state(u, step_sizes, state)``: the whole sequence from a state (None: the zero
  state), u (..., L, H) -> ``(y, final_state)``, y (..., L, H); ``_forward(u, step_sizes)``,
  y alone from the zero state, defaults to it (a layer may give it a faster path);
- ``_discrete_system(length, dtype, step_sizes)``: the discrete recurrence, any pytree;
- ``_init_state(batch_shape, dtype)``: the zero state, real or complex (the layer's choice);
- ``_step(system, state, u_t)``: ``(state, y_t)`` for u_t (..., H).

"Step" has one meaning per word here: the *step size* Δ is the discretisation interval
(``step_sizes()``, stored as ``log_step_size``; ``step_min``/``step_max`` bound its
initial value); ``step()`` advances the recurrence by one time step. ``step_sizes`` given
to a call is the step size of each observation of an irregularly sampled sequence, in
units of the training interval (None: regular). A layer whose recurrence can vary in time
sets ``takes_step_sizes = True`` and receives it as an array broadcastable to
u.shape[:-1] (scalar in ``_discrete_system``); other layers reject it. A convolutional
layer derives from :class:`ConvolutionalSSMLayer` and implements ``_kernel(length, dtype)``
and ``_state_terms(u, state)`` (the state's term and the final state in closed form) instead
of ``_forward_state``. Register the class in ``layers/__init__.py``; ``tests/test_layer_contract.py``
then checks it. A complete layer (N real states per channel, A = -(1, …, N), ZOH), which
``tests/test_layer_contract.py`` also holds to the whole contract (it runs this docstring's
examples and takes the class from them)::

    >>> import jax, jax.numpy as jnp
    >>> from flax import nnx
    >>> from annotated_ssm.layers import SSMLayer
    >>> from annotated_ssm.scan import linear_recurrence
    >>> class RealDiagonalLayer(SSMLayer):
    ...     def __init__(self, d_model, state_size=64, *, bidirectional=False,
    ...                  step_min=1e-3, step_max=1e-1, rngs):
    ...         self._init_contract(d_model, state_size, bidirectional=bidirectional,
    ...                             step_min=step_min, step_max=step_max, rngs=rngs)
    ...         self._init_log_step_size(rngs, (d_model,))  # Δ, one per channel
    ...         C = jax.random.normal(rngs.params(), (d_model, self.state_size), jnp.float32)
    ...         self.C = nnx.Param(C * self.state_size ** -0.5)
    ...         self._init_skip(rngs)  # D
    ...
    ...     def _discrete_system(self, length, dtype, step_sizes=None):
    ...         A = -jnp.arange(1, self.state_size + 1, dtype=dtype)  # (N,)
    ...         dtA = self.step_sizes(dtype)[:, None] * A  # (H, N)
    ...         return jnp.exp(dtA), jnp.expm1(dtA) / A  # ZOH: Ā, B̄ (B = 1)
    ...
    ...     def _init_state(self, batch_shape, dtype):
    ...         return jnp.zeros(batch_shape + self.C.shape, dtype)  # (..., H, N) real
    ...
    ...     def _step(self, system, x, u_t):
    ...         A_bar, B_bar = system
    ...         x = A_bar * x + B_bar * u_t[..., None]
    ...         return x, self._readout(x, u_t)
    ...
    ...     def _readout(self, x, u):  # y = C x + D u
    ...         return jnp.sum(self.C[...].astype(u.dtype) * x, -1) + self._skip(u.dtype) * u
    ...
    ...     def _forward_state(self, u, step_sizes, state):  # state None: zeros
    ...         A_bar, B_bar = self._discrete_system(None, u.dtype)
    ...         a = jnp.broadcast_to(A_bar, u.shape + A_bar.shape[-1:])  # (..., L, H, N)
    ...         x = linear_recurrence(a, B_bar * u[..., None], axis=-3, initial_state=state)
    ...         y = self._readout(x, u)
    ...         if self.bidirectional:  # the same SSM backwards in time (no D again)
    ...             back = linear_recurrence(a, B_bar * u[..., None], axis=-3, reverse=True)
    ...             y = y + jnp.sum(self.C[...].astype(u.dtype) * back, -1)
    ...         return y, x[..., -1, :, :]  # the output and the final state
    >>> layer = RealDiagonalLayer(4, 8, rngs=nnx.Rngs(0))
    >>> u = jax.random.normal(jax.random.key(0), (2, 16, 4))
    >>> bool(jnp.allclose(layer.recurrent(u), layer(u), atol=1e-5))
    True

Shared rules (checked for every layer in ``LAYERS`` by ``tests/test_layer_contract.py``):

Constructor
    ``Layer(d_model, state_size=64, *, bidirectional=False, step_min=1e-3, step_max=1e-1,
    rngs, ...)``, every argument checked (ValueError naming it; TypeError if ``rngs`` is not
    an ``nnx.Rngs``); ``step_min``/``step_max`` bound the initial step size Δ.
    ``log_step_size`` is an :class:`SSMParam` holding log Δ (Δ = ``step_sizes()``), ``D``
    (H,) the skip term. Parameters are named after what they hold (``log_A_real`` holds
    log(-Re A)). Complex parameters are stored as (real, imaginary) pairs:
    :func:`complex_to_pair`, :func:`pair_to_complex`.
Bidirectional
    ``layer(u)`` adds a second SSM run backwards in time; the layer is non-causal, so
    ``discrete_system``, ``init_state``, ``step`` and ``recurrent`` raise ValueError.
dtypes (:func:`annotated_ssm._validation.computation_dtypes`)
    float32 and float64 are computed and returned in their dtype (float64 end to end under
    ``jax_enable_x64``); bfloat16 and float16 are computed in float32 and returned in their
    dtype; integers and bools are computed and returned in the default float dtype; complex
    input is a ValueError. ``discrete_system``, ``init_state`` and ``kernel`` take
    ``dtype=``, a floating dtype (float16, bfloat16, float32, float64; for ``init_state`` of
    a layer with complex states also complex64/complex128), anything else is a ValueError;
    the default is the default float dtype (float32, float64 under x64). The same policy
    applies: 16-bit dtypes are computed in float32, a kernel is returned in the dtype asked
    for, a system and a state are in the computation dtype. Parameters are stored in
    float32 and cast to the computation dtype.
Values
    A NaN or inf in the input is a ValueError naming its first position, checked after the
    cast to the dtype it is computed in (1e39 is inf in float32); so are ``step_sizes``
    (also > 0). ``step`` checks that ``state`` has the structure, shapes and dtypes
    ``init_state`` gives and is finite, and that ``system`` has the structure and shapes
    ``discrete_system`` gives (TypeError for another kind of object, ValueError for other
    shapes). Host input (NumPy, Python) is checked on the host; a concrete jax.Array is
    checked on its device, which sends back one bool (the array itself is never copied to
    the host). Under ``jit``, ``grad`` or ``vmap`` values are tracers: only shapes and
    dtypes are checked there.
State in, state out (checked for every layer in ``LAYERS`` by ``tests/test_layer_state.py``)
    ``layer(u, state=None, return_state=False)``: a causal layer starts from ``state`` (from
    ``init_state``, ``step`` or a previous call; the structure, shapes and dtypes ``step``
    accepts, for u's batch shape; None: the zero state) and, with ``return_state=True``,
    returns ``(y, final_state)``, the final state in the dtypes of ``init_state`` for u's
    computation dtype. Carrying it from piece to piece gives the output and the final
    state of one pass (a long sequence streamed in chunks, a prompt read in one call before
    ``step``). The fast paths compute it without stepping: a convolutional layer adds the
    state's term ``C Ā^{ℓ+1} x₋₁`` to the convolution and contracts u against the powers of
    Ā for the final state; a scan layer starts its scan from the state. A bidirectional
    layer (and DSS-softmax, whose kernel is normalised over the whole length) refuses
    ``state`` and ``return_state`` (``layer.accepts_state`` is False)::

        >>> import jax, numpy as np
        >>> from flax import nnx
        >>> from annotated_ssm.layers import S4DLayer
        >>> layer = S4DLayer(4, 8, rngs=nnx.Rngs(0))
        >>> u = jax.random.normal(jax.random.key(1), (2, 100, 4))
        >>> y, final = layer(u, return_state=True)  # one pass
        >>> state, pieces = layer.init_state(2), []
        >>> for start in range(0, 100, 30):  # the same sequence in chunks of 30, 30, 30, 10
        ...     y_chunk, state = layer(u[:, start:start + 30], state=state, return_state=True)
        ...     pieces.append(y_chunk)
        >>> bool(np.allclose(np.concatenate(pieces, axis=1), y, atol=1e-5))
        True
        >>> bool(np.allclose(state, final, atol=1e-5))
        True
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import (
    check,
    check_batch_shape,
    check_bool,
    check_finite,
    check_positive_int,
    check_rngs,
    check_shape,
    check_step_bounds,
    check_tree,
    computation_dtypes,
)
from ..initialization import log_step_size
from ..kernels import bidirectional_conv, causal_conv

__all__ = [
    "SSMParam",
    "SSMLayer",
    "ConvolutionalSSMLayer",
    "complex_to_pair",
    "pair_to_complex",
    "complex_dtype",
    "diagonal_state_terms",
]


class SSMParam(nnx.Param):
    """A parameter of the state space itself: A (or Λ, P), B and log Δ.

    The papers train these with their own (smaller) learning rate and no weight decay;
    the training loop finds them with ``nnx.state(model, SSMParam)``. C, D and the
    position-wise layers are plain ``nnx.Param``.
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


# --- the dtype policy at the door -------------------------------------------------------------


def prepare_input(name: str, u, axes: tuple[str, ...]) -> tuple[jax.Array, np.dtype]:
    """(u in its computation dtype, the output dtype), after the finiteness check in the
    computation dtype (float64 1e39 is inf in float32). Host input (NumPy, Python) is cast
    and checked on the host, before it goes to the device; a device array on its device."""
    compute, output = computation_dtypes(name, u)
    return jnp.asarray(check_finite(name, u, compute, axes)), output


def compiled(layer: "SSMLayer", method: str, *args) -> Any:
    """``getattr(layer, method)(*args)`` as one compiled program when called eagerly.

    Op by op, a layer's first eager call would compile about a hundred small programs; one
    jit compiles once per shape. Under a transformation (tracers among the inputs or the
    parameters) the method is traced inline instead, not as a jit nested in the caller's.
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
    public methods, the dtype and bidirectional policies (see the module docstring)."""

    d_model: int
    state_size: int
    bidirectional: bool
    #: Whether ``layer(u, step_sizes=...)`` is allowed: a time-varying recurrence (S5) can
    #: take a step size per observation; a convolution cannot.
    takes_step_sizes: ClassVar[bool] = False

    # --- constructor pieces -------------------------------------------------------------

    def _init_contract(self, d_model, state_size, *, bidirectional, step_min, step_max, rngs,
                       even_state: str | None = None) -> None:
        """Check and store the arguments every layer shares (call it first).

        ``step_min``, ``step_max``: the bounds of the initial step size Δ.
        ``even_state``: if given, the state size must be even and this says why.
        """
        check_rngs(rngs)
        self.d_model = check_positive_int("d_model", d_model)
        self.state_size = check_positive_int("state_size", state_size)
        check("state_size", state_size, not (even_state and state_size % 2), f"be even ({even_state})")
        self.bidirectional = check_bool("bidirectional", bidirectional)
        self.step_min, self.step_max = check_step_bounds(step_min, step_max)

    def _init_log_step_size(self, rngs: nnx.Rngs, shape) -> None:
        """``log_step_size``: log Δ ~ U[log step_min, log step_max] of the given shape."""
        self.log_step_size = SSMParam(log_step_size(rngs.params(), shape, self.step_min, self.step_max))

    def _init_skip(self, rngs: nnx.Rngs) -> None:
        """``D``: the skip term y += D ⊙ u, (H,), N(0, 1) as in the S4, DSS, S4D and S5 code
        (Mamba's code starts S6 from D = 1; the book's S6 keeps N(0, 1), see chapter 9)."""
        self.D = nnx.Param(jax.random.normal(rngs.params(), (self.d_model,), jnp.float32))

    # --- parameters in a computation dtype ---------------------------------------------

    def step_sizes(self, dtype=None) -> jax.Array:
        """Δ = exp(log_step_size), of its shape; ``dtype``: the real dtype to compute in."""
        log_dt = self.log_step_size[...]
        return jnp.exp(log_dt if dtype is None else log_dt.astype(dtype))

    def _skip(self, dtype) -> jax.Array:
        return self.D[...].astype(dtype)

    # --- the whole sequence ----------------------------------------------------------------

    def __call__(self, u, step_sizes=None, *, state=None, return_state=False):
        """Apply the layer to a whole sequence.

        Args:
            u: (B, L, H) or (L, H), real (float, integer or bool; see the dtype policy).
            step_sizes: layers with ``takes_step_sizes`` only: the step size before each
                observation, in units of the training interval, scalar, (L,) or (B, L),
                every entry > 0.
            state: causal layers only: the state before the first step, from ``init_state``,
                ``step`` or a previous call, for u's batch shape (the rules of ``step``);
                None: the zero state.
            return_state: causal layers only: also return the state after the last step.

        Returns:
            y of u's shape: in u's dtype for floats, the default float dtype for integers/bools;
            with ``return_state``, ``(y, final_state)``, final_state as ``init_state`` makes
            it for u's batch shape and computation dtype.
        """
        u, out_dtype = self._check_input(u)
        step_sizes = self._check_step_sizes(step_sizes, u.shape[:-1], u.dtype)
        if state is None and not check_bool("return_state", return_state):
            return compiled(self, "_forward", u, step_sizes).astype(out_dtype)
        refusal = self._state_refusal()
        if refusal is not None:
            raise ValueError(refusal)
        if state is not None:
            state = self._cast_state(state, u.shape[:-2], u.dtype, "u")
        y, final_state = compiled(self, "_forward_state", u, step_sizes, state)
        y = y.astype(out_dtype)
        return (y, final_state) if return_state else y

    @property
    def accepts_state(self) -> bool:
        """Whether ``layer(u, state=..., return_state=True)`` is allowed (a causal layer)."""
        return self._state_refusal() is None

    def _state_refusal(self) -> str | None:
        """Why this layer cannot take or return a state in its call (one sentence), or None."""
        if self.bidirectional:
            return ("state and return_state need a causal layer (a state is carried forwards in "
                    "time); this layer was built with bidirectional=True, whose output at every "
                    "step depends on the whole sequence.")
        return None

    def _cast_state(self, state, batch_shape, dtype, input_name: str):
        """``state`` cast to the dtypes of ``init_state(batch_shape)`` for the computation
        ``dtype``, after checking that it has its structure, shapes and kinds of dtype (float32
        and float64 states both pass) and, where concrete, finite values."""
        expected = _abstract(self, "_init_state", batch_shape, dtype)
        check_tree("state", state, expected, f"this layer's state for {input_name}'s batch shape "
                   f"{batch_shape} (made by init_state({batch_shape}) or returned by step or a "
                   "call)", dtypes=True, batch=batch_shape)
        return jax.tree.map(lambda x, e: jnp.asarray(check_finite("state", x, e.dtype)), state,
                            expected)

    def _check_input(self, u) -> tuple[jax.Array, np.dtype]:
        check_shape("u", u, self.d_model)
        return prepare_input("u", u, ("batch", "time", "channel"))

    def _check_step_sizes(self, step_sizes, batch_length: tuple[int, ...], dtype) -> jax.Array | None:
        """None, or ``step_sizes`` checked against u's (..., L) and, after the cast to
        ``dtype``, finite and > 0."""
        if step_sizes is None:
            return None
        check("step_sizes", step_sizes, self.takes_step_sizes, f"be None for {type(self).__name__}, "
              "a time-invariant layer (its output is a convolution)", f"shape {np.shape(step_sizes)}")
        allowed = [(), batch_length[-1:], batch_length]
        check("step_sizes", step_sizes, np.shape(step_sizes) in allowed,
              f"have shape {' or '.join(map(str, dict.fromkeys(allowed)))} (one step size per "
              "observation)", f"shape {np.shape(step_sizes)}")
        return jnp.asarray(check_finite("step_sizes", step_sizes, dtype, ("batch", "time"), positive=True))

    def _forward(self, u: jax.Array, step_sizes: jax.Array | None = None) -> jax.Array:
        """y alone from the zero state: ``_forward_state``'s output unless a layer overrides it."""
        return self._forward_state(u, step_sizes, None)[0]

    # --- the recurrence ----------------------------------------------------------------------

    def _require_causal(self, method: str) -> None:
        if self.bidirectional:
            raise ValueError(
                f"{method} needs a causal layer (a recurrence runs forwards in time only); this layer "
                f"was built with bidirectional=True. Use layer(u) for the bidirectional output."
            )

    def discrete_system(self, length: int | None = None, *, step_sizes=None, dtype=None) -> Any:
        """Precompute the discrete recurrence for sequences of ``length`` steps.

        Args:
            length: L, an integer >= 1, or None for an unbounded sequence.
            step_sizes: layers with ``takes_step_sizes`` only: a scalar > 0, the step size
                (in units of the training interval) of every observation.
            dtype: a floating dtype; the system is computed in its computation dtype
                (float32 for float16/bfloat16; default: the default float dtype, float64
                under ``jax_enable_x64``).
        """
        self._require_causal("discrete_system")
        length = None if length is None else check_positive_int("length", length)
        dtype = computation_dtypes("dtype", dtype, kinds="f")[0]
        return self._discrete_system(length, dtype, self._check_step_sizes(step_sizes, (), dtype))

    def init_state(self, batch_shape=(), *, dtype=None) -> Any:
        """The zero state for a batch of sequences.

        Args:
            batch_shape: () for one sequence, an integer B or a tuple such as (B,).
            dtype: a floating dtype (for a layer with complex states also complex64 or
                complex128); the state is in its computation dtype (float32 for
                float16/bfloat16; default: the default float dtype), complex if the
                layer's state is.
        """
        self._require_causal("init_state")
        batch_shape = check_batch_shape("batch_shape", batch_shape)
        dtype = computation_dtypes("dtype", dtype, kinds="fc" if self._has_complex_state() else "f")[0]
        return self._init_state(batch_shape, dtype)

    def _has_complex_state(self) -> bool:
        leaves = jax.tree.leaves(_abstract(self, "_init_state", (), jnp.float32))
        return any(np.issubdtype(x.dtype, np.complexfloating) for x in leaves)

    def step(self, state, u_t, system=None):
        """Advance the recurrence one step.

        Args:
            state: from ``init_state`` or a previous ``step``, for u_t's batch shape and
                computation dtype; finite.
            u_t: (..., H) the input at this time step (dtype policy as ``layer(u)``).
            system: from ``discrete_system(L)``; computed for unbounded length if None.

        Returns:
            (new_state, y_t) with y_t of shape (..., H).
        """
        self._require_causal("step")
        check_shape("u_t", u_t, self.d_model, None, time=False)
        u_t, out_dtype = prepare_input("u_t", u_t, ("batch", "channel"))
        state = self._cast_state(state, u_t.shape[:-1], u_t.dtype, "u_t")
        if system is None:
            system = self._discrete_system(None, u_t.dtype, None)
        else:
            check_tree("system", system, _abstract(self, "_discrete_system", 1, jnp.float32, None),
                       f"this layer's discrete system (made by its discrete_system; d_model="
                       f"{self.d_model}, state_size={self.state_size})", structure_error=TypeError)
        state, y = self._step(system, state, u_t)
        return state, y.astype(out_dtype)

    def recurrent(self, u, step_sizes=None):
        """Run the recurrence step by step over u (B, L, H) or (L, H) (and ``step_sizes``, as
        in ``layer(u, step_sizes)``): y of u's shape, equal to ``layer(u, step_sizes)`` up to
        rounding."""
        self._require_causal("recurrent")
        u, out_dtype = self._check_input(u)
        step_sizes = self._check_step_sizes(step_sizes, u.shape[:-1], u.dtype)
        return compiled(self, "_recurrent", u, step_sizes).astype(out_dtype)

    def _recurrent(self, u: jax.Array, step_sizes: jax.Array | None = None) -> jax.Array:
        """The loop of ``recurrent``: one system for the whole sequence, or with ``step_sizes``
        one per observation (the batch of its time step, ``step_sizes[..., ℓ]``)."""
        if step_sizes is None:
            system = self._discrete_system(u.shape[-2], u.dtype, None)
            body = lambda state, u_t: self._step(system, state, u_t)  # noqa: E731
            xs = jnp.moveaxis(u, -2, 0)
        else:
            def body(state, inputs):
                u_t, s_t = inputs
                return self._step(self._discrete_system(None, u.dtype, s_t), state, u_t)

            step_sizes = jnp.broadcast_to(step_sizes, u.shape[:-1])
            xs = (jnp.moveaxis(u, -2, 0), jnp.moveaxis(step_sizes, -1, 0))
        _, y = jax.lax.scan(body, self._init_state(u.shape[:-2], u.dtype), xs)
        return jnp.moveaxis(y, 0, -2)



def _abstract(layer: SSMLayer, method: str, *args) -> Any:
    """Shapes and dtypes of ``getattr(layer, method)(*args)`` (hashable args), without computing it.

    Traced once per layer structure and arguments (jit's cache): a few hundred microseconds
    per call afterwards, where a fresh trace of S4's discrete system takes tens of ms."""
    graphdef, state = nnx.split(layer)
    return _method_of_static_args.eval_shape(graphdef, method, args, state)


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _method_of_static_args(graphdef, method, args, state):
    return getattr(nnx.merge(graphdef, state), method)(*args)


class ConvolutionalSSMLayer(SSMLayer):
    """H independent SISO SSMs applied by FFT convolution with a length-L kernel.

    Subclasses implement ``_kernel(length, dtype)``: shape (H, L), or (2, H, L) when
    bidirectional (the second kernel runs backwards in time), computed in the real ``dtype``;
    and ``_state_terms(u, state)``: ``(contribution, final_state)`` for u (..., L, H) from
    ``state`` (None: zero), the state's term of the output, y_ℓ += C Ā^{ℓ+1} x₋₁, (..., L, H)
    (None when state is None), and the state after the last step,
    ``Ā^L x₋₁ + Σ_j Ā^{L-1-j} B̄ u_j``.
    """

    def kernel(self, length: int, *, dtype=None) -> jax.Array:
        """K̄: (H, L), or (2, H, L) when bidirectional (the second one runs backwards).

        ``dtype``: a floating dtype, the kernel's dtype (default: the default float dtype,
        float32 or float64 under ``jax_enable_x64``); float16 and bfloat16 kernels are
        computed in float32 and rounded at the end, as the layer's output is."""
        length = check_positive_int("length", length)
        compute, output = computation_dtypes("dtype", dtype, kinds="f")
        return self._kernel(length, compute).astype(output)

    def _forward(self, u, step_sizes=None):
        """y = K̄ * u + D u per channel. u: (B, L, H) or (L, H) -> same shape."""
        K = self._kernel(u.shape[-2], u.dtype)
        channels_last = jnp.swapaxes(u, -1, -2)  # (..., H, L)
        if self.bidirectional:
            y = bidirectional_conv(channels_last, K[0], K[1])
        else:
            y = causal_conv(channels_last, K)
        return jnp.swapaxes(y, -1, -2) + self._skip(u.dtype) * u

    def _forward_state(self, u, step_sizes, state):
        """The convolution plus the state's term, and the final state, both in closed form
        (``_state_terms``): no step of the recurrence is taken."""
        contribution, final_state = self._state_terms(u, state)
        y = self._forward(u)
        return (y if contribution is None else y + contribution), final_state


def diagonal_state_terms(log_A_bar, B_bar, C, u, state, *, block_size: int | None = None):
    """The state terms of H diagonal SSMs ``x_ℓ = Ā ⊙ x_{ℓ-1} + B̄ u_ℓ``, ``y_ℓ = Re(C · x_ℓ)``,
    in closed form (Vandermonde products, the official S4's ``k_state`` for a diagonal Ā):

        contribution_ℓ = Re Σ_n C_n Ā_n^{ℓ+1} x₋₁,n                 (..., L, H)
        final state    = Ā^L ⊙ x₋₁ + B̄ ⊙ Σ_j Ā^{L-1-j} u_j            (..., H, N)

    Powers from their exponents, Ā^e = exp(e log Ā), in blocks as
    :func:`~annotated_ssm.kernels.vandermonde_kernel` does: with e = aT + b, a table of
    Ā^{aT} (L/T of them) and one of Ā^b (T of them), so neither term builds the H × N × L
    matrix of all powers; each is then a batch of matrix products.

    Args:
        log_A_bar: (H, N) complex, log Ā (any branch; accurate for Ā near 1 where the
            layer can give it, e.g. ΔA for ZOH).
        B_bar, C: (H, N) complex (C with the factor 2 of conjugate symmetry if any).
        u: (..., L, H) real.
        state: (..., H, N) complex x₋₁, or None (zero: no contribution, only the inputs).
        block_size: T; None: a power of two near √L.
    """
    L = u.shape[-2]
    cdtype = log_A_bar.dtype
    rdtype = jnp.finfo(cdtype).dtype
    T = block_size or 1 << ((L - 1).bit_length() + 1) // 2
    T = min(T, L)
    rows = -(-L // T)
    # A discrete eigenvalue exactly 0 has log -inf: clamp so that Ā^0 = 1 and Ā^e = 0 (e > 0).
    log_A_bar = jax.lax.complex(jnp.maximum(jnp.real(log_A_bar), -1000.0), jnp.imag(log_A_bar))

    def powers(exponents):  # (E,) -> Ā^e (H, N, E)
        return jnp.exp(log_A_bar[..., None] * exponents.astype(rdtype))

    inner, outer = powers(jnp.arange(T)), powers(jnp.arange(rows) * T)  # Ā^b, Ā^{aT}
    highest = jax.lax.Precision.HIGHEST
    # Final state: Σ_j Ā^{L-1-j} u_j = Σ_a Ā^{aT} Σ_b Ā^b w_{aT+b}, w the reversed input.
    w = jnp.flip(jnp.swapaxes(u, -1, -2), -1)  # (..., H, L): w_r = u_{L-1-r}
    w = jnp.pad(w, [(0, 0)] * (w.ndim - 1) + [(0, rows * T - L)]).reshape(w.shape[:-1] + (rows, T))
    inside = jnp.einsum("...hab,hnb->...han", w.astype(cdtype), inner, precision=highest)
    final = B_bar * jnp.einsum("...han,hna->...hn", inside, outer, precision=highest)
    if state is None:
        return None, final
    final = final + jnp.exp(log_A_bar * jnp.asarray(L, rdtype)) * state
    # Contribution: Re Σ_n (C_n x₋₁,n Ā_n) Ā_n^{aT} Ā_n^b at ℓ = aT + b.
    weights = C * jnp.exp(log_A_bar) * state  # (..., H, N)
    rows_weights = weights[..., None] * outer  # (..., H, N, rows)
    y = jnp.real(jnp.einsum("...hna,hnb->...hab", rows_weights, inner, precision=highest))
    y = y.reshape(y.shape[:-2] + (rows * T,))[..., :L]  # (..., H, L)
    return jnp.swapaxes(y, -1, -2), final
