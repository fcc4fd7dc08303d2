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
