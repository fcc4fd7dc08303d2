"""Figures the chapters show. Each function returns a matplotlib Figure and never calls
``plt.show()``, so the same code serves the notebooks, the widgets and scripts."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["complex_plane"]


def complex_plane(ax, eigenvalues, *, unit_circle: bool = False, label: str | None = None, **scatter_kwargs):
    """Scatter eigenvalues in the complex plane on ``ax``, with axes through 0.

    Args:
        ax: a matplotlib Axes.
        eigenvalues: (N,) complex.
        unit_circle: also draw |z| = 1 (for discrete-time eigenvalues).
    """
    z = np.asarray(eigenvalues).ravel()
    ax.axhline(0, color="0.7", lw=0.8)
    ax.axvline(0, color="0.7", lw=0.8)
    if unit_circle:
        theta = np.linspace(0, 2 * np.pi, 400)
        ax.plot(np.cos(theta), np.sin(theta), color="0.5", lw=1, ls="--")
        ax.set_aspect("equal", adjustable="datalim")
    ax.scatter(z.real, z.imag, label=label, **{"s": 18, **scatter_kwargs})
    ax.set_xlabel("Re")
    ax.set_ylabel("Im")
    return ax


# --- Chapter 1: continuous-time SSMs ----------------------------------------------------
__all__ += ["diagonal_ssm_figure"]


def diagonal_ssm_figure(eigenvalues, t, B=None, C=None, *, max_basis: int = 8):
    """Three panels for a diagonal SSM x' = diag(λ) x + B u, y = C x: where the
    eigenvalues λ sit (left half plane shaded: stable), the basis functions
    Re[e^{tλ_n} B_n] (one curve per state), and the impulse response Re K(t).

    Args:
        eigenvalues: (N,) complex λ_n.
        t: (T,) times >= 0.
        B, C: (N,) each; ones if None.
        max_basis: draw at most this many basis functions (the first ones).

    Returns:
        The Figure.
    """
    from .ssm import basis_functions, impulse_response  # the figure shows the package's own numbers

    lam = np.asarray(eigenvalues, dtype=complex).ravel()
    N = lam.size
    B = np.ones(N) if B is None else np.asarray(B)
    C = np.ones(N) if C is None else np.asarray(C)
    A = np.diag(lam)
    basis = basis_functions(A, B, t)  # (T, N)
    kernel = impulse_response(A, B, C, t)  # (T,)

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), gridspec_kw={"width_ratios": [1, 1.4, 1.4]})
    ax = axes[0]
    # Fixed limits (widened only when needed) so the axes stay put while a widget moves λ.
    left, right = min(-3.2, lam.real.min() - 0.3), max(1.0, lam.real.max() + 0.3)
    top = max(10.5, np.abs(lam.imag).max() + 0.5)
    ax.axvspan(left, 0, color="tab:green", alpha=0.08, lw=0)
    ax.axvspan(0, right, color="tab:red", alpha=0.06, lw=0)
    colors = plt.cm.viridis(np.linspace(0, 0.9, max(N, 2)))
    complex_plane(ax, lam, c=colors[:N], s=30, zorder=3)
    ax.set_xlim(left, right)
    ax.set_ylim(min(-0.8, lam.imag.min() - 0.5), top)
    ax.set_title("eigenvalues of A (green: stable)")

    ax = axes[1]
    for n in range(min(N, max_basis)):
        ax.plot(t, basis[:, n].real, color=colors[n], lw=1.2, label=f"n={n}")
    ax.set_xlabel("t")
    ax.set_title(r"basis functions Re$[e^{t\lambda_n} B_n]$")
    if N <= max_basis:
        ax.legend(fontsize=7, ncol=2, loc="upper right")

    ax = axes[2]
    ax.plot(t, kernel.real, color="black", lw=1.4)
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xlabel("t")
    ax.set_title(r"impulse response Re $K(t) = $ Re $C e^{tA} B$")
    fig.tight_layout()
    return fig



# --- Chapter 2: HiPPO -------------------------------------------------------------------

__all__ += ["basis_functions", "history_reconstruction"]


def basis_functions(ax, t, basis, *, title: str | None = None, max_lines: int = 8):
    """Plot the rows of ``basis`` (N, T) against ``t`` (T,) on ``ax`` (at most ``max_lines``)."""
    basis = np.asarray(basis)
    colors = plt.cm.viridis(np.linspace(0, 0.9, min(len(basis), max_lines)))
    for n, color in zip(range(min(len(basis), max_lines)), colors):
        ax.plot(t, basis[n], color=color, lw=1.3, label=f"n = {n}")
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xlabel("t")
    if title:
        ax.set_title(title)
    return ax


def history_reconstruction(ax, s, history, reconstructions: dict, *, title: str | None = None):
    """Plot a signal's history ``u(t - s)`` against the lag ``s`` with its reconstructions.

    Args:
        s: (S,) lags (0 = now, increasing into the past; the axis is drawn reversed so time
            runs left to right).
        history: (S,) the true ``u(t - s)``.
        reconstructions: label -> (S,) reconstruction.
    """
    ax.plot(s, history, color="black", lw=2.2, alpha=0.35, label="true history")
    for label, values in reconstructions.items():
        ax.plot(s, values, lw=1.2, label=label)
    ax.invert_xaxis()
    ax.set_xlabel("lag s (how far in the past)")
    ax.set_ylabel("u(t - s)")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    return ax



# --- Chapter 3: discretisation ----------------------------------------------------------


# --- Chapter 4: S4 ----------------------------------------------------------------------

__all__ += ["s4_nodes_figure", "kernel_fit_figure"]


def s4_nodes_figure(Lambda, L: int, step: float):
    """Where S4 evaluates its Cauchy kernel: the roots of unity ω_j (left) and their images
    g(ω_j) = (2/Δ)(1 - ω_j)/(1 + ω_j) on the imaginary axis, next to the poles Λ (right).

    Args:
        Lambda: (M,) complex, the stored eigenvalues (their conjugates are drawn too).
        L: number of roots of unity.
        step: Δ.
    """
    j = np.arange(L)
    omega = np.exp(-2j * np.pi * j / L)
    finite = 2 * j != L
    g = 2 / step * 1j * np.tan(np.pi * j[finite] / L)
    Lambda = np.asarray(Lambda)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8), gridspec_kw={"width_ratios": [1, 1.3]})
    complex_plane(left, omega, unit_circle=True, color="C0", label=r"$\omega_j$")
    left.set_title(f"the L = {L} roots of unity")
    complex_plane(right, g, color="C0", label=r"$g(\omega_j)$ (ω = -1 maps to ∞)")
    complex_plane(right, np.concatenate([Lambda, Lambda.conj()]), color="C3", marker="x", s=30, label=r"poles $\Lambda_n$ and conjugates")
    bound = 1.15 * max(np.abs(Lambda.imag).max(), 1.0)
    right.set_ylim(-bound, bound)
    right.set_xlim(-3, 1)
    right.set_title(f"Cauchy nodes and poles (Δ = {step:g}; zoomed)")
    right.legend(fontsize=8, loc="center left")
    left.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def kernel_fit_figure(target, initial, learned, *, titles=None, xlim=None):
    """Target kernels, S4 kernels before and after training, one panel per channel.

    Args:
        target, initial, learned: (H, L) arrays.
        titles: H panel titles.
        xlim: (start, stop) of the ℓ axis shown.
    """
    target, initial, learned = (np.atleast_2d(np.asarray(a)) for a in (target, initial, learned))
    H = target.shape[0]
    fig, axes = plt.subplots(1, H, figsize=(5 * H, 3.2), squeeze=False)
    for h, ax in enumerate(axes[0]):
        ax.plot(target[h], color="0.2", lw=3, alpha=0.4, label="target")
        ax.plot(initial[h], color="C0", lw=0.8, ls="--", label="at initialisation (clipped)")
        ax.plot(learned[h], color="C3", lw=1.2, label="after training")
        # Scale to the target: the random initial kernel is much larger and would hide the fit.
        peak = np.max(np.abs(target[h]))
        ax.set_ylim(-0.8 * peak, 1.8 * peak)
        ax.set_xlabel(r"$\ell$")
        ax.set_title(f"channel {h}" + (f": {titles[h]}" if titles else ""))
        if xlim is not None:
            ax.set_xlim(*xlim)
    axes[0, 0].set_ylabel(r"$\bar K_\ell$ (with the skip $D$ at $\ell = 0$)")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


# --- Chapter 5: DSS ---------------------------------------------------------------------
__all__ += ["dss_kernels_figure", "skew_hippo_figure"]


def dss_kernels_figure(panels: dict, *, labels=None, ylabel: str = r"$\bar K_\ell$"):
    """Kernels side by side: ``panels`` maps a title to kernels (C, L), one line per row.

    Args:
        panels: title -> (C, L) array (or (L,)).
        labels: optional C legend labels, shown in the first panel.

    Returns:
        the Figure (one panel per entry, x axis the time index ℓ).
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(4.0 * len(panels), 3.0), squeeze=False)
    for ax, (title, K) in zip(axes[0], panels.items()):
        K = np.atleast_2d(np.asarray(K))
        for i, row in enumerate(K):
            ax.plot(np.arange(K.shape[-1]), row, lw=1, label=None if labels is None else labels[i])
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(r"$\ell$")
    axes[0, 0].set_ylabel(ylabel)
    if labels is not None:
        axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def skew_hippo_figure(skew_hippo, legs_eigenvalues, t, *, basis: int = 4):
    """Left: the skew-HiPPO spectrum (kept half filled, conjugates hollow) and LegS's real
    eigenvalues -(n+1) in the complex plane. Right: Re e^{λ_n t} for the ``basis``
    slowest-oscillating kept eigenvalues.

    Args:
        skew_hippo: (N/2,) complex, the kept eigenvalues (Im > 0).
        legs_eigenvalues: (N,) eigenvalues of HiPPO-LegS.
        t: (T,) times.
    """
    skew_hippo = np.asarray(skew_hippo)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.4))
    complex_plane(left, skew_hippo, label="skew-HiPPO (kept)", color="C0")
    complex_plane(left, skew_hippo.conj(), label="conjugates (implied)", facecolors="none", edgecolors="C0")
    complex_plane(left, legs_eigenvalues, label="HiPPO-LegS", color="C3", marker="x")
    # Imaginary parts span 0.3 … N²/π: a symmetric log scale shows all of them.
    left.set_yscale("symlog", linthresh=1.0)
    left.legend(fontsize=8, loc="upper left")
    left.set_title("eigenvalues (Im on a symmetric log scale)", fontsize=10)
    slowest = np.argsort(skew_hippo.imag)[:basis]
    for n in slowest:
        lam = skew_hippo[n]
        right.plot(t, np.real(np.exp(lam * t)), lw=1, label=f"Im $\\lambda$ = {lam.imag:.2f}")
    right.set_xlabel("$t$")
    right.set_title(r"basis functions Re $e^{\lambda_n t}$", fontsize=10)
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig


