"""S4D: a diagonal state space per channel, its kernel a Vandermonde product.

Each of the H channels runs its own SISO SSM with a diagonal, complex state matrix
(Gu, Gupta, Goel and Ré, 2022)::

    A = -exp(A_re) + i A_im      (or softplus instead of exp; "none" leaves Re A free, as DSS)
    K̄_ℓ = 2·Re Σ_n C_n B̄_n Ā_n^ℓ      (N/2 complex states: one of each conjugate pair)
    y = K̄ * u + D u

The kernel is :func:`annotated_ssm.kernels.vandermonde_kernel`; the recurrent view is the
same diagonal system stepped one sample at a time (:func:`annotated_ssm.layers.base.diagonal_step`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check_choice, check_positive_int
from ..discretize import discretize_diagonal
from ..init import DIAGONAL_INITS, diagonal_init, log_step
from ..kernels import vandermonde_kernel
from .base import ConvolutionalSSMLayer, DiagonalSystem, SSMParam, diagonal_step

__all__ = ["S4DLayer", "REAL_TRANSFORMS", "DISCRETIZATIONS"]

REAL_TRANSFORMS = ("exp", "softplus", "none")
DISCRETIZATIONS = ("bilinear", "zoh")


def _to_real(z) -> jax.Array:
    """Complex array -> float32 array with a trailing (real, imaginary) axis of size 2."""
    z = jnp.asarray(z)
    return jnp.stack([z.real, z.imag], axis=-1).astype(jnp.float32)


def _to_complex(x) -> jax.Array:
    return jax.lax.complex(x[..., 0], x[..., 1])


class S4DLayer(ConvolutionalSSMLayer):
    """H independent diagonal SSMs of state size N, applied by FFT convolution.

    Args:
        d_model: H, the number of channels.
        state_size: N, the state size of each (real) SSM. The complex initialisations keep
            N/2 complex states (N must be even); ``init="real"`` keeps N real ones.
        bidirectional: a second kernel (its own C, shared A, B, Δ) runs backwards in time.
        step_min, step_max: range of the log-uniform initial Δ, one per channel.
        init: a name from :data:`annotated_ssm.init.DIAGONAL_INITS` ("legs" is S4D-LegS,
            the diagonal of DSS).
        init_options: extra keyword arguments of :func:`annotated_ssm.init.diagonal_init`
            (``real_part``, ``imag_scale``, ``random_real``, ``random_imag``), for ablations.
        discretization: "bilinear" (the S4D paper's default, as S4) or "zoh" (as DSS).
        real_transform: how the trained parameter A_re gives Re A: "exp" (Re A = -exp(A_re),
            the default), "softplus" (Re A = -softplus(A_re)) or "none" (Re A = A_re, free).
        train_B: if False, B stays at its initial value 1 (DSS's choice); it is then not a
            parameter at all.
        rngs: nnx.Rngs; uses ``rngs.params()``.

    Parameters (M = N/2, or N for ``init="real"``): ``A_re``, ``A_im`` (H, M), ``B`` (H, M, 2)
    and ``log_step`` (H,) are :class:`SSMParam`; ``C`` (H, M, 2), or (2, H, M, 2) when
    bidirectional, and ``D`` (H,) are ``nnx.Param``. Complex numbers are stored as (real,
    imaginary) pairs. C is complex normal with E|C|² = 1 (S4's "standard deviation 1").
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
        self.d_model = H = check_positive_int("d_model", d_model)
        self.state_size = N = check_positive_int("state_size", state_size)
        self.bidirectional = bool(bidirectional)
        self.init = check_choice("init", init, DIAGONAL_INITS)
        self.discretization = check_choice("discretization", discretization, DISCRETIZATIONS)
        self.real_transform = check_choice("real_transform", real_transform, REAL_TRANSFORMS)
        # S4D-Real is a real SSM: N real states, no conjugate pairs.
        self.conjugate = init != "real"
        if self.conjugate and N % 2:
            raise ValueError(
                f"state_size must be even for init={init!r} (N/2 complex states, one of each conjugate "
                f"pair); got state_size={N}."
            )
        options = dict(init_options or {})
        random = init == "rand" or options.get("random_real") or options.get("random_imag")
        if random:  # a different random draw per channel, as in the reference implementation
            keys = jax.random.split(rngs.params(), H)
            A = np.stack([diagonal_init(init, N, key=k, **options) for k in keys])
        else:
            A = np.broadcast_to(diagonal_init(init, N, **options), (H, (N // 2) if self.conjugate else N))
        M = A.shape[-1]
        self.A_re = SSMParam(jnp.asarray(self._inverse_transform(-A.real), jnp.float32))
        self.A_im = SSMParam(jnp.asarray(A.imag, jnp.float32))
        B = jnp.ones((H, M), jnp.complex64)
        self.B = SSMParam(_to_real(B)) if train_B else nnx.Variable(_to_real(B))
        self.log_step = SSMParam(log_step(rngs.params(), (H,), step_min, step_max))
        C_shape = (2, H, M) if self.bidirectional else (H, M)
        # Complex normal with E|C|² = 1: real and imaginary parts each N(0, 1/2).
        C = jax.random.normal(rngs.params(), C_shape + (2,), jnp.float32) * np.sqrt(0.5)
        self.C = nnx.Param(C)
        self.D = nnx.Param(jax.random.normal(rngs.params(), (H,), jnp.float32))

    def _inverse_transform(self, minus_real: np.ndarray) -> np.ndarray:
        """A_re such that the transform gives back -Re A = ``minus_real`` (> 0)."""
        if self.real_transform == "exp":
            return np.log(minus_real)
        if self.real_transform == "softplus":
            return np.log(np.expm1(minus_real))
        return -minus_real

    # --- continuous-time parameters ---------------------------------------------------

    def eigenvalues(self) -> jax.Array:
        """A (H, M) complex: the diagonal state matrices of the H channels."""
        A_re = self.A_re[...]
        if self.real_transform == "exp":
            real = -jnp.exp(A_re)
        elif self.real_transform == "softplus":
            real = -jax.nn.softplus(A_re)
        else:
            real = A_re
        return jax.lax.complex(real, self.A_im[...])

    def step_sizes(self) -> jax.Array:
        """Δ (H,): one timescale per channel."""
        return jnp.exp(self.log_step[...])

    # --- convolution view -------------------------------------------------------------

    def kernel(self, length: int) -> jax.Array:
        """K̄: (H, L), or (2, H, L) when bidirectional (the second one runs backwards)."""
        return vandermonde_kernel(
            self.eigenvalues(), _to_complex(self.B[...]), _to_complex(self.C[...]), self.step_sizes()[:, None],
            length, method=self.discretization, conjugate=self.conjugate,
        )

    # --- recurrent view ---------------------------------------------------------------

    def discrete_system(self, length: int | None = None) -> DiagonalSystem:
        """Ā, B̄, C (H, M) complex; C carries the factor 2 of conjugate symmetry.

        S4D parameterises C directly (no C̃ = C(I - Ā^L) as S4), so ``length`` is unused.
        """
        A_bar, B_bar = discretize_diagonal(
            self.eigenvalues(), _to_complex(self.B[...]), self.step_sizes()[:, None], self.discretization
        )
        C = _to_complex(self.C[...])
        return DiagonalSystem(A_bar, B_bar, 2 * C if self.conjugate else C)

    def init_state(self, batch_shape: tuple[int, ...] = ()) -> jax.Array:
        """Zero state (*batch_shape, H, M) complex64."""
        return jnp.zeros(tuple(batch_shape) + tuple(self.A_im.shape), jnp.complex64)

    def _step(self, system: DiagonalSystem, state, u_t):
        return diagonal_step(system, state, u_t, self.D[...])
