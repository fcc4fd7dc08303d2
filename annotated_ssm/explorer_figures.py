"""The explorers' figures: one function per explorer, drawing what its controls chose.

Each returns a matplotlib Figure :data:`~annotated_ssm.plotting.PAGE_WIDTH` inches wide at
100 dpi (the book's text column) in :func:`~annotated_ssm.plotting.page_style`, so the
text stays legible when a phone shrinks the figure to its width. The axes are placed with
fixed margins instead of ``tight_layout``: the sizes and fonts never change, and
``tight_layout`` would draw every figure twice (a redraw must stay under 0.3 s).

This module only draws; :mod:`annotated_ssm.widgets` computes the numbers and wires the
controls.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from . import ssm
from .plotting import PAGE_STYLE, PAGE_WIDTH, basis_functions, complex_plane, figure3_panel, history_reconstruction, page_style

__all__ = ["diagonal_ssm_figure", "hippo_explorer_figure", "discretization_explorer_figure", "s4d_explorer_figure",
           "figure3_explorer_figure", "s5_system_figure"]


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

    with page_style():
        fig = plt.figure(figsize=(PAGE_WIDTH, 5.6))
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
    with page_style():
        fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(PAGE_WIDTH, 5.6))
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


def discretization_explorer_figure(A_bar, t, K, K_bar, *, step: float, method: str):
    """The discretisation explorer: eigenvalues of Ā against the unit circle, and the
    discrete kernel K̄_ℓ against the sampled continuous one Δ·K(ℓΔ).

    Args:
        A_bar: (N,) discrete eigenvalues (their conjugates are drawn too).
        t: (T,) fine times; K: (T,) the continuous kernel at t.
        K_bar: (L,) the discrete kernel, at times ℓΔ.
    """
    A_bar = np.asarray(A_bar)
    with page_style():
        fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 3.6), gridspec_kw={"width_ratios": [1, 1.6]})
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


def figure3_explorer_figure(t, basis, exact, *, N: int, discretization: str):
    """One panel of Figure 3 for the explorer: the S4D-LegS basis (rows of ``basis``) over
    the exact LegS basis (dashed). t: (T,); basis, exact: (4, T)."""
    with page_style():
        fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 3.6))
        figure3_panel(ax, t, basis, exact=exact, title=f"S4D-LegS, N = {N}, {discretization} (dashed: S4-LegS)")
        ax.title.set_fontsize(PAGE_STYLE["axes.titlesize"])
        ax.set_ylim(-2.5, 3.5)
        ax.legend(loc="upper right", ncol=4)
        fig.subplots_adjust(left=0.07, right=0.98, bottom=0.15, top=0.91)
    return fig


def s4d_explorer_figure(A, A_bar, basis, kernel, *, step: float, title: str = ""):
    """The S4D explorer: the discrete eigenvalues Ā in the unit disc, a few basis functions
    Re(B̄_n Ā_n^ℓ)/Δ, and (full width below) the kernel K̄_ℓ for a fixed C.

    Args:
        A, A_bar: (M,) continuous and discrete eigenvalues (A only sets the colours' count).
        basis: (4, L); kernel: (L,); step: Δ.
    """
    with page_style():
        fig = plt.figure(figsize=(PAGE_WIDTH, 5.8))
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
    with page_style():
        fig = plt.figure(figsize=(PAGE_WIDTH, 6.0))
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
