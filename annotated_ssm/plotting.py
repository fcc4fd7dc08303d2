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


# --- Chapter 2: HiPPO -------------------------------------------------------------------


# --- Chapter 3: discretisation ----------------------------------------------------------


# --- Chapter 4: S4 ----------------------------------------------------------------------


# --- Chapter 5: DSS ---------------------------------------------------------------------


# --- Chapter 6: S4D (Figures 3 and 4) ---------------------------------------------------


# --- Chapter 7: S5 ----------------------------------------------------------------------


# --- Chapter 8: training ----------------------------------------------------------------
