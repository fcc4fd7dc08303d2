"""Figures the chapters show. Each function returns a matplotlib Figure and never calls
``plt.show()``, so the same code serves the notebooks, the widgets and scripts.

This module only draws: the numbers come from the modules of their concepts (``ssm``,
``hippo``, ``init``, ``kernels``). The explorers' figures (``*_explorer_figure``) are sized
for the page: 7.5 inches wide at 100 dpi with readable fonts (``EXPLORER_STYLE``), so
that they stay legible when a phone shrinks them to its width.
"""

from __future__ import annotations

import contextlib

import matplotlib.pyplot as plt
import numpy as np

from . import ssm
# Numerical experiments that used to live here, re-exported so that existing imports work:
# new code should import them from annotated_ssm.init.
from .init import FIGURE3_STEP, FIGURE3_T_MAX, legs_exact_basis, legs_n_basis

__all__ = ["complex_plane", "EXPLORER_WIDTH", "EXPLORER_STYLE", "explorer_style"]

EXPLORER_WIDTH = 7.5  # inches: an explorer's figure at 100 dpi is as wide as the book's text column
# The explorers' figures place their axes with fixed margins instead of tight_layout: the
# sizes and fonts never change, and tight_layout would draw every figure twice (a redraw
# must stay under 0.3 s).
#: Font sizes of the explorers' figures, in points at 100 dpi: 13 pt is 18 px on a desktop
#: and still ~9 px when a phone shrinks the 750 px figure to its ~370 px column.
EXPLORER_STYLE = {
    "font.size": 13, "axes.titlesize": 13, "axes.labelsize": 13, "legend.fontsize": 11.5,
    "xtick.labelsize": 12, "ytick.labelsize": 12, "figure.titlesize": 13.5, "figure.dpi": 100, "savefig.dpi": 100,
}


