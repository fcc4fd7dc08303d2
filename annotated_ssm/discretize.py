"""Discretisation: turn the continuous SSM (A, B) into the recurrence (Ā, B̄) for a step Δ.

    Euler      Ā = I + ΔA                       B̄ = ΔB
    bilinear   Ā = (I - ΔA/2)⁻¹ (I + ΔA/2)       B̄ = (I - ΔA/2)⁻¹ ΔB
    ZOH        Ā = exp(ΔA)                      B̄ = (ΔA)⁻¹ (exp(ΔA) - I) ΔB

Dense A is a matrix; a diagonal A is given as the vector of its diagonal, and then the
same formulas hold entry by entry. Everything is written in ``jax.numpy`` and works under
``jit``, ``grad`` and ``vmap``.
"""

from __future__ import annotations

import functools
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["METHODS", "discretize", "discretize_diagonal", "discretize_dense", "dplr_bilinear", "expm"]

#: The discretisation methods of the package; the layers offer these same names.
METHODS = ("euler", "bilinear", "zoh")
Method = Literal["euler", "bilinear", "zoh"]


def discretize(A, B, step, method: Method = "zoh", *, diagonal: bool | None = None):
    """Discretise ``x' = Ax + Bu`` with step ``step`` by ``method``.

    Args:
        A: dense (..., N, N), or diagonal (..., N) when ``diagonal`` is True.
            ``diagonal=None`` means: diagonal if A is a vector (1-D), dense otherwise.
        B: dense case (..., N) or (..., N, M); diagonal case broadcastable to A.
        step: Δ > 0. Dense case: scalar or shape (...) (one step per matrix in the batch).
            Diagonal case: broadcast elementwise against A, e.g. (H, 1) for one step per
            channel with A of shape (H, N), or (L, 1) for one step per time with A of shape
            (N,), giving Ā of shape (L, N).
        method: "euler", "bilinear" or "zoh".

    Returns:
        (A_bar, B_bar) with the shapes above (broadcast).
    """
    if diagonal is None:
        diagonal = np.ndim(A) == 1
    if diagonal:
        return discretize_diagonal(A, B, step, method)
    return discretize_dense(A, B, step, method)


def discretize_diagonal(A, B, step, method: Method = "zoh"):
    """Elementwise discretisation of a diagonal SSM; A, B and step broadcast together.

    Args:
        A: (..., N) real or complex diagonal of A.
        B: broadcastable to A.
        step: broadcastable to A, every entry > 0.

    Returns:
        A_bar, B_bar: broadcast shape of (A, B, step).
    """
    A, B, step = jnp.asarray(A), jnp.asarray(B), jnp.asarray(step)
    dtA = step * A
    if method == "euler":
        return 1 + dtA, step * B
    if method == "bilinear":
        denominator = 1 - dtA / 2
        return (1 + dtA / 2) / denominator, step * B / denominator
    # ZOH: B̄ = (e^{ΔA} - 1)/(ΔA) · ΔB.
    return jnp.exp(dtA), expm1_ratio(dtA) * step * B


def expm1_ratio(z):
    """``(e^z - 1)/z``, accurate for tiny |z| (expm1: no cancellation), 1 at z = 0 with a
    finite gradient there (the ``where`` never divides by zero)."""
    small = jnp.abs(z) < 1e-6
    safe = jnp.where(small, jnp.ones_like(z), z)
    return jnp.where(small, 1 + z / 2, jnp.expm1(safe) / safe)


def discretize_dense(A, B, step, method: Method = "zoh"):
    """Discretisation of a dense SSM.

    Args:
        A: (..., N, N).
        B: (..., N) or (..., N, M).
        step: scalar or (...), every entry > 0.

    Returns:
        A_bar: (..., N, N); B_bar: (..., N) or (..., N, M), where ``...`` is the broadcast
        batch shape of A, B and step.
    """
    A, B, step = jnp.asarray(A), jnp.asarray(B), jnp.asarray(step)
    N = A.shape[-1]
    vector_B = B.ndim in (1, A.ndim - 1)
    Bm = B[..., None] if vector_B else B
    dt = step[..., None, None]
    eye = jnp.eye(N, dtype=A.dtype)
    if method == "euler":
        A_bar, B_bar = eye + dt * A, dt * Bm
    elif method == "bilinear":
        left = eye - dt / 2 * A
        A_bar = jnp.linalg.solve(left, eye + dt / 2 * A)
        B_bar = jnp.linalg.solve(left, dt * Bm)
    else:
        # ZOH through one matrix exponential of the block matrix [[A, B], [0, 0]]·Δ, whose
        # top blocks are exactly (exp(ΔA), ∫₀^Δ exp(sA) ds B). Works for singular A too.
        M = Bm.shape[-1]
        batch = jnp.broadcast_shapes(A.shape[:-2], Bm.shape[:-2], dt.shape[:-2])
        top = jnp.concatenate([jnp.broadcast_to(A, batch + (N, N)), jnp.broadcast_to(Bm, batch + (N, M))], axis=-1)
        block = jnp.concatenate([top, jnp.zeros(batch + (M, N + M), dtype=top.dtype)], axis=-2)
        E = expm(dt * block)
        A_bar, B_bar = E[..., :N, :N], E[..., :N, N:]
    # Every output carries the full batch shape, whichever input it came from.
    batch = jnp.broadcast_shapes(A.shape[:-2], Bm.shape[:-2], dt.shape[:-2])
    A_bar = jnp.broadcast_to(A_bar, batch + (N, N))
    B_bar = jnp.broadcast_to(B_bar, batch + Bm.shape[-2:])
    return A_bar, (B_bar[..., 0] if vector_B else B_bar)