# --- Chapter 6: S4D (Figures 3 and 4) ---------------------------------------------------

import functools  # noqa: E402  (each section imports what it uses; the file is shared)

__all__ += ["legs_n_basis", "legs_exact_basis", "figure3", "figure3_panel", "figure3_errors", "figure4",
            "s4d_explorer_figure"]

FIGURE3_STEP = 0.002  # Δ of the S4D paper's Figure 3
FIGURE3_T_MAX = 2.5


@functools.lru_cache(maxsize=8)
def _legs_n_half(N: int, rows: int):
    """HiPPO-N's kept eigenvalues Λ, V*B and the first ``rows`` rows of V, cached per N.

    The eigenvalues come from the Hermitian eigensolver (``init.legs_eigenvalues``); the
    eigenvectors from a closed form, which avoids the O(N³) eigenvector computation (10 s
    at N = 2048). With S the skew part of HiPPO-N and p_j² = j + 1/2, writing out
    ``S v = iμ v`` row by row gives a two-term recurrence whose solution is

        v_n ∝ p_n / (p_n² + iμ) · Π_{j<n} (iμ - p_j²) / (iμ + p_j²),

    a product of unit-modulus factors (so it is perfectly stable); we accumulate their
    angles, π - 2 atan(μ/p_j²). The test suite checks this against ``hippo.dplr_legs``.
    """
    from .hippo import legs
    from .init import legs_eigenvalues

    Lambda = legs_eigenvalues(N)
    mu = Lambda.imag[:, None]  # (N/2, 1)
    p2 = np.arange(N) + 0.5  # p_j²
    angles = np.pi - 2 * np.arctan2(mu, p2)  # (N/2, N): angle of each factor
    phase = np.concatenate([np.zeros_like(mu), np.cumsum(angles[:, :-1], axis=1)], axis=1)
    vectors = np.sqrt(p2) / (p2 + 1j * mu) * np.exp(1j * phase)  # row k: eigenvector k
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    _, B = legs(N)
    return Lambda, vectors.conj() @ B, vectors[:, :rows].T.copy()


