"""S4D: a diagonal state space per channel, its kernel a Vandermonde product.

Each of the H channels runs its own SISO SSM with a diagonal, complex state matrix
(Gu, Gupta, Goel and Ré, 2022)::

    A = -exp(log_A_real) + i A_imag   (or softplus instead of exp; "none" leaves Re A free, as DSS)
    K̄_ℓ = 2·Re Σ_n C_n B̄_n Ā_n^ℓ      (N/2 complex states: one of each conjugate pair)
    y = K̄ * u + D u

The kernel is :func:`annotated_ssm.kernels.vandermonde_kernel`; the recurrent view is the
same diagonal system stepped one sample at a time (:func:`diagonal_step`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check, check_bool, check_choice, check_real_in
from ..discretize import METHODS, discretize_diagonal
from ..initialization import DIAGONAL_INIT_OPTIONS, DIAGONAL_INITS, diagonal_init
from ..kernels import vandermonde_kernel
from .base import (
    ConvolutionalSSMLayer,
    SSMParam,
    complex_dtype,
    complex_to_pair,
    diagonal_state_terms,
    pair_to_complex,
)

__all__ = ["S4DLayer", "REAL_TRANSFORMS", "REAL_PARAMETERS", "DiagonalSystem", "diagonal_step"]


class DiagonalSystem(NamedTuple):
    """A discrete diagonal SSM per channel: x ← Ā ⊙ x + B̄ u,  y = Re(Σ_n C_n x_n).

    With conjugate symmetry, C already carries the factor 2 (y = 2·Re of the kept half).
    Shapes: (H, N) each, complex (real for S4D-Real).
    """

    A_bar: jax.Array
    B_bar: jax.Array
    C: jax.Array


def diagonal_step(system: DiagonalSystem, state: jax.Array, u_t: jax.Array, D: jax.Array):
    """One step of H diagonal SSMs. state: (..., H, N); u_t: (..., H) real; D: (H,)."""
    state = system.A_bar * state + system.B_bar * u_t[..., None]
    y = jnp.real(jnp.sum(system.C * state, axis=-1)) + D * u_t
    return state, y

#: real_transform -> the parameter holding the real part of A, named after what it stores:
#: log(-Re A), softplus⁻¹(-Re A), or Re A itself.
_DEFAULT_INIT_OPTIONS = {"real_part": -0.5, "imag_scale": 1.0, "random_real": False, "random_imag": False}


def _init_options(init: str, init_options) -> dict:
    """``init_options``, the keyword arguments of :func:`~annotated_ssm.initialization.diagonal_init`,
    checked at the layer's door (diagonal_init trusts its caller): known keys, bool flags,
    real_part < 0 and imag_scale >= 0 real numbers, and only where they apply."""
    if init_options is None:
        return {}
    if not isinstance(init_options, dict):
        raise TypeError(f"init_options must be a dict or None; got {type(init_options).__name__} "
                        f"{init_options!r}.")
    options = dict(init_options)
    for key, value in options.items():
        check_choice("init_options key", key, DIAGONAL_INIT_OPTIONS)
        if key.startswith("random_"):
            options[key] = check_bool(f"init_options[{key!r}]", value)
        elif key == "real_part":  # < 0: a stable SSM
            options[key] = check_real_in(key, value, -np.inf, 0.0, closed_high=False)
        else:
            options[key] = check_real_in(key, value, 0.0)
    changed = {key: value for key, value in options.items() if value != _DEFAULT_INIT_OPTIONS[key]}
    check("init_options", changed, not (changed and init == "real" or options.get("random_imag")
                                        and init in ("legs", "rand")),
          f"apply to init={init!r} (S4D-Real takes none; random_imag applies to inv, lin, inv2, quad)")
    return options


REAL_PARAMETERS = {"exp": "log_A_real", "softplus": "inv_softplus_A_real", "none": "A_real"}
REAL_TRANSFORMS = tuple(REAL_PARAMETERS)


class S4DLayer(ConvolutionalSSMLayer):
    """H independent diagonal SSMs of state size N, applied by FFT convolution.

    Args:
        d_model: H, the number of channels.
        state_size: N, the state size of each (real) SSM. The complex initialisations keep
            N/2 complex states (N must be even); ``init="real"`` keeps N real ones.
        bidirectional: a second kernel (its own C, shared A, B, Δ) runs backwards in time.
        step_min, step_max: bounds of the log-uniform initial step size Δ, one per channel.
        init: a name from :data:`annotated_ssm.initialization.DIAGONAL_INITS` ("legs" is S4D-LegS,
            the diagonal of DSS).
        init_options: extra keyword arguments of :func:`annotated_ssm.initialization.diagonal_init`
            (``real_part``, ``imag_scale``, ``random_real``, ``random_imag``), for ablations.
        discretization: "bilinear" (the S4D paper's default, as S4), "zoh" (as DSS) or
            "euler" (:data:`annotated_ssm.discretize.METHODS`).
        real_transform: how the trained parameter gives Re A, and so its name
            (:data:`REAL_PARAMETERS`): "exp" (``log_A_real``, Re A = -exp(log_A_real), the
            default), "softplus" (``inv_softplus_A_real``, Re A = -softplus(inv_softplus_A_real))
            or "none" (``A_real``, Re A = A_real, free).
        train_B: if False, B stays at its initial value 1 (DSS's choice); it is then not a
            parameter at all.
        rngs: nnx.Rngs; uses ``rngs.params()``.

    Parameters (M = N/2, or N for ``init="real"``): the real part of A (H, M) (named by
    ``real_transform``, above), ``A_imag`` = Im A (H, M), ``B`` (H, M, 2) and ``log_step_size``
    = log Δ (H,) are :class:`SSMParam`; ``C`` (H, M, 2), or (2, H, M, 2) when
    bidirectional, and ``D`` (H,) are ``nnx.Param``. Complex numbers are stored as (real,
    imaginary) pairs. C is complex normal with E|C|² = 1 (S4's "standard deviation 1").

    Example: the convolution and the recurrence give the same output::

        >>> import jax, numpy as np
        >>> from flax import nnx
        >>> from annotated_ssm.layers import S4DLayer
        >>> layer = S4DLayer(4, 8, rngs=nnx.Rngs(0))
        >>> u = jax.random.normal(jax.random.key(1), (2, 32, 4))
        >>> y = layer(u)
        >>> y.shape, bool(np.allclose(layer.recurrent(u), y, atol=1e-5))
        ((2, 32, 4), True)
    """

    def __init__(
        self,
        d_model: int,
        state_size: int = 64,
        *,
        bidirectional: bool = False,
        step_min: float = 1e-3,
        step_max: float = 1e-1,
        init: str = "legs",
        init_options: dict | None = None,
        discretization: str = "bilinear",
        real_transform: str = "exp",
        train_B: bool = True,
        rngs: nnx.Rngs,
    ):
        self.conjugate = init != "real"  # S4D-Real is a real SSM: N real states, no conjugate pairs
        self._init_contract(
            d_model, state_size, bidirectional=bidirectional, step_min=step_min, step_max=step_max,
            rngs=rngs, even_state="N/2 complex states, one of each conjugate pair" if self.conjugate else None,
        )
        H, N = self.d_model, self.state_size
        self.init = check_choice("init", init, DIAGONAL_INITS)
        self.discretization = check_choice("discretization", discretization, METHODS)
        self.real_transform = check_choice("real_transform", real_transform, REAL_TRANSFORMS)
        train_B = check_bool("train_B", train_B)
        options = _init_options(init, init_options)
        random = init == "rand" or options.get("random_real") or options.get("random_imag")
        if random:  # a different random draw per channel, as in the reference implementation
            keys = jax.random.split(rngs.params(), H)
            A = np.stack([diagonal_init(init, N, key=k, **options) for k in keys])
        else:
            A = np.broadcast_to(diagonal_init(init, N, **options), (H, (N // 2) if self.conjugate else N))
        M = A.shape[-1]
        real = SSMParam(jnp.asarray(self._inverse_transform(-A.real), jnp.float32))
        setattr(self, REAL_PARAMETERS[self.real_transform], real)
        self.A_imag = SSMParam(jnp.asarray(A.imag, jnp.float32))
        B = complex_to_pair(np.ones((H, M), np.complex64))
        self.B = SSMParam(B) if train_B else nnx.Variable(B)
        self._init_log_step_size(rngs, (H,))
        C_shape = (2, H, M) if self.bidirectional else (H, M)
        # Complex normal with E|C|² = 1: real and imaginary parts each N(0, 1/2).
        C = jax.random.normal(rngs.params(), C_shape + (2,), jnp.float32) * np.float32(np.sqrt(0.5))
        self.C = nnx.Param(C)
        self._init_skip(rngs)

    def _inverse_transform(self, minus_real: np.ndarray) -> np.ndarray:
        """The stored real parameter whose transform gives back -Re A = ``minus_real`` (> 0)."""
        if self.real_transform == "exp":
            return np.log(minus_real)
        if self.real_transform == "softplus":
            return np.log(np.expm1(minus_real))
        return -minus_real

    # --- continuous-time parameters ---------------------------------------------------

    def eigenvalues(self, dtype=None) -> jax.Array:
        """A (H, M) complex: the diagonal state matrices of the H channels. ``dtype``: the
        real dtype to compute in (default: the parameters')."""
        stored = getattr(self, REAL_PARAMETERS[self.real_transform])[...]
        stored, imag = (x if dtype is None else x.astype(dtype) for x in (stored, self.A_imag[...]))
        if self.real_transform == "exp":
            real = -jnp.exp(stored)
        elif self.real_transform == "softplus":
            real = -jax.nn.softplus(stored)
        else:
            real = stored
        return jax.lax.complex(real, imag)

    # --- convolution view -------------------------------------------------------------

    def _kernel(self, length, dtype) -> jax.Array:
        """K̄: (H, L), or (2, H, L) when bidirectional (the second one runs backwards)."""
        return vandermonde_kernel(
            self.eigenvalues(dtype), pair_to_complex(self.B[...], dtype), pair_to_complex(self.C[...], dtype),
            self.step_sizes(dtype)[:, None], length, method=self.discretization, conjugate=self.conjugate,
        )

    # --- recurrent view ---------------------------------------------------------------

    def _discrete_system(self, length, dtype, step_sizes=None) -> DiagonalSystem:
        """Ā, B̄, C (H, M) complex; C carries the factor 2 of conjugate symmetry.

        S4D parameterises C directly (no C̃ = C(I - Ā^L) as S4), so ``length`` is unused.
        """
        A_bar, B_bar = discretize_diagonal(
            self.eigenvalues(dtype), pair_to_complex(self.B[...], dtype), self.step_sizes(dtype)[:, None],
            self.discretization,
        )
        C = pair_to_complex(self.C[...], dtype)
        return DiagonalSystem(A_bar, B_bar, 2 * C if self.conjugate else C)

    def _state_terms(self, u, state):
        """The state's term and the final state by Vandermonde products
        (:func:`~annotated_ssm.layers.base.diagonal_state_terms`), with log Ā from ΔA directly
        (ZOH: ΔA; bilinear: 2 artanh(ΔA/2); Euler: log(1 + ΔA)), accurate where Ā is near 1."""
        A_bar, B_bar, C = self._discrete_system(None, u.dtype)
        dtA = self.eigenvalues(u.dtype) * self.step_sizes(u.dtype)[:, None]
        if self.discretization == "zoh":
            log_A_bar = dtA
        elif self.discretization == "bilinear":
            log_A_bar = 2 * jnp.arctanh(dtA / 2)
        else:
            log_A_bar = jnp.log1p(dtA)
        # Where Ā is exactly 0 (bilinear ΔA = -2, Euler ΔA = -1) the log is -inf: taken from Ā.
        log_A_bar = jnp.where(A_bar == 0, -jnp.inf, log_A_bar)
        return diagonal_state_terms(log_A_bar, B_bar, C, u, state)

    def _init_state(self, batch_shape, dtype) -> jax.Array:
        """Zero state (*batch_shape, H, M), complex of ``dtype``'s precision."""
        return jnp.zeros(batch_shape + tuple(self.A_imag.shape), complex_dtype(dtype))

    def _step(self, system: DiagonalSystem, state, u_t):
        return diagonal_step(system, state, u_t, self._skip(u_t.dtype))