@contextlib.contextmanager
def explorer_style():
    """matplotlib settings of the explorers' figures (see ``EXPLORER_STYLE``)."""
    with plt.rc_context(EXPLORER_STYLE):
        yield


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
    eigenvalues λ sit (left half plane shaded: stable), the impulse response Re K(t), and
    the basis functions Re[e^{tλ_n} B_n] (one curve per state, full width below).

    Args:
        eigenvalues: (N,) complex λ_n.
        t: (T,) times >= 0.
        B, C: (N,) each; ones if None.
        max_basis: draw at most this many basis functions (the first ones).

    Returns:
        The Figure.
    """
    lam = np.asarray(eigenvalues, dtype=complex).ravel()
    N = lam.size
    B = np.ones(N) if B is None else np.asarray(B)
    C = np.ones(N) if C is None else np.asarray(C)
    A = np.diag(lam)
    basis = ssm.basis_functions(A, B, t)  # (T, N): the figure shows the package's own numbers
    kernel = ssm.impulse_response(A, B, C, t)  # (T,)

    with explorer_style():
        fig = plt.figure(figsize=(EXPLORER_WIDTH, 5.6))
        grid = fig.add_gridspec(2, 2, width_ratios=[1, 1.35])
        ax_eig, ax_kernel, ax_basis = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])
        # Fixed limits (widened only when needed) so the axes stay put while a widget moves λ.
        left, right = min(-3.2, lam.real.min() - 0.3), max(1.0, lam.real.max() + 0.3)
        top = max(10.5, np.abs(lam.imag).max() + 0.5)
        ax_eig.axvspan(left, 0, color="tab:green", alpha=0.08, lw=0)
        ax_eig.axvspan(0, right, color="tab:red", alpha=0.06, lw=0)
        colors = plt.cm.viridis(np.linspace(0, 0.9, max(N, 2)))
        complex_plane(ax_eig, lam, c=colors[:N], s=30, zorder=3)
        ax_eig.set_xlim(left, right)
        ax_eig.set_ylim(min(-0.8, lam.imag.min() - 0.5), top)
        ax_eig.set_title("eigenvalues λ (green: stable)")

        ax_kernel.plot(t, kernel.real, color="black", lw=1.4)
        ax_kernel.axhline(0, color="0.7", lw=0.8)
        ax_kernel.set_xlabel("t")
        ax_kernel.set_title(r"impulse response Re $C e^{tA} B$")

        for n in range(min(N, max_basis)):
            ax_basis.plot(t, basis[:, n].real, color=colors[n], lw=1.3, label=f"n={n}")
        ax_basis.set_xlabel("t")
        ax_basis.set_title(r"basis functions Re$[e^{t\lambda_n} B_n]$")
        if N <= max_basis:
            ax_basis.legend(ncol=4, loc="upper right")
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.09, top=0.94, hspace=0.5, wspace=0.25)
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



__all__ += ["hippo_explorer_figure"]


def hippo_explorer_figure(lags, basis, history, reconstruction, *, measure: str, N: int, theta: float | None = None):
    """The HiPPO explorer: the basis e^{sA}B (first 8 of N) above the history of the signal
    and its reconstruction from the state.

    Args:
        lags: (S,) lags s >= 0.
        basis: (N, S) basis functions at the lags.
        history: (S,) the true u(T - s); reconstruction: (S,) read back from the state.
        theta: drawn as the end of LegT's window (when ``measure == "legt"``).
    """
    error = np.sqrt(np.mean((reconstruction - history) ** 2)) / max(np.std(history), 1e-300)
    shown = min(N, 8)
    with explorer_style():
        fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(EXPLORER_WIDTH, 5.6))
        basis_functions(ax0, lags, basis, title=f"{measure}: basis $e^{{sA}}B$, first {shown} of N = {N}")
        ax0.set_xlabel("s")
        limit = np.max(np.abs(basis[:shown]))
        ax0.set_ylim(-1.1 * limit, 1.1 * limit)
        history_reconstruction(ax1, lags, history, {f"from the state (relative rms error {error:.1e})": reconstruction},
                               title=f"the last {lags[-1]:g} time units, read back from the state")
        if measure == "legt" and theta is not None:
            ax1.axvline(theta, color="0.5", ls=":", lw=1)
        ax1.legend(loc="upper left")
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.09, top=0.94, hspace=0.5)
    return fig


# --- Chapter 3: discretisation ----------------------------------------------------------

__all__ += ["discretization_explorer_figure"]


def discretization_explorer_figure(A_bar, t, K, K_bar, *, step: float, method: str):
    """The discretisation explorer: eigenvalues of Ā against the unit circle, and the
    discrete kernel K̄_ℓ against the sampled continuous one Δ·K(ℓΔ).

    Args:
        A_bar: (N,) discrete eigenvalues (their conjugates are drawn too).
        t: (T,) fine times; K: (T,) the continuous kernel at t.
        K_bar: (L,) the discrete kernel, at times ℓΔ.
    """
    A_bar = np.asarray(A_bar)
    with explorer_style():
        fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(EXPLORER_WIDTH, 3.6), gridspec_kw={"width_ratios": [1, 1.6]})
        complex_plane(ax0, np.concatenate([A_bar, A_bar.conj()]), unit_circle=True, color="C3")
        ax0.set_title(f"Ā, max |·| = {np.max(np.abs(A_bar)):.3f}")
        ax1.plot(t, step * K, color="black", alpha=0.4, lw=2, label="Δ·K(ℓΔ)")
        ax1.plot(np.arange(len(K_bar)) * step, K_bar, ".-", ms=3, lw=0.8, color="C3", label="K̄_ℓ")
        scale = 1.5 * np.max(np.abs(step * K))
        ax1.set_ylim(-scale, scale)
        ax1.set_xlabel("time ℓΔ")
        ax1.legend(loc="upper right")
        ax1.set_title(f"{method}, Δ = {step:.2g}")
        fig.subplots_adjust(left=0.11, right=0.98, bottom=0.15, top=0.91, wspace=0.25)
    return fig


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

__all__ += ["figure3", "figure3_panel", "figure3_explorer_figure", "figure4", "s4d_explorer_figure"]


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


def figure3_explorer_figure(t, basis, exact, *, N: int, discretization: str):
    """One panel of Figure 3 for the explorer: the S4D-LegS basis (rows of ``basis``) over
    the exact LegS basis (dashed). t: (T,); basis, exact: (4, T)."""
    with explorer_style():
        fig, ax = plt.subplots(figsize=(EXPLORER_WIDTH, 3.6))
        figure3_panel(ax, t, basis, exact=exact, title=f"S4D-LegS, N = {N}, {discretization} (dashed: S4-LegS)")
        ax.title.set_fontsize(EXPLORER_STYLE["axes.titlesize"])
        ax.set_ylim(-2.5, 3.5)
        ax.legend(loc="upper right", ncol=4)
        fig.subplots_adjust(left=0.07, right=0.98, bottom=0.15, top=0.91)
    return fig


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
    """The S4D explorer: the discrete eigenvalues Ā in the unit disc, a few basis functions
    Re(B̄_n Ā_n^ℓ)/Δ, and (full width below) the kernel K̄_ℓ for a fixed C.

    Args:
        A, A_bar: (M,) continuous and discrete eigenvalues (A only sets the colours' count).
        basis: (4, L); kernel: (L,); step: Δ.
    """
    with explorer_style():
        fig = plt.figure(figsize=(EXPLORER_WIDTH, 5.8))
        grid = fig.add_gridspec(2, 2, width_ratios=[1, 1.5])
        ax_eig, ax_basis, ax_kernel = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])
        complex_plane(ax_eig, A_bar, unit_circle=True, c=np.arange(len(A_bar)), cmap="viridis", s=10)
        ax_eig.set_title(r"$\bar A_n$ (colour: n)")
        ell = np.arange(basis.shape[-1])
        for row in basis:
            ax_basis.plot(ell, row, lw=1)
        ax_basis.set_title(r"4 slowest Re$(\bar B_n \bar A_n^\ell)/\Delta$")
        ax_basis.set_xlabel(r"$\ell$ (t = $\ell\Delta$, " + f"Δ = {step:.3g})")
        ax_kernel.plot(ell, kernel, lw=1, color="k")
        ax_kernel.set_title(r"kernel $\bar K_\ell$ for a fixed random C")
        ax_kernel.set_xlabel(r"$\ell$")
        if title:
            fig.suptitle(title)
        fig.subplots_adjust(left=0.11, right=0.98, bottom=0.09, top=0.88, hspace=0.55, wspace=0.25)
    return fig


# --- Chapter 7: S5 ----------------------------------------------------------------------

__all__ += ["s5_system_figure", "scan_timing_figure", "irregular_sampling_figure"]


def s5_system_figure(Lambda, step, Lambda_bar, responses: dict, *, blocks: int = 1, title: str | None = None):
    """An S5 system at a glance: continuous eigenvalues, each state's timescale, and
    (full width below) impulse responses.

    Args:
        Lambda: (P',) continuous eigenvalues, in block order (P'/blocks per block).
        step: (P',) the timescale Δ of each state.
        Lambda_bar: (P',) discrete eigenvalues exp(ΛΔ).
        responses: "out ← in" label -> (T,) impulse response of that input/output pair.
        blocks: J, used to colour the eigenvalues by block.
    """
    Lambda, step, Lambda_bar = (np.asarray(x) for x in (Lambda, step, Lambda_bar))
    with explorer_style():
        fig = plt.figure(figsize=(EXPLORER_WIDTH, 6.0))
        grid = fig.add_gridspec(2, 2)
        axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])]
        block_of = np.repeat(np.arange(blocks), len(Lambda) // blocks)
        colors = plt.cm.tab10(block_of % 10)
        complex_plane(axes[0], Lambda, c=colors)
        axes[0].set_title("Λ (colour: block)")
        # Each state's own clock: it forgets over 1/(-Re Λ·Δ) steps and turns Im Λ·Δ/2π times per step.
        memory = 1 / (-Lambda.real * step)
        frequency = np.abs(Lambda.imag) * step / (2 * np.pi)
        axes[1].scatter(memory, frequency, c=colors, s=18)
        axes[1].set_xscale("log")
        axes[1].set_yscale("log")
        axes[1].set_xlabel("memory 1/(-Re(Λ)Δ) (steps)")
        axes[1].set_ylabel("cycles per step")
        axes[1].set_title("Λ̄ = exp(ΛΔ): timescales")
        for label, response in responses.items():
            axes[2].plot(np.asarray(response), lw=1.2, label=label)
        axes[2].axhline(0, color="0.7", lw=0.8)
        axes[2].set_xlabel("time step ℓ")
        axes[2].set_title("impulse responses K̄[out, in]")
        axes[2].legend(loc="upper right")
        if title:
            fig.suptitle(title)
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.09, top=0.88, hspace=0.55, wspace=0.4)
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
    """Training loss and per-epoch validation accuracy, one colour per run name.

    Args:
        histories: name -> ``annotated_ssm.train.History`` or a list of them (seeds of one
            configuration: thin lines of one colour; a dot marks the epoch each run kept).
        references: name -> accuracy, drawn as dotted horizontal lines (e.g. published baselines).
        target: an accuracy bar drawn as a dashed line.
    """
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.4), dpi=90)
    for i, (name, runs) in enumerate(histories.items()):
        runs = runs if isinstance(runs, (list, tuple)) else [runs]
        for k, history in enumerate(runs):
            label = name if k == 0 else None
            ax_loss.plot(history.epoch, history.train_loss, color=f"C{i}", lw=1, label=label)
            ax_acc.plot(history.epoch, history.val_accuracy, color=f"C{i}", lw=1, label=label)
            if history.best_epoch is not None:
                best = history.epoch.index(history.best_epoch)
                ax_acc.plot(history.best_epoch, history.val_accuracy[best], "o", color=f"C{i}", ms=4)
    for name, value in (references or {}).items():
        ax_acc.axhline(value, color="0.4", ls=":", lw=1)
        ax_acc.annotate(name, (0.02, value), xycoords=("axes fraction", "data"), ha="left", va="bottom", fontsize=8,
                        color="0.3")
    if target is not None:
        ax_acc.axhline(target, color="k", ls="--", lw=0.8)
    ax_loss.set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log")
    ax_acc.set(xlabel="epoch", ylabel="validation accuracy", ylim=(0.5, 1.0))
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
