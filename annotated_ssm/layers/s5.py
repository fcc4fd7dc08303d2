"""S5: one multi-input, multi-output (MIMO) diagonal SSM computed with a parallel scan.

Where S4, DSS and S4D run H independent single-input SSMs of size N each (and convolve),
S5 runs a single SSM with state size P that reads all H channels and writes all H
channels (Smith, Warrington and Linderman, 2023)::

    x_ℓ = Λ̄ ⊙ x_{ℓ-1} + B̄ u_ℓ          Λ̄ = exp(ΛΔ),  B̄ = (Λ̄ - 1)/Λ · B̃   (ZOH, row-wise)
    y_ℓ = 2·Re(C̃ x_ℓ) + D ⊙ u_ℓ        (conjugate symmetry: P/2 complex states kept)

Λ is diagonal, so the recurrence is a diagonal linear recurrence and
:func:`annotated_ssm.scan.parallel_scan` computes all the states in O(log L) depth.

Time-varying steps. ``layer(u, steps=s)`` takes the time elapsed before each observation,
``s_ℓ > 0`` in units of the training sampling interval, and discretises observation ℓ with
``Δ_{ℓ,p} = s_ℓ · Δ_p`` (each state keeps its own learned timescale Δ_p; the observation
time only stretches it). ``s ≡ 1`` is the ordinary layer; ``s ≡ 2`` is the same model
run on data sampled at half the rate (the zero-shot rate change of the paper); random
``s`` handles irregularly sampled observations. A convolution kernel cannot do this: the
recurrence is no longer time invariant, but the scan does not care.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check_choice, check_positive_finite, check_positive_int
from ..discretize import discretize_diagonal
from ..init import log_step, s5_init
from ..scan import parallel_scan
from .base import SSMLayer, SSMParam, check_sequence_input

__all__ = ["S5Layer", "S5System", "ACTIVATIONS"]

ACTIVATIONS = ("none", "gelu", "half_glu", "full_glu")
DISCRETIZATIONS = ("zoh", "bilinear")


class S5System(NamedTuple):
    """The discrete S5 recurrence for one step size: x ← Λ̄ ⊙ x + B̄ u,  y = Re(C x).

    Shapes: Lambda_bar (P',), B_bar (P', H), C (H, P'), complex. With conjugate symmetry C
    already carries the factor 2.
    """

    Lambda_bar: jax.Array
    B_bar: jax.Array
    C: jax.Array


def _to_real(z) -> jax.Array:
    """Complex array -> float32 array with a trailing (real, imaginary) axis of size 2."""
    z = jnp.asarray(z)
    return jnp.stack([z.real, z.imag], axis=-1).astype(jnp.float32)


def _to_complex(x) -> jax.Array:
    return jax.lax.complex(x[..., 0], x[..., 1])


class S5Layer(SSMLayer):
    """One MIMO SSM with P states (P/2 complex ones with conjugate symmetry), via a parallel scan.

    Args:
        d_model: H, channels in and out.
        state_size: P, the state size of the (real) system; with ``conj_sym`` the layer
            stores P/2 complex states.
        blocks: J, the number of HiPPO-N blocks of the initialisation (P/J each).
        bidirectional: add a second scan running backwards in time (its own half of C̃,
            shape H × 2P' in total); the layer is then non-causal and has no ``step``.
        step_min, step_max: range of the log-uniform initial Δ, one per state.
        discretization: "zoh" (default, as in the paper) or "bilinear".
        conj_sym: keep one state of each conjugate pair and output 2·Re(C̃x).
        activation: applied to ``y + Du`` inside the layer, in both the scan and ``step``:
            "none" (default, the shared layer interface: model.py adds GELU/GLU and mixing),
            "gelu", "half_glu" (the paper's gate GELU(y) ⊙ σ(W·GELU(y))) or "full_glu"
            ((W₁g) ⊙ σ(W₂g), g = GELU(y)).
        rngs: nnx.Rngs; uses ``rngs.params()``.

    Parameters: ``Lambda`` (P', 2), ``B_tilde`` (P', H, 2), ``log_step`` (P',) are
    :class:`SSMParam`; ``C_tilde`` (H, P' or 2P', 2) and ``D`` (H,) are ``nnx.Param``
    (complex numbers stored as (real, imaginary) pairs).
    """

    def __init__(
        self,
        d_model: int,
        state_size: int = 64,
        *,
        blocks: int = 1,
        bidirectional: bool = False,
        step_min: float = 1e-3,
        step_max: float = 1e-1,
        discretization: str = "zoh",
        conj_sym: bool = True,
        activation: str = "none",
        rngs: nnx.Rngs,
    ):
        self.d_model = check_positive_int("d_model", d_model)
        self.state_size = check_positive_int("state_size", state_size)
        self.blocks = check_positive_int("blocks", blocks)
        self.bidirectional = bool(bidirectional)
        self.discretization = check_choice("discretization", discretization, DISCRETIZATIONS)
        self.conj_sym = bool(conj_sym)
        self.activation = check_choice("activation", activation, ACTIVATIONS)

        init = s5_init(rngs.params(), d_model, state_size, blocks, conj_sym=conj_sym, bidirectional=bidirectional)
        self.Lambda = SSMParam(_to_real(init.Lambda))
        self.B_tilde = SSMParam(_to_real(init.B_tilde))
        self.log_step = SSMParam(log_step(rngs.params(), init.Lambda.shape, step_min, step_max))
        self.C_tilde = nnx.Param(_to_real(init.C_tilde))
        self.D = nnx.Param(jax.random.normal(rngs.params(), (d_model,), jnp.float32))
        if activation == "half_glu":
            self.gate = nnx.Linear(d_model, d_model, rngs=rngs)
        elif activation == "full_glu":
            self.value = nnx.Linear(d_model, d_model, rngs=rngs)
            self.gate = nnx.Linear(d_model, d_model, rngs=rngs)

    # --- continuous-time parameters ---------------------------------------------------

    def eigenvalues(self) -> jax.Array:
        """Λ (P',) complex. The real part is kept ≤ -1e-4 so that training cannot make the
        system unstable (|Λ̄| < 1 for every Δ > 0); at initialisation it is -1/2."""
        Lambda = _to_complex(self.Lambda[...])
        return jax.lax.complex(jnp.minimum(Lambda.real, -1e-4), Lambda.imag)

    def step_sizes(self) -> jax.Array:
        """Δ (P',): one timescale per state."""
        return jnp.exp(self.log_step[...])

    def _discretize(self, step):
        """Λ̄ and the row factor f with B̄ = f ⊙ B̃ (row-wise), for Δ broadcast against Λ."""
        # With B = 1 the diagonal discretisation returns exactly the factor f of each row.
        return discretize_diagonal(self.eigenvalues(), 1.0, step, self.discretization)

    def _output_matrix(self) -> jax.Array:
        """C̃ (H, P' or 2P') with the factor 2 of conjugate symmetry folded in."""
        C = _to_complex(self.C_tilde[...])
        return 2 * C if self.conj_sym else C

    # --- full sequence: parallel scan -------------------------------------------------

    def __call__(self, u, steps=None):
        """Apply the layer to a whole sequence.

        Args:
            u: (B, L, H) or (L, H) real.
            steps: optional time elapsed before each observation, in units of the regular
                sampling interval: scalar, (L,) or (B, L), every entry > 0. Observation ℓ
                is discretised with Δ_{ℓ,p} = steps_ℓ · Δ_p. None means all ones.

        Returns:
            y: same shape and dtype as u.
        """
        check_sequence_input(u, self.d_model)
        u = jnp.asarray(u)
        L = u.shape[-2]
        step = self.step_sizes()
        # The per-observation scale of Δ, shaped to broadcast against (..., L, P'):
        # (1,) for a scalar, (L, 1) for a sequence shared by the batch, (B, L, 1) per sequence.
        scale = None if steps is None else self._check_steps(steps, u.shape[:-1])[..., None]
        Lambda_bar, factor = self._discretize(step if scale is None else scale * step)
        # B̃u for every time step, before any Δ enters: (..., L, P').
        Bu = jnp.einsum("...lh,ph->...lp", u.astype(jnp.complex64), _to_complex(self.B_tilde[...]))
        x = self._scan(Lambda_bar, factor * Bu, reverse=False)
        C = self._output_matrix()
        P = Lambda_bar.shape[-1]
        y = jnp.einsum("hp,...lp->...lh", C[:, :P], x).real
        if self.bidirectional:
            if scale is not None and scale.ndim >= 2 and L > 1:
                # Backwards, state ℓ decays over the interval to observation ℓ+1.
                scale = jnp.concatenate([scale[..., 1:, :], scale[..., -1:, :]], axis=-2)
                Lambda_bar, factor = self._discretize(scale * step)
            x_back = self._scan(Lambda_bar, factor * Bu, reverse=True)
            y = y + jnp.einsum("hp,...lp->...lh", C[:, P:], x_back).real
        return self._activate(y.astype(u.dtype) + self.D[...] * u)

    @staticmethod
    @functools.partial(jax.jit, static_argnames="reverse")
    def _scan(a, b, reverse: bool):
        """States of x_ℓ = a_ℓ x_{ℓ∓1} + b_ℓ with time on axis -2 of b (a broadcasts).

        Jitted on its own so that eager calls (notebooks, tests) compile the scan's many
        small slicing operations once per shape instead of dispatching them one by one."""
        a = jnp.broadcast_to(a, b.shape)
        x = parallel_scan(jnp.moveaxis(a, -2, 0), jnp.moveaxis(b, -2, 0), reverse=reverse)
        return jnp.moveaxis(x, 0, -2)

    def _check_steps(self, steps, batch_length: tuple[int, ...]) -> jax.Array:
        """Validate ``steps`` against u's (..., L) and return it as a float array."""
        L = batch_length[-1]
        shape = np.shape(steps)
        allowed = [(), (L,), batch_length]
        if shape not in allowed:
            spelled = ", ".join(str(s) for s in dict.fromkeys(allowed))
            raise ValueError(
                f"steps must have shape {spelled} to match u of shape {batch_length + (self.d_model,)} "
                f"(one step per observation); got shape {shape}."
            )
        check_positive_finite("steps", steps)
        return jnp.asarray(steps, jnp.float32)

    def _activate(self, y):
        if self.activation == "none":
            return y
        g = jax.nn.gelu(y)
        if self.activation == "gelu":
            return g
        if self.activation == "half_glu":
            return g * jax.nn.sigmoid(self.gate(g))
        return self.value(g) * jax.nn.sigmoid(self.gate(g))

    # --- recurrent mode -----------------------------------------------------------------

    def discrete_system(self, length: int | None = None, steps=None) -> S5System:
        """Λ̄ (P',), B̄ (P', H), C (H, P') for the layer's own Δ (times ``steps``, a scalar,
        if given). ``length`` is not needed by a recurrence; it is accepted for the shared
        interface."""
        step = self.step_sizes() if steps is None else steps * self.step_sizes()
        Lambda_bar, factor = self._discretize(step)
        B_bar = factor[:, None] * _to_complex(self.B_tilde[...])
        return S5System(Lambda_bar, B_bar, self._output_matrix()[:, : Lambda_bar.shape[-1]])

    def impulse_response(self, length: int) -> jax.Array:
        """The MIMO kernel K̄_ℓ = Re(C Λ̄^ℓ B̄), shape (length, H_out, H_in), of a causal layer.

        ``layer(u)`` equals the causal convolution of u with it plus ``D ⊙ u`` (before any
        activation): S5 is still a convolution, just one with an H×H matrix per lag.
        """
        length = check_positive_int("length", length)
        if self.bidirectional:
            raise ValueError("impulse_response needs a causal layer; this layer was built with bidirectional=True.")
        system = self.discrete_system(length)
        powers = system.Lambda_bar[None, :] ** jnp.arange(length)[:, None]  # (L, P')
        return jnp.einsum("hp,lp,pk->lhk", system.C, powers, system.B_bar).real

    def init_state(self, batch_shape: tuple[int, ...] = ()) -> jax.Array:
        """Zero state (*batch_shape, P') complex64."""
        return jnp.zeros(tuple(batch_shape) + (self.Lambda.shape[0],), jnp.complex64)

    def _step(self, system: S5System, state, u_t):
        state = system.Lambda_bar * state + jnp.einsum("ph,...h->...p", system.B_bar, u_t.astype(jnp.complex64))
        return state, self._readout(system.C, state, u_t)

    def _readout(self, C, state, u_t):
        """y_t = Re(C x_t) + D u_t (then the activation). C: (H, P'), state: (..., P')."""
        y = jnp.einsum("hp,...p->...h", C, state).real.astype(u_t.dtype) + self.D[...] * u_t
        return self._activate(y)

    def recurrent(self, u, steps=None):
        """Run the recurrence step by step over u (B, L, H) or (L, H), optionally with
        per-observation ``steps`` (as in ``__call__``): the online counterpart of
        ``layer(u, steps)``. Without ``steps`` this is the base class's loop over ``step``."""
        if steps is None:
            return super().recurrent(u)
        check_sequence_input(u, self.d_model)
        if self.bidirectional:
            raise ValueError("recurrent needs a causal layer; this layer was built with bidirectional=True.")
        u = jnp.asarray(u)
        scale = jnp.broadcast_to(self._check_steps(steps, u.shape[:-1]), u.shape[:-1])
        B_tilde = _to_complex(self.B_tilde[...])
        C = self.discrete_system().C

        def body(state, inputs):
            u_t, s_t = inputs  # (..., H), (...)
            # A fresh discretisation for this observation's interval: Δ_p · s_t.
            Lambda_bar, factor = self._discretize(s_t[..., None] * self.step_sizes())
            state = Lambda_bar * state + factor * jnp.einsum("ph,...h->...p", B_tilde, u_t.astype(jnp.complex64))
            return state, self._readout(C, state, u_t)

        time_major = (jnp.moveaxis(u, -2, 0), jnp.moveaxis(scale, -1, 0))
        _, y = jax.lax.scan(body, self.init_state(u.shape[:-2]), time_major)
        return jnp.moveaxis(y, 0, -2)