def legs_n_basis(N: int, L: int, step: float = FIGURE3_STEP, method: str = "zoh", n_basis: int = 4, *,
                 slots: int | None = None) -> np.ndarray:
    """The first ``n_basis`` basis functions of S4D-LegS, (A^(N), B/2), as discrete kernels / Δ.

    Row n is ``K̄_ℓ / Δ`` of the SSM with C = e_n: the n-th coordinate of ``e^{tA^(N)} B/2``
    sampled at ``t = ℓΔ``. Computed in the eigenbasis of A^(N) (``A^(N) = V Λ V*``) with
    :func:`annotated_ssm.kernels.vandermonde_kernel`, in float64.

    Args:
        slots: pad the N/2 states to this many (with zero weight) so that every N up to
            2·slots reuses one compiled kernel (the Figure 3 widget does this).

    Returns:
        (n_basis, L) float64.
    """
    import jax

    Lambda, B_tilde, V_rows = _legs_n_half(N, n_basis)
    if slots is not None:
        if slots < len(Lambda):
            raise ValueError(f"slots must be >= N/2 = {len(Lambda)}; got slots={slots}.")
        extra = slots - len(Lambda)
        Lambda = np.concatenate([Lambda, np.full(extra, -1.0 + 0j)])
        B_tilde = np.concatenate([B_tilde, np.zeros(extra)])
        V_rows = np.concatenate([V_rows, np.zeros((n_basis, extra))], axis=1)
    with jax.enable_x64(True):
        K = _vandermonde_jit(Lambda, B_tilde / 2, V_rows, step, L=L, method=method)
        return np.asarray(K) / step


