"""The numbers the explorers and chapter 6's Figure 3 show, computed fast enough to redraw.

    legs_eigenvectors                     HiPPO-N's eigenvectors' weights in O(N²), N <= 2048
    legs_n_basis, legs_exact_basis        S4D-LegS's and S4-LegS's first basis functions
    figure3_data, figure3_errors          Figure 3 of the S4D paper and Theorem 3's errors
    diagonal_kernel                       one diagonal initialisation, discretised (S4D explorer)
    s5_responses                          the S5 layer's initialisation, discretised, and its
                                          impulse responses (S5 explorer)
    gated_s6_layer, selective_responses   a hand-set S6 layer and its input-dependent
                                          impulse responses (selective explorer, chapter 9)
    decay_mask                            SSD's mask of cumulative decays (duality
                                          explorer, chapter 10)

An explorer redraws whenever a control moves, so its numbers must cost milliseconds. Three
devices make them so, and they are why this module is apart from the layers' own
initialisations (:mod:`annotated_ssm.initialization`):

- padding: states are padded with zero-weight slots to a fixed count, so that one compiled
  kernel serves every N (``FIGURE3_SLOTS``, ``DIAGONAL_KERNEL_SLOTS``, ``S5_INIT_SLOTS``);
- closed forms: HiPPO-N's eigenvalues from the library's root finder
  (:func:`annotated_ssm.hippo.legs_eigenvalues`) and its eigenvectors from a product formula,
  where the Hermitian eigensolver of :func:`annotated_ssm.hippo.dplr_legs` is O(N³) (seconds
  at N = 2048); tests check both against ``dplr_legs``;
- caches and fixed seeds: a setting computed once is not computed again; the random parts
  come from fixed seeds (NumPy's for the S4D explorer's C; the library's own
  ``jax.random`` draws with key 0 for S5, compiled once per state size when the explorer
  is built).

Everything is float64 NumPy except the S4D explorer's kernel, which is float32 like the
layers. Drawing is elsewhere: :mod:`annotated_ssm.book.plotting` and
:mod:`annotated_ssm.book.explorer_figures` take these arrays.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .._validation import check_choice, check_positive_int, check_real_in, check_step_bounds
from ..discretize import discretize_dense, discretize_diagonal
from ..hippo import legs, legs_basis, legs_eigenvalues
from ..initialization import DIAGONAL_INITS, S5Init, diagonal_init, log_step_size, s5_init
from ..kernels import naive_kernel, vandermonde_kernel
from ..layers.s6 import S6Layer
from ..scan import segment_sum

__all__ = [
    "legs_eigenvectors",
    "FIGURE3_STEP",
    "FIGURE3_T_MAX",
    "FIGURE3_SLOTS",
    "FIGURE3_PANELS",
    "legs_n_basis",
    "legs_exact_basis",
    "Figure3Data",
    "figure3_data",
    "figure3_errors",
    "DiagonalKernel",
    "DIAGONAL_KERNEL_LENGTH",
    "DIAGONAL_KERNEL_SLOTS",
    "diagonal_kernel",
    "warm_up_diagonal_kernel",
    "S5Responses",
    "S5_INIT_SLOTS",
    "s5_responses",
    "gated_s6_layer",
    "SelectiveResponses",
    "selective_responses",
    "decay_mask",
]


# --- HiPPO-N's eigenvectors without an eigensolver ------------------------------------------


@functools.lru_cache(maxsize=8)
def legs_eigenvectors(N: int, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """HiPPO-N's kept eigenvalues Λ, the weights V*B and the first ``rows`` rows of V.

    The eigenvectors come from a closed form: with S the skew part of HiPPO-N and
    p_j² = j + 1/2, writing out ``S v = iμ v`` row by row gives a two-term recurrence whose
    solution is

        v_n ∝ p_n / (p_n² + iμ) · Π_{j<n} (iμ - p_j²) / (iμ + p_j²),

    a product of unit-modulus factors (so perfectly stable); we accumulate their angles,
    π - 2 atan(μ/p_j²). The tests check it against ``hippo.dplr_legs``. Cached per
    (N, rows); the arrays returned are read-only.

    Returns:
        Lambda: (N/2,) complex128, as :func:`annotated_ssm.hippo.legs_eigenvalues`.
        B_tilde: (N/2,) complex128, ``V* B`` for LegS's B.
        V_rows: (rows, N/2) complex128, rows 0 … rows-1 of the unit eigenvectors V.
    """
    Lambda = legs_eigenvalues(N)
    rows = check_positive_int("rows", rows)
    if rows > N:
        raise ValueError(f"rows must be <= N = {N}; got rows={rows}.")
    mu = Lambda.imag[:, None]  # (N/2, 1)
    p2 = np.arange(N) + 0.5  # p_j²
    angles = np.pi - 2 * np.arctan2(mu, p2)  # (N/2, N): angle of each factor
    phase = np.concatenate([np.zeros_like(mu), np.cumsum(angles[:, :-1], axis=1)], axis=1)
    vectors = np.sqrt(p2) / (p2 + 1j * mu) * np.exp(1j * phase)  # row k: eigenvector k
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    _, B = legs(N)
    out = (Lambda, vectors.conj() @ B, vectors[:, :rows].T.copy())
    for array in out:
        array.setflags(write=False)
    return out


# --- S4D-LegS against S4-LegS (S4D paper, Figure 3 and Theorem 3) ------------------------

FIGURE3_STEP = 0.002  # the book's Δ for Figure 3 (the paper's caption states none)
FIGURE3_T_MAX = 2.5
FIGURE3_SLOTS = 512  # the Figure 3 explorer pads N/2 to this (N <= 1024): one compiled kernel


@functools.lru_cache(maxsize=1)
def _jitted_vandermonde():
    """:func:`annotated_ssm.kernels.vandermonde_kernel`, compiled once per shape and method."""
    return jax.jit(vandermonde_kernel, static_argnames=("L", "method", "conjugate"))


def legs_n_basis(N: int, L: int, step: float = FIGURE3_STEP, method: str = "zoh",
                 n_basis: int = 4, *, slots: int | None = None) -> np.ndarray:
    """The first ``n_basis`` basis functions of S4D-LegS, (A^(N), B/2), as discrete kernels / Δ.

    Row n is ``K̄_ℓ / Δ`` of the SSM with C = e_n: the n-th coordinate of ``e^{tA^(N)} B/2``
    sampled at ``t = ℓΔ``. Computed in the eigenbasis of A^(N) (``A^(N) = V Λ V*``, see
    :func:`legs_eigenvectors`) with :func:`annotated_ssm.kernels.vandermonde_kernel`, in
    float64.

    Args:
        N: state size (even). L: number of samples. step: Δ.
        method: "zoh" or "bilinear".
        n_basis: number of basis functions (rows).
        slots: pad the N/2 states to this many (with zero weight) so that every N up to
            2·slots reuses one compiled kernel (the Figure 3 explorer does this).

    Returns:
        (n_basis, L) float64.
    """
    check_real_in("step", step, 0.0, open_low=True)
    Lambda, B_tilde, V_rows = legs_eigenvectors(N, n_basis)
    if slots is not None:
        if slots < len(Lambda):
            raise ValueError(f"slots must be >= N/2 = {len(Lambda)}; got slots={slots}.")
        extra = slots - len(Lambda)
        Lambda = np.concatenate([Lambda, np.full(extra, -1.0 + 0j)])
        B_tilde = np.concatenate([B_tilde, np.zeros(extra)])
        V_rows = np.concatenate([V_rows, np.zeros((n_basis, extra))], axis=1)
    with jax.enable_x64(True):
        K = _jitted_vandermonde()(Lambda, B_tilde / 2, V_rows, step, L=L, method=method)
        return np.asarray(K) / step


def legs_exact_basis(L: int, step: float = FIGURE3_STEP,
                     n_basis: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """S4-LegS's basis at ``t = ℓΔ``: the closed form, and the SSM's own ZOH kernel / Δ.

    LegS is lower triangular, so its first ``n_basis`` basis functions only involve the
    leading n_basis × n_basis block: the SSM kernel needs no large matrix.

    Returns:
        (closed_form, ssm_kernel), each (n_basis, L) float64.
    """
    L = check_positive_int("L", L)
    check_real_in("step", step, 0.0, open_low=True)
    t = step * np.arange(L)
    A, B = legs(n_basis)
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize_dense(A, B, step, "zoh"))
    return legs_basis(n_basis, t), naive_kernel(A_bar, B_bar, np.eye(n_basis), L) / step


class Figure3Data(NamedTuple):
    """What :func:`annotated_ssm.book.plotting.figure3` draws (see :func:`figure3_data`).

    t (T,) times ℓΔ; exact (4, T) S4-LegS's closed-form basis; ssm_kernel (4, T) S4-LegS's
    own ZOH kernel / Δ; panels {(N, method): (4, T)} S4D-LegS's basis, one panel each."""

    t: np.ndarray
    exact: np.ndarray
    ssm_kernel: np.ndarray
    panels: dict