# Padé-13 coefficients b_0 … b_13 and the largest ‖X‖₁ at which the [13/13] approximant of
# e^X has backward error below the float64 unit roundoff (Higham 2005, Table 2.3).
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152
_MAX_SQUARINGS = 64


def expm(A):
    """The matrix exponential ``e^A`` of (..., N, N), by scaling and squaring (Higham 2005).

    ``X = A / 2^s`` with the smallest s >= 0 that gives ‖X‖₁ <= θ₁₃ = 5.37, then the
    [13/13] Padé approximant, squared s times. ``jax.scipy.linalg.expm`` rounds s down instead,
    so its Padé step runs up to 2 θ₁₃, beyond its range: a rotation by 8 radians came out
    with error 1.2e-11 (this function: 1.7e-16). Works under jit, grad and vmap; each
    matrix of a batch has its own s. Returns NaN beyond 64 squarings (‖A‖₁ > 9.9e19).
    """
    A = jnp.asarray(A)
    A = A.astype(jnp.result_type(A.dtype, jnp.float32))
    product = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)
    norm = jax.lax.stop_gradient(jnp.max(jnp.sum(jnp.abs(A), axis=-2), axis=-1))  # ‖A‖₁
    squarings = jnp.maximum(0, jnp.ceil(jnp.log2(norm / _THETA13)))  # s, (...)
    X = A / (2 ** squarings)[..., None, None].astype(A.dtype)
    eye = jnp.eye(A.shape[-1], dtype=A.dtype)
    X2 = product(X, X)
    X4 = product(X2, X2)
    X6 = product(X4, X2)
    b = _PADE13
    U = product(X, product(X6, b[13] * X6 + b[11] * X4 + b[9] * X2)
                + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
    V = (product(X6, b[12] * X6 + b[10] * X4 + b[8] * X2)
         + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * eye)
    R = jnp.linalg.solve(V - U, V + U)

    def square(R, i):  # the i-th squaring, for the matrices that need it
        squared = jax.lax.cond(i < jnp.max(squarings), lambda R: product(R, R), lambda R: R, R)
        return jnp.where((i < squarings)[..., None, None], squared, R), None

    R, _ = jax.lax.scan(square, R, jnp.arange(_MAX_SQUARINGS))
    return jnp.where((squarings > _MAX_SQUARINGS)[..., None, None], jnp.nan, R)


def dplr_bilinear(Lambda, P, B, step, Q=None):
    """Dense bilinear discretisation of ``A = diag(Λ) - P Q*`` by S4's Theorem 2.

        A0 = (2/Δ) I + (Λ - P Q*)
        D  = diag(1 / ((2/Δ) - Λ))
        A1 = D - D P (1 + Q* D P)⁻¹ Q* D          (Woodbury: A1 = ((2/Δ) I - A)⁻¹)
        Ā  = A1 A0,   B̄ = 2 A1 B

    This builds the N × N matrices, O(N²) memory; the book uses it to check the layer's
    O(N) step.

    Args:
        Lambda, P, B: (..., N) complex (all N states, not one of each pair).
        step: (...) Δ > 0.
        Q: (..., N); defaults to P.

    Returns:
        A_bar: (..., N, N) complex; B_bar: (..., N) complex.
    """
    Q = P if Q is None else Q
    Lambda, P, Q, B = (jnp.asarray(a) for a in (Lambda, P, Q, B))
    step = jnp.asarray(step)[..., None]
    N = Lambda.shape[-1]
    eye = jnp.eye(N, dtype=Lambda.dtype)
    low_rank = P[..., :, None] * jnp.conj(Q)[..., None, :]  # P Q*, (..., N, N)
    A0 = (2 / step)[..., None] * eye + Lambda[..., None, :] * eye - low_rank
    d = 1 / (2 / step - Lambda)  # the diagonal of D
    DP = d * P
    QD = jnp.conj(Q) * d
    denominator = 1 + jnp.sum(jnp.conj(Q) * DP, axis=-1)[..., None, None]
    A1 = d[..., None, :] * eye - DP[..., :, None] * QD[..., None, :] / denominator
    full = jax.lax.Precision.HIGHEST
    return (jnp.matmul(A1, A0, precision=full),
            2 * jnp.einsum("...nk,...k->...n", A1, B, precision=full))