@functools.lru_cache(maxsize=1)
def _jitted_vandermonde():
    import jax

    from .kernels import vandermonde_kernel

    return jax.jit(vandermonde_kernel, static_argnames=("L", "method", "conjugate", "max_elements"))


def _vandermonde_jit(*args, **kwargs):
    """:func:`annotated_ssm.kernels.vandermonde_kernel`, compiled once per shape."""
    return _jitted_vandermonde()(*args, **kwargs)


def legs_exact_basis(L: int, step: float = FIGURE3_STEP, n_basis: int = 4):
    """S4-LegS's basis at ``t = ℓΔ``: the closed form, and the SSM's own ZOH kernel / Δ.

    LegS is lower triangular, so its first ``n_basis`` basis functions only involve the
    leading n_basis × n_basis block: the SSM kernel needs no large matrix.

    Returns:
        (closed_form, ssm_kernel), each (n_basis, L) float64.
    """
    import jax

    from .discretize import discretize_dense
    from .hippo import legs, legs_basis
    from .kernels import naive_kernel

    t = step * np.arange(L)
    A, B = legs(n_basis)
    with jax.enable_x64(True):
        A_bar, B_bar = (np.asarray(x) for x in discretize_dense(A, B, step, "zoh"))
    return legs_basis(n_basis, t), naive_kernel(A_bar, B_bar, np.eye(n_basis), L) / step