#: The S4D-LegS panels (b)-(d) of Figure 3, as (N, discretisation).
FIGURE3_PANELS = ((256, "zoh"), (1024, "zoh"), (1024, "bilinear"))


def figure3_data(step: float = FIGURE3_STEP, t_max: float = FIGURE3_T_MAX,
                 panels=FIGURE3_PANELS) -> Figure3Data:
    """The numbers of the S4D paper's Figure 3 on ``t ∈ [0, t_max]``, Δ = ``step``: S4-LegS
    (closed form and its own SSM kernel) and S4D-LegS for each (N, method) of ``panels``.
    The paper states neither Δ, the window nor N: the defaults are the book's choice."""
    check_real_in("t_max", t_max, 0.0, open_low=True)
    L = int(round(t_max / step)) + 1
    exact, ssm_kernel = legs_exact_basis(L, step)
    basis = {(N, method): legs_n_basis(N, L, step, method) for N, method in panels}
    return Figure3Data(step * np.arange(L), exact, ssm_kernel, basis)


def figure3_errors(Ns, methods=("zoh", "bilinear"), step: float = FIGURE3_STEP,
                   t_max: float = FIGURE3_T_MAX, split: float = 1.0, t_min: float = 0.05) -> dict:
    """How far S4D-LegS's basis is from S4-LegS's (S4D paper, Theorem 3).

    Max |S4D-LegS basis - exact LegS basis| over the first four functions, on
    [t_min, split] and on (split, t_max].

    Returns:
        {(N, method): (early, late)} floats.
    """
    L = int(round(t_max / step)) + 1
    t = step * np.arange(L)
    exact, _ = legs_exact_basis(L, step)
    early = (t >= t_min - 1e-12) & (t <= split + 1e-12)
    late = t > split + 1e-12
    errors = {}
    for N in Ns:
        for method in methods:
            diff = np.abs(legs_n_basis(N, L, step, method) - exact)
            errors[N, method] = (float(diff[:, early].max()), float(diff[:, late].max()))
    return errors