def figure3_panel(ax, t, basis, *, exact=None, title: str = ""):
    """One panel of Figure 3: basis functions (rows of ``basis``) over t, the exact LegS basis
    dashed underneath when given."""
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, row in enumerate(basis):
        ax.plot(t, row, color=colors[n % len(colors)], lw=1.1, label=f"$K_{n}$")
        if exact is not None:
            ax.plot(t, exact[n], color="k", lw=0.8, ls="--", alpha=0.7)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("t")
    ax.axhline(0, color="0.8", lw=0.6)
    return ax


def figure3(step: float = FIGURE3_STEP, t_max: float = FIGURE3_T_MAX):
    """The S4D paper's Figure 3, computed: (a) S4-LegS exact (closed form) with its own SSM
    kernel on top; (b) S4D-LegS ZOH N = 256; (c) N = 1024; (d) N = 1024 bilinear."""
    L = int(round(t_max / step)) + 1
    t = step * np.arange(L)
    exact, ssm = legs_exact_basis(L, step)
    fig, axes = plt.subplots(2, 2, figsize=(11, 6.4), sharex=True, sharey=True)
    axes = axes.ravel()
    figure3_panel(axes[0], t, exact, title="(a) S4-LegS: closed form")
    for n, row in enumerate(ssm):
        axes[0].plot(t, row, color="k", lw=0.8, ls=":", label="SSM kernel / Δ" if n == 0 else None)
    panels = [(256, "zoh", "(b) S4D-LegS, ZOH, N = 256"), (1024, "zoh", "(c) S4D-LegS, ZOH, N = 1024"),
              (1024, "bilinear", "(d) S4D-LegS, bilinear, N = 1024")]
    for ax, (N, method, title) in zip(axes[1:], panels):
        figure3_panel(ax, t, legs_n_basis(N, L, step, method), title=title)
    axes[0].legend(fontsize=8, loc="upper right")
    axes[0].set_ylim(-2.5, 3.5)
    fig.tight_layout()
    return fig


def figure3_errors(Ns, methods=("zoh", "bilinear"), step: float = FIGURE3_STEP, t_max: float = FIGURE3_T_MAX,
                   split: float = 1.0, t_min: float = 0.05) -> dict:
    """Max |S4D-LegS basis - exact LegS basis| over the four functions, on [t_min, split] and
    (split, t_max]. Returns {(N, method): (early, late)}."""
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


def figure4(inits: dict, N: int):
    """Imaginary parts Im(A_n), n = 0 … N/2-1, on log-log axes (S4D paper, Figure 4).

    Args:
        inits: label -> (N/2,) complex eigenvalues.
    """
    fig, ax = plt.subplots(figsize=(6, 4))
    markers = "osd^v<>"
    for i, (label, A) in enumerate(inits.items()):
        n = np.arange(len(A))
        imag = np.abs(np.imag(A))
        keep = imag > 0  # log axes: S4D-Lin's n = 0 frequency is 0
        ax.loglog(n[keep] + 1, imag[keep], markers[i % len(markers)], ms=3.5, label=label, alpha=0.8)
    ax.set_xlabel("n + 1")
    ax.set_ylabel(r"Im $A_n$")
    ax.set_title(f"Imaginary parts of the diagonal initialisations, N = {N}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def s4d_explorer_figure(A, A_bar, basis, kernel, *, step: float, title: str = ""):
    """Three panels: the discrete eigenvalues Ā in the unit disc, a few basis functions
    Re(B̄_n Ā_n^ℓ)/Δ, and the kernel K̄_ℓ for a fixed C (both against ℓ)."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    colors = np.arange(len(A_bar))
    complex_plane(axes[0], A_bar, unit_circle=True, c=colors, cmap="viridis", s=10)
    axes[0].set_title(r"$\bar A_n$ (colour: n)", fontsize=10)
    ell = np.arange(basis.shape[-1])
    for row in basis:
        axes[1].plot(ell, row, lw=1)
    axes[1].set_title(r"four slowest basis functions Re$(\bar B_n \bar A_n^\ell)/\Delta$", fontsize=10)
    axes[1].set_xlabel(r"$\ell$ (t = $\ell\Delta$, " + f"Δ = {step:.3g})")
    axes[2].plot(ell, kernel, lw=1, color="k")
    axes[2].set_title(r"kernel $\bar K_\ell$ for a fixed random C", fontsize=10)
    axes[2].set_xlabel(r"$\ell$")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# --- Chapter 7: S5 ----------------------------------------------------------------------

__all__ += ["s5_system_figure", "scan_timing_figure", "irregular_sampling_figure"]


def s5_system_figure(Lambda, step, Lambda_bar, responses: dict, *, blocks: int = 1, title: str | None = None):
    """An S5 system at a glance: continuous eigenvalues, discrete ones, impulse responses.

    Args:
        Lambda: (P',) continuous eigenvalues, in block order (P'/blocks per block).
        step: (P',) the timescale Δ of each state.
        Lambda_bar: (P',) discrete eigenvalues exp(ΛΔ).
        responses: "out ← in" label -> (T,) impulse response of that input/output pair.
        blocks: J, used to colour the eigenvalues by block.
    """
    Lambda, step, Lambda_bar = (np.asarray(x) for x in (Lambda, step, Lambda_bar))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    block_of = np.repeat(np.arange(blocks), len(Lambda) // blocks)
    colors = plt.cm.tab10(block_of % 10)
    complex_plane(axes[0], Lambda, c=colors)
    axes[0].set_title("Λ (continuous): every block has the same eigenvalues")
    # Each state's own clock: it forgets over 1/(-Re Λ·Δ) steps and turns Im Λ·Δ/2π times per step.
    memory = 1 / (-Lambda.real * step)
    frequency = np.abs(Lambda.imag) * step / (2 * np.pi)
    axes[1].scatter(memory, frequency, c=colors, s=18)
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("memory 1/(-Re(Λ)Δ)  (time steps)")
    axes[1].set_ylabel("cycles per step  Im(Λ)Δ/2π")
    axes[1].set_title("Λ̄ = exp(ΛΔ): a timescale per state")
    for label, response in responses.items():
        axes[2].plot(np.asarray(response), lw=1.2, label=label)
    axes[2].axhline(0, color="0.7", lw=0.8)
    axes[2].set_xlabel("time step ℓ")
    axes[2].set_title("impulse responses K̄[out, in]")
    axes[2].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def scan_timing_figure(lengths, timings: dict):
    """Wall-clock time against sequence length L, log-log, one line per method.

    Args:
        lengths: (K,) sequence lengths.
        timings: label -> (K,) seconds per call.
    """
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for label, seconds in timings.items():
        ax.loglog(lengths, np.asarray(seconds) * 1e3, "o-", label=label)
    ax.set_xlabel("sequence length L")
    ax.set_ylabel("time per call (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def irregular_sampling_figure(t_fine, target_fine, t_obs, observations, predictions: dict, *,
                              observed_label: str = "observed", target_label: str = "target"):
    """Top: a signal and its irregular observations. Bottom: a target against predictions.

    Args:
        t_fine, target_fine: (T,) the dense target trajectory (for reference).
        t_obs: (L,) observation times; observations: (L,) the observed values.
        predictions: label -> (L,) predictions of the target at the observation times.
    """
    fig, axes = plt.subplots(2, 1, figsize=(10, 5.2), sharex=True)
    axes[0].plot(t_obs, observations, "o", ms=3.5, color="C0", label=observed_label)
    axes[0].vlines(t_obs, 0, observations, color="C0", alpha=0.25, lw=0.8)
    axes[0].axhline(0, color="0.7", lw=0.8)
    axes[0].legend(fontsize=8, loc="upper right")
    axes[1].plot(t_fine, target_fine, color="black", lw=2, alpha=0.35, label=target_label)
    for (label, values), marker in zip(predictions.items(), "xs^v"):
        axes[1].plot(t_obs, values, marker, ms=4, ls="", label=label)
    axes[1].set_xlabel("time t")
    axes[1].legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig



# --- Chapter 8: training ----------------------------------------------------------------
__all__ += ["sequence_examples", "learning_curves", "digit_completions"]


def sequence_examples(x, y, *, n: int = 10, title: str | None = None):
    """One small panel per class: the first example of each label. x: (n, L, 1), y: (n,)."""
    x, y = np.asarray(x), np.asarray(y)
    labels = sorted(set(y.tolist()))[:n]
    fig, axes = plt.subplots(1, len(labels), figsize=(1.3 * len(labels), 1.6), dpi=80, sharey=True)
    for ax, label in zip(np.atleast_1d(axes), labels):
        ax.plot(x[np.flatnonzero(y == label)[0], :, 0], color="C0", lw=1.2)
        ax.set_title(str(label), fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def learning_curves(histories: dict, *, references: dict | None = None, target: float | None = None):
    """Train loss and test accuracy against epochs, one line per run.

    Args:
        histories: name -> ``annotated_ssm.train.History``.
        references: name -> accuracy, drawn as dotted horizontal lines (e.g. published baselines).
        target: an accuracy bar drawn as a dashed line.
    """
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.4), dpi=90)
    for i, (name, history) in enumerate(histories.items()):
        ax_loss.plot(history.epoch, history.train_loss, color=f"C{i}", label=name)
        ax_acc.plot(history.epoch, history.test_accuracy, color=f"C{i}", marker=".", label=name)
    for j, (name, value) in enumerate((references or {}).items()):
        ax_acc.axhline(value, color="0.4", ls=":", lw=1)
        ax_acc.annotate(name, (0.02, value), xycoords=("axes fraction", "data"), ha="left", va="bottom", fontsize=8,
                        color="0.3")
    if target is not None:
        ax_acc.axhline(target, color="k", ls="--", lw=0.8)
    ax_loss.set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    ax_acc.set(xlabel="epoch", ylabel="test accuracy", ylim=(0.5, 1.0))
    ax_loss.legend(frameon=False)
    ax_acc.legend(frameon=False, loc="lower right")
    fig.tight_layout()
    return fig


def digit_completions(truth, completions, *, prompt_rows: int = 4):
    """8x8 images, originals above and completions below; a red line marks where the
    model took over. truth, completions: (n, 64) pixels in [0, 1]."""
    truth, completions = np.asarray(truth), np.asarray(completions)
    n = len(truth)
    fig, axes = plt.subplots(2, n, figsize=(1.1 * n, 2.6), dpi=90)
    for k in range(n):
        for row, (images, name) in enumerate(((truth, "original"), (completions, "completed"))):
            ax = axes[row, k]
            ax.imshow(images[k].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 1:
                ax.axhline(prompt_rows - 0.5, color="r", lw=1.5)
            if k == 0:
                ax.set_ylabel(name, fontsize=9)
    fig.tight_layout()
    return fig