# --- One diagonal initialisation at a glance (the S4D explorer of chapter 6) ------------


class DiagonalKernel(NamedTuple):
    """What one diagonal initialisation does once discretised (see :func:`diagonal_kernel`).

    A (M,) continuous eigenvalues; A_bar (M,) discrete ones; basis (4, length) the four
    slowest basis functions Re(B̄_n Ā_n^ℓ)/Δ; kernel (length,) K̄ for a fixed random C."""

    A: np.ndarray
    A_bar: np.ndarray
    basis: np.ndarray
    kernel: np.ndarray


DIAGONAL_KERNEL_LENGTH = 1024  # kernel length of diagonal_kernel
DIAGONAL_KERNEL_SLOTS = 256  # states are padded to this many: one compiled kernel for every N


@functools.lru_cache(maxsize=64)
def _seeded_init(name: str, N: int, real_part: float, imag_scale: float) -> np.ndarray:
    """:func:`annotated_ssm.initialization.diagonal_init` with the fixed key 0, cached per
    setting (S4D-LegS's eigenvalues come from the O(N²) root finder there, so N = 512 is
    fast)."""
    if name == "real":
        return diagonal_init("real", N).astype(np.complex128)
    return diagonal_init(name, N, key=jax.random.key(0), real_part=real_part,
                         imag_scale=imag_scale)


@functools.lru_cache(maxsize=1)
def _padded_diagonal_kernel():
    """Discretisation and kernel for ``DIAGONAL_KERNEL_SLOTS`` padded states, jit-compiled
    once per (method, conjugate), so that changing N or Δ never recompiles."""

    @functools.partial(jax.jit, static_argnames=("method", "conjugate"))
    def compute(A, C, step, method, conjugate):
        A_bar, B_bar = discretize_diagonal(A, jnp.ones_like(A), step, method)
        K = vandermonde_kernel(A, jnp.ones_like(A), C, step, DIAGONAL_KERNEL_LENGTH,
                               method=method, conjugate=conjugate)
        return A_bar, B_bar, K

    return compute


def diagonal_kernel(init: str, N: int, real_part: float, imag_scale: float, discretization: str,
                    step: float) -> DiagonalKernel:
    """One setting of the S4D explorer: the eigenvalues of ``diagonal_init(init, N, …)``
    (fixed key 0), their discretisation with step Δ, the four slowest basis functions and
    the kernel for B = 1 and a fixed random C (NumPy seed 0, complex normal, E|C|² = 1).

    float32 (the layers' precision), 1024 time steps. States are padded to 256 with zero
    weight, so every N compiles the same kernel.

    Args:
        init: one of ``DIAGONAL_INITS``.
        N: state size (<= 512, or <= 256 for "real").
        real_part, imag_scale: as in :func:`annotated_ssm.initialization.diagonal_init` (ignored for
            "real").
        discretization: "zoh" or "bilinear".
        step: Δ > 0.
    """
    check_choice("init", init, DIAGONAL_INITS)
    check_choice("discretization", discretization, ("zoh", "bilinear"))
    check_real_in("step", step, 0.0, open_low=True)
    if init == "real":
        real_part, imag_scale = -0.5, 1.0  # S4D-Real has neither
    check_real_in("real_part", real_part, -np.inf, 0.0, closed_high=False)  # diagonal_init trusts its caller
    check_real_in("imag_scale", imag_scale, 0.0)
    A = _seeded_init(init, int(N), float(real_part), float(imag_scale))
    M = len(A)
    if M > DIAGONAL_KERNEL_SLOTS:
        raise ValueError(f"N must be <= {2 * DIAGONAL_KERNEL_SLOTS} (or {DIAGONAL_KERNEL_SLOTS} "
                         f"for 'real'); got N={N}.")
    rng = np.random.default_rng(0)
    C = (rng.standard_normal(M) + 1j * rng.standard_normal(M)) / np.sqrt(2)
    pad = DIAGONAL_KERNEL_SLOTS - M
    A_padded = np.concatenate([A, np.full(pad, -1.0 + 0j)]).astype(np.complex64)
    C_padded = np.concatenate([C, np.zeros(pad)]).astype(np.complex64)
    A_bar, B_bar, kernel = (np.asarray(x) for x in _padded_diagonal_kernel()(
        A_padded, C_padded, np.float32(step), method=discretization, conjugate=init != "real"))
    A_bar, B_bar = A_bar[:M].astype(np.complex128), B_bar[:M].astype(np.complex128)
    slowest = np.argsort(np.abs(A.imag), kind="stable")[:4]
    ell = np.arange(DIAGONAL_KERNEL_LENGTH)
    basis = np.real(B_bar[slowest, None] * A_bar[slowest, None] ** ell) / step
    return DiagonalKernel(A, A_bar, basis, kernel)


def warm_up_diagonal_kernel() -> None:
    """Compile :func:`diagonal_kernel`'s four (discretisation, conjugate) variants now."""
    zeros = np.zeros(DIAGONAL_KERNEL_SLOTS, np.complex64)
    for method in ("zoh", "bilinear"):
        for conjugate in (True, False):
            _padded_diagonal_kernel()(zeros - 1, zeros, np.float32(0.01), method=method,
                                      conjugate=conjugate)


# --- One S5 initialisation at a glance (the S5 explorer of chapter 7) -------------------


class S5Responses(NamedTuple):
    """An S5 layer's initial system, discretised (see :func:`s5_responses`).

    init: the layer's initialisation (:class:`annotated_ssm.initialization.S5Init`: Λ (P',),
    B̃ (P', H), C̃ (H, P'), complex64); step (P',) float64 each state's Δ; Lambda_bar (P',)
    complex128 = exp(ΛΔ); responses (length, H, H) float64: the impulse response
    K̄[ℓ, out, in] = 2·Re(C̃ diag(Λ̄^ℓ) B̄) of the real system."""

    init: S5Init
    step: np.ndarray
    Lambda_bar: np.ndarray
    responses: np.ndarray


S5_INIT_SLOTS = 64  # s5_responses pads the kept states to this many: one compiled discretisation


def s5_responses(d_model: int, state_size: int, blocks: int, step_min: float, step_max: float,
                 length: int, *, seed: int = 0) -> S5Responses:
    """The S5 layer's initialisation for key ``seed``, discretised by ZOH in float64, and its
    impulse responses: what the S5 explorer draws.

    Λ, B̃ and C̃ are :func:`annotated_ssm.initialization.s5_init`'s (J = ``blocks`` copies of
    HiPPO-N, B̃ = V*B, C̃ = CV), log Δ per state :func:`annotated_ssm.initialization.log_step_size`'s.
    The discretisation is padded to ``S5_INIT_SLOTS`` states, so that changing P or J compiles
    no discretisation (the draws compile once per state size).

    Args:
        d_model: H. state_size: P (P/2 <= S5_INIT_SLOTS). blocks: J, divides P.
        step_min, step_max: the Δ range. length: time steps of the impulse responses.
    """
    length = check_positive_int("length", length)
    check_step_bounds(step_min, step_max, np.float64)
    if check_positive_int("state_size", state_size) > 2 * S5_INIT_SLOTS:
        raise ValueError(f"state_size must be <= {2 * S5_INIT_SLOTS}; got state_size={state_size}.")
    if state_size % check_positive_int("blocks", blocks) or (state_size // blocks) % 2:
        raise ValueError(f"blocks must divide state_size into blocks of even size; got state_size={state_size}, "
                         f"blocks={blocks}.")
    key_init, key_step = jax.random.split(jax.random.key(seed))
    init = s5_init(key_init, d_model, state_size, blocks)
    Lambda = np.asarray(init.Lambda, np.complex128)
    kept = len(Lambda)
    step = np.exp(np.asarray(log_step_size(key_step, (S5_INIT_SLOTS,), step_min, step_max),
                             np.float64))[:kept]
    pad = S5_INIT_SLOTS - kept
    with jax.enable_x64(True):
        Lambda_bar, factor = (np.asarray(x)[:kept] for x in discretize_diagonal(
            np.concatenate([Lambda, np.full(pad, -1.0 + 0j)]),
            np.ones(S5_INIT_SLOTS, np.complex128), np.concatenate([step, np.ones(pad)]), "zoh"))
    B_bar = factor[:, None] * np.asarray(init.B_tilde, np.complex128)  # ZOH: (Λ̄ - 1)/Λ · B̃
    powers = Lambda_bar[None, :] ** np.arange(length)[:, None]  # (length, P')
    C_tilde = np.asarray(init.C_tilde, np.complex128)
    responses = 2 * np.einsum("hp,lp,pk->lhk", C_tilde, powers, B_bar).real
    return S5Responses(init, step, Lambda_bar, responses)


# --- Chapter 9: a selective layer, set by hand ----------------------------------------------


def gated_s6_layer(state_size: int = 4, base_step: float = 0.1) -> S6Layer:
    """An S6 layer whose selection is set by hand: three channels u = (content, gate, 1).

    Channel 0 is the one to watch. Its step is Δ = softplus(gate + b) with
    softplus(b) = ``base_step``: a gate of 0 gives the base step, a very negative gate a
    step near 0 (the token is ignored), a large gate a step near the gate itself (the past
    is forgotten: the state holds the token's content times Δ). B_ℓ = 1 and C_ℓ = 1/N for
    every state (read from the constant channel), D = 0 and A = -(1, …, N) (S4D-Real, as
    initialised): y = the mean of the states. Channels 1 and 2 keep the base step and are
    not meant to be read.
    """
    N = check_positive_int("state_size", state_size)
    check_real_in("base_step", base_step, 0.0, open_low=True)
    layer = S6Layer(3, N, dt_rank=1, rngs=nnx.Rngs(0))
    x_proj = np.zeros((3, 1 + 2 * N), np.float32)
    x_proj[1, 0] = 1.0  # the low-rank input of Δ: the gate
    x_proj[2, 1:1 + N] = 1.0  # B = 1, from the constant channel
    x_proj[2, 1 + N:] = 1.0 / N  # C = 1/N
    layer.x_proj.kernel[...] = jnp.asarray(x_proj)
    layer.dt_proj.kernel[...] = jnp.asarray([[1.0, 0.0, 0.0]], jnp.float32)  # Δ of channel 0
    layer.log_step_size[...] = jnp.full(3, np.log(base_step), jnp.float32)
    layer.D[...] = jnp.zeros(3, jnp.float32)
    return layer


class SelectiveResponses(NamedTuple):
    """What a selective layer does to one input sequence, for one channel h.

    step (L,): Δ_ℓ of the channel; responses (L, L): ``K[t, s]``, the weight of input u_s
    in output y_t, so that y_t = Σ_{s<=t} K[t, s] u_s + D u_t (zero for s > t)."""

    step: np.ndarray
    responses: np.ndarray


def selective_responses(layer: S6Layer, u, channel: int = 0) -> SelectiveResponses:
    """The time-varying impulse responses of an S6 layer for the input u (L, H), in float64.

    The selection (Δ, B, C) comes from ``layer.selection(u)``; then, with the cumulative
    steps S_t = Σ_{k<=t} Δ_k of the channel,

        K[t, s] = Σ_n C_t[n] · exp(A_n (S_t - S_s)) · Δ_s B_s[n]      (s <= t),

    the product of the steps' decays exp(Δ_k A) from s+1 to t. An LTI layer's K[t, s] depends
    on t - s only; here it depends on the input. O(L² N): for explorers and short sequences.
    """
    u = jnp.asarray(u, jnp.float32)
    if not (u.ndim == 2 and u.shape[1] == layer.d_model):
        raise ValueError(f"u must have shape (L, {layer.d_model}); got {u.shape}.")
    if not (isinstance(channel, (int, np.integer)) and 0 <= channel < layer.d_model):
        raise ValueError(f"channel must be an integer in [0, {layer.d_model}); got {channel!r}.")
    step, B, C = (np.asarray(x, np.float64) for x in layer.selection(u))
    A = np.asarray(layer.eigenvalues(), np.float64)[channel]  # (N,)
    step = step[:, channel]
    total = np.cumsum(step[:, None] * A, axis=0)  # Σ_{k<=t} Δ_k A_n, (L, N)
    later = np.arange(len(step))[:, None] >= np.arange(len(step))[None, :]  # t >= s
    exponent = np.where(later[..., None], total[:, None, :] - total[None, :, :], -np.inf)
    responses = np.einsum("tn,tsn,sn->ts", C, np.exp(exponent), step[:, None] * B)
    return SelectiveResponses(step, responses)


# --- Chapter 10: SSD's decay mask -----------------------------------------------------------


@functools.cache
def _jitted_segment_sum():
    return jax.jit(segment_sum)  # compiled once per length


def decay_mask(step, A) -> np.ndarray:
    """The decay mask of one SSD head, L[t, s] = exp(A · Σ_{k=s+1}^{t} Δ_k) for t >= s and
    0 above the diagonal: the product of the decays a_k = exp(Δ_k A) from s + 1 to t.

    Args:
        step: (L,) the steps Δ_t > 0 the tokens chose.
        A: the head's scalar A < 0.

    Returns:
        (L, L) float64, from the package's :func:`annotated_ssm.scan.segment_sum` of
        log a = Δ·A (float32, compiled once per length).
    """
    step = np.asarray(step, np.float64)
    if step.ndim != 1 or step.size < 1 or not np.all(np.isfinite(step) & (step > 0)):
        raise ValueError(f"step must be a non-empty 1-D array of finite numbers > 0; got "
                         f"shape {step.shape}{'' if step.ndim != 1 else ', min ' + str(step.min(initial=np.inf))}.")
    A = check_real_in("A", A, -np.inf, 0.0, closed_high=False)
    log_a = jnp.asarray(step * A, jnp.float32)
    return np.exp(np.asarray(_jitted_segment_sum()(log_a), np.float64))
