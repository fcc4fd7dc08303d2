"""Figures the chapters show. Each function returns a matplotlib Figure and never calls
``plt.show()``, so the same code serves the notebooks, the widgets and scripts.

This module only draws: every function takes the arrays it shows, computed by the modules
of their concepts (``ssm``, ``hippo``, ``init``, ``kernels``, ``explorer_numerics``); a
chapter's cell computes, then draws. The explorers' figures live in
:mod:`annotated_ssm.book.explorer_figures`; both use ``PAGE_STYLE`` for figures that must stay
legible on a phone.
"""

from __future__ import annotations

import contextlib

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.layout_engine import ConstrainedLayoutEngine
import numpy as np

__all__ = ["complex_plane", "PAGE_WIDTH", "FIGURE_DPI", "PHONE_COLUMN_PX", "MIN_TEXT_PX",
           "MIN_FONT_PT", "PAGE_STYLE", "page_style", "page_figure", "shown_text_px",
           "smallest_text"]

# The rule every figure of the book follows: the website shows a figure at its drawn width
# in px, shrunk to the text column where it is wider (~750 px on a desktop, PHONE_COLUMN_PX
# on a 400 px phone). A text of p points in a figure W inches wide then measures
# p / 72 * PHONE_COLUMN_PX / W CSS px on the phone whatever the dpi, so legibility there is
# the ratio of font size to figure width: MIN_TEXT_PX needs p / W >= 9 * 72 / 368 = 1.76 pt
# per inch. Figures are drawn PAGE_WIDTH = 6 in wide with no text under MIN_FONT_PT = 11 pt
# (9.4 px on the phone, 15 px, about the body text's 16 px, on a desktop where the 600 px
# figure is shown unscaled); panels that would sit side by side in less than ~3 in each are
# stacked instead, so that their tick labels and titles fit at that size.

#: The width in inches of the book's figures (FIGURE_DPI px wide per inch: 600 px).
PAGE_WIDTH = 6.0
#: The figures' resolution: 1 pt is FIGURE_DPI / 72 px in the drawn image.
FIGURE_DPI = 100
#: The width in CSS px of the website's text column on a 400 px phone.
PHONE_COLUMN_PX = 368
#: The smallest text, in CSS px, that a figure may show in that column.
MIN_TEXT_PX = 9
#: The smallest font size, in points, of the book's figures (PAGE_WIDTH wide, see above).
MIN_FONT_PT = 11
#: The book's figure style (also the chapters' default, ``display.BOOK_STYLE``): fonts no
#: smaller than MIN_FONT_PT and a default size of PAGE_WIDTH, so that a figure made without
#: a ``figsize`` or ``fontsize`` follows the rule.
PAGE_STYLE = {
    "font.size": MIN_FONT_PT, "axes.titlesize": 11.5, "axes.labelsize": MIN_FONT_PT,
    "legend.fontsize": MIN_FONT_PT, "legend.title_fontsize": MIN_FONT_PT,
    "xtick.labelsize": MIN_FONT_PT, "ytick.labelsize": MIN_FONT_PT, "figure.titlesize": 12,
    "figure.figsize": (PAGE_WIDTH, 3.6), "figure.dpi": FIGURE_DPI, "savefig.dpi": FIGURE_DPI,
}


#: Constrained-layout margins (inches) of the chapters' page-width figures: the notebook
#: stores a figure cropped to its content plus 0.1 in on each side, so content that keeps
#: 0.12 in from the edges comes back at most PAGE_WIDTH wide.
PAGE_PADS = {"w_pad": 0.12, "h_pad": 0.06}


@contextlib.contextmanager
def page_style():
    """matplotlib settings of figures meant to be read at any width (see ``PAGE_STYLE``)."""
    with plt.rc_context(PAGE_STYLE):
        yield


def _page_layout():
    """The layout engine of a page-width figure (constrained, with ``PAGE_PADS``)."""
    return ConstrainedLayoutEngine(**PAGE_PADS)


def page_figure(nrows: int = 1, ncols: int = 1, *, height: float, **subplots_kwargs):
    """``plt.subplots`` for a figure of the book: PAGE_WIDTH wide, ``height`` inches tall,
    in ``page_style`` with the constrained layout of ``PAGE_PADS``. Call it inside
    ``page_style()`` when the drawing that follows also creates texts (legends, titles).

    Returns:
        (Figure, axes) as ``plt.subplots`` returns them.
    """
    with page_style():
        return plt.subplots(nrows, ncols, figsize=(PAGE_WIDTH, height), layout=_page_layout(),
                            **subplots_kwargs)


def shown_text_px(fig, fontsize: float, *, column_px: float = PHONE_COLUMN_PX) -> float:
    """The CSS px a text of ``fontsize`` points measures when the website shows ``fig`` in a
    column ``column_px`` wide: its px in the drawn image, scaled down when the image is wider.

    The drawn width is the larger of the figure's and of its content's plus the 0.1 in
    margins a notebook keeps when it stores the figure cropped to its content.
    """
    fig.draw_without_rendering()
    content = fig.get_tightbbox().width + 0.2  # inches
    drawn_px = max(fig.get_size_inches()[0], content) * fig.dpi
    return fontsize * fig.dpi / 72 * min(1.0, column_px / drawn_px)


def smallest_text(fig, *, column_px: float = PHONE_COLUMN_PX):
    """The smallest visible text of ``fig`` (titles, labels, tick labels, legends,
    annotations) as (CSS px in a ``column_px`` column, the Text artist).

    Raises:
        ValueError: the figure shows no text.
    """
    fig.draw_without_rendering()  # makes the tick labels
    texts = [text for text in fig.findobj(matplotlib.text.Text)
             if text.get_visible() and text.get_text().strip()
             and (text.axes is None or text.axes.get_visible())]
    if not texts:
        raise ValueError("the figure shows no text")
    text = min(texts, key=lambda text: text.get_fontsize())
    return shown_text_px(fig, text.get_fontsize(), column_px=column_px), text


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

__all__ += ["forced_response_figure"]


def forced_response_figure(t, force, exact, solver, *, rest: float | None = None):
    """A pushed system at the page's width: the force on top, below the output computed two
    ways (the exact one thick and pale, the ODE solver's dashed on top of it).

    Args:
        t: (T,) times.
        force: (T,) the input u(t).
        exact: (T,) the output from the matrix exponential.
        solver: (T,) the output from a numerical ODE solver.
        rest: if given, the rest position under the force, drawn dotted.
    """
    with page_style():
        fig, (top, bottom) = page_figure(2, 1, height=4.6, sharex=True, height_ratios=[1, 1.6])
        top.plot(t, force, color="tab:orange")
        top.set_ylabel("force u(t)")
        bottom.plot(t, exact, lw=3, color="tab:blue", alpha=0.45, label="matrix exponential")
        bottom.plot(t, solver, lw=1.2, ls="--", color="black", label="ODE solver (DOP853)")
        if rest is not None:
            bottom.axhline(rest, color="0.6", lw=0.8, ls=":")
        bottom.set_ylabel("position y(t)")
        bottom.set_xlabel("t")
        fig.legend(*bottom.get_legend_handles_labels(), loc="outside lower center", ncol=2,
                   frameon=False)
    return fig


# --- Chapter 2: HiPPO -------------------------------------------------------------------

__all__ += ["basis_functions", "history_reconstruction", "signal_figure"]


def signal_figure(t, u, *, title: str | None = None, xlabel: str = "t"):
    """One signal ``u`` (T,) against ``t`` (T,), as wide as the page."""
    with page_style():
        fig, ax = page_figure(height=2.6)
        ax.plot(t, u, lw=1)
        ax.set_xlabel(xlabel)
        if title:
            ax.set_title(title)
    return fig


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
    ax.legend(loc="best")
    return ax


# --- Chapter 3: discretisation ----------------------------------------------------------

__all__ += ["discretization_error_figure"]


def discretization_error_figure(steps, constant: dict, varying: dict, *, varying_title: str):
    """Relative error of each discretisation rule against the step Δ, log-log, at the
    page's width: one panel per system under a constant input (top row), and one wide panel
    for a varying input sampled two ways (bottom), with reference slopes 1 and 2.

    Args:
        steps: (S,) step sizes Δ.
        constant: system name -> {rule -> (S,) errors}, one panel each (two fit the row).
        varying: sampling name -> {rule -> (S,) errors}; the first sampling is drawn with
            solid lines and dots, the second with dashed lines and squares.
        varying_title: the bottom panel's title.
    """
    steps = np.asarray(steps, dtype=float)
    rules = list(next(iter(constant.values())))
    colors = {rule: f"C{i}" for i, rule in enumerate(rules)}
    with page_style():
        fig = plt.figure(figsize=(PAGE_WIDTH, 6.6), layout=_page_layout())
        grid = fig.add_gridspec(2, len(constant))
        top = [fig.add_subplot(grid[0, k]) for k in range(len(constant))]
        bottom = fig.add_subplot(grid[1, :])
        for ax, (name, errors) in zip(top, constant.items()):
            for rule, values in errors.items():
                ax.loglog(steps, values, "o-", ms=3, color=colors[rule], label=rule)
            ax.set_title(name)
        samplings = []
        for (sampling, errors), style in zip(varying.items(), ("o-", "s--")):
            for rule, values in errors.items():
                bottom.loglog(steps, values, style, ms=3.5, color=colors[rule])
            samplings.append(plt.Line2D([], [], color="0.35", ls=style[1:], marker=style[0],
                                        ms=3.5, label=f"input {sampling}"))
        bottom.set_title(varying_title)
        for ax in (*top, bottom):
            slope1, = ax.loglog(steps, 0.5 * steps, "k:", lw=0.9)
            slope2, = ax.loglog(steps, 0.5 * steps**2, "k--", lw=0.9)
            ax.set_xlabel("Δ")
        for ax in top[1:]:
            ax.sharey(top[0])
            ax.tick_params(labelleft=False)
        top[0].set_ylabel("relative error at t = 2\n(constant input u = 1)")
        bottom.set_ylabel("relative error at t = 2")
        handles = [plt.Line2D([], [], color=colors[r], marker="o", ms=3) for r in rules]
        fig.legend([*handles, slope1, slope2], [*rules, "slope 1", "slope 2"],
                   loc="outside upper center", ncol=len(rules) + 2, frameon=False)
        bottom.legend(handles=samplings, loc="lower right", handlelength=2.5)
    return fig


# --- Chapter 4: S4 ----------------------------------------------------------------------

__all__ += ["s4_nodes_figure", "kernel_fit_figure"]


def s4_nodes_figure(Lambda, L: int, step: float, *, resolvent_poles=None):
    """Where S4 evaluates its Cauchy kernel, at the page's width: the roots of unity ω_j
    (left) and their images g(ω_j) = (2/Δ)(1 - ω_j)/(1 + ω_j) on the imaginary axis, next
    to the poles Λ (right); one legend below both panels.

    Args:
        Lambda: (M,) complex, the stored eigenvalues (their conjugates are drawn too).
        L: number of roots of unity.
        step: Δ.
        resolvent_poles: optional (N,) eigenvalues of the full matrix A (the poles of its
            resolvent), drawn as green squares; the right panel then reaches to the leftmost.
    """
    j = np.arange(L)
    omega = np.exp(-2j * np.pi * j / L)
    finite = 2 * j != L
    g = 2 / step * 1j * np.tan(np.pi * j[finite] / L)
    Lambda = np.asarray(Lambda)
    with page_style():
        fig, (left, right) = page_figure(1, 2, height=4.6, width_ratios=[1, 1.45])
        complex_plane(left, omega, unit_circle=True, color="C0")
        left.set_title(f"L = {L} roots of unity")
        complex_plane(right, g, color="C0", label=r"$g(\omega_j)$ (ω = -1 maps to ∞)")
        complex_plane(right, np.concatenate([Lambda, Lambda.conj()]), color="C3", marker="x", s=40,
                      label=r"poles $\Lambda_n$ and conjugates")
        leftmost = -3.0
        if resolvent_poles is not None:
            poles = np.asarray(resolvent_poles)
            right.scatter(poles.real, poles.imag, marker="s", s=24, color="C2",
                          label="eigenvalues of A (poles of the resolvent)")
            leftmost = min(leftmost, poles.real.min() - 1)
        bound = 1.15 * max(np.abs(Lambda.imag).max(), 1.0)
        right.set_ylim(-bound, bound)
        right.set_xlim(leftmost, 1)
        right.set_title(f"nodes and poles\n(Δ = {step:g}; zoomed)")
        fig.legend(*right.get_legend_handles_labels(), loc="outside lower center", ncol=1,
                   frameon=False)
    return fig


def kernel_fit_figure(target, initial, learned, *, titles=None, xlim=None):
    """Target kernels, S4 kernels before and after training, one panel per channel stacked
    top to bottom at the page's width; one legend above the panels.

    Args:
        target, initial, learned: (H, L) arrays.
        titles: H panel titles.
        xlim: (start, stop) of the ℓ axis shown.
    """
    target, initial, learned = (np.atleast_2d(np.asarray(a)) for a in (target, initial, learned))
    H = target.shape[0]
    with page_style():
        fig, axes = page_figure(H, 1, height=0.9 + 2.2 * H, sharex=True, squeeze=False)
        for h, ax in enumerate(axes[:, 0]):
            ax.plot(target[h], color="0.2", lw=3, alpha=0.4, label="target")
            ax.plot(initial[h], color="C0", lw=0.8, ls="--", label="at initialisation (clipped)")
            ax.plot(learned[h], color="C3", lw=1.2, label="after training")
            # Scale to the target: the random initial kernel is much larger and would hide the fit.
            peak = np.max(np.abs(target[h]))
            ax.set_ylim(-0.8 * peak, 1.8 * peak)
            ax.set_title(f"channel {h}" + (f": {titles[h]}" if titles else ""))
            ax.set_ylabel(r"$\bar K_\ell$")
            if xlim is not None:
                ax.set_xlim(*xlim)
        axes[-1, 0].set_xlabel(r"$\ell$ (the skip $D$ is drawn at $\ell = 0$)")
        fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside upper center", ncol=2,
                   frameon=False)
    return fig


# --- Chapter 5: DSS ---------------------------------------------------------------------
__all__ += ["dss_kernels_figure", "skew_hippo_figure"]


def dss_kernels_figure(panels: dict, *, labels=None, ylabel: str = r"$\bar K_\ell$"):
    """Kernels at the page's width, one panel per entry stacked top to bottom over a shared
    time axis: ``panels`` maps a title to kernels (C, L), one line per row.

    Args:
        panels: title -> (C, L) array (or (L,)).
        labels: optional C legend labels, shown once above the panels.
        ylabel: the y axis label of every panel.

    Returns:
        the Figure (x axis the time index ℓ).
    """
    with page_style():
        fig, axes = page_figure(len(panels), 1, height=1.2 + 2.0 * len(panels), sharex=True,
                                squeeze=False)
        for ax, (title, K) in zip(axes[:, 0], panels.items()):
            K = np.atleast_2d(np.asarray(K))
            for i, row in enumerate(K):
                ax.plot(np.arange(K.shape[-1]), row, lw=1.1,
                        label=None if labels is None else labels[i])
            ax.set_title(title)
            ax.set_ylabel(ylabel)
        axes[-1, 0].set_xlabel(r"$\ell$")
        if labels is not None:
            fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside upper center",
                       ncol=len(labels), frameon=False)
    return fig


def skew_hippo_figure(skew_hippo, legs_eigenvalues, t, *, basis: int = 4):
    """At the page's width, top: the skew-HiPPO spectrum (kept half filled, conjugates
    hollow) and LegS's real eigenvalues -(n+1) in the complex plane. Bottom: Re e^{λ_n t} for
    the ``basis`` slowest-oscillating kept eigenvalues.

    Args:
        skew_hippo: (N/2,) complex, the kept eigenvalues (Im > 0).
        legs_eigenvalues: (N,) eigenvalues of HiPPO-LegS.
        t: (T,) times.
    """
    skew_hippo = np.asarray(skew_hippo)
    with page_style():
        fig, (top, bottom) = page_figure(2, 1, height=7.0)
        complex_plane(top, skew_hippo, label="skew-HiPPO (kept)", color="C0")
        complex_plane(top, skew_hippo.conj(), label="conjugates (implied)", facecolors="none",
                      edgecolors="C0")
        complex_plane(top, legs_eigenvalues, label="HiPPO-LegS", color="C3", marker="x")
        # Imaginary parts span 0.3 … N²/π: a symmetric log scale shows all of them.
        top.set_yscale("symlog", linthresh=1.0)
        top.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), borderaxespad=0)
        top.set_title("eigenvalues (Im on a symmetric log scale)")
        slowest = np.argsort(skew_hippo.imag)[:basis]
        for n in slowest:
            lam = skew_hippo[n]
            bottom.plot(t, np.real(np.exp(lam * t)), lw=1, label=f"Im $\\lambda$ = {lam.imag:.2f}")
        bottom.set_xlabel("$t$")
        bottom.set_title(r"basis functions Re $e^{\lambda_n t}$")
        bottom.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), borderaxespad=0)
    return fig


# --- Chapter 6: S4D (Figures 3 and 4) ---------------------------------------------------

__all__ += ["figure3", "figure3_panel", "figure4"]


def figure3_panel(ax, t, basis, *, exact=None, title: str = ""):
    """One panel of Figure 3: basis functions (rows of ``basis``) over t, the exact LegS basis
    dashed underneath when given."""
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, row in enumerate(basis):
        ax.plot(t, row, color=colors[n % len(colors)], lw=1.1, label=f"$K_{n}$")
        if exact is not None:
            ax.plot(t, exact[n], color="k", lw=0.8, ls="--", alpha=0.7)
    ax.set_title(title)
    ax.set_xlabel("t")
    ax.axhline(0, color="0.8", lw=0.6)
    return ax


def figure3(t, exact, ssm_kernel, panels: dict):
    """The S4D paper's Figure 3 at the page's width: (a) S4-LegS exact (closed form) with its
    own SSM kernel dotted on top; then one panel (b), (c), … per S4D-LegS basis. One legend
    above the panels. The arrays come from
    :func:`annotated_ssm.book.explorer_numerics.figure3_data` (``plotting.figure3(*data)``).

    Args:
        t: (T,) times.
        exact: (4, T) S4-LegS's closed-form basis.
        ssm_kernel: (4, T) S4-LegS's own discrete kernel / Δ.
        panels: {(N, method): (4, T) S4D-LegS basis}, three entries for the 2×2 grid.
    """
    if len(panels) != 3:
        raise ValueError(f"panels must hold three S4D-LegS bases (b), (c), (d); got {len(panels)}.")
    names = {"zoh": "ZOH"}
    with page_style():
        fig, axes = page_figure(2, 2, height=6.0, sharex=True, sharey=True)
        axes = axes.ravel()
        figure3_panel(axes[0], t, exact, title="(a) S4-LegS: closed form")
        for n, row in enumerate(ssm_kernel):
            axes[0].plot(t, row, color="k", lw=0.9, ls=":",
                         label="(a): SSM kernel / Δ" if n == 0 else None)
        for ax, letter, ((N, method), basis) in zip(axes[1:], "bcd", panels.items()):
            title = f"({letter}) S4D-LegS, {names.get(method, method)}, N = {N}"
            figure3_panel(ax, t, basis, title=title)
        for ax in axes[:2]:
            ax.set_xlabel("")
        axes[0].set_ylim(-2.5, 3.5)
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper center", ncol=5,
                   frameon=False, columnspacing=1.2, handlelength=1.6)
    return fig


def figure4(inits: dict, N: int):
    """Imaginary parts Im(A_n), n = 0 … N/2-1, on log-log axes (S4D paper, Figure 4).

    Args:
        inits: label -> (N/2,) complex eigenvalues.
    """
    markers = "osd^v<>"
    with page_style():
        fig, ax = page_figure(height=4.0)
        for i, (label, A) in enumerate(inits.items()):
            n = np.arange(len(A))
            imag = np.abs(np.imag(A))
            keep = imag > 0  # log axes: S4D-Lin's n = 0 frequency is 0
            ax.loglog(n[keep] + 1, imag[keep], markers[i % len(markers)], ms=3.5, label=label,
                      alpha=0.8)
        ax.set_xlabel("n + 1")
        ax.set_ylabel(r"Im $A_n$")
        ax.set_title(f"Imaginary parts of the diagonal initialisations, N = {N}")
        ax.legend()
    return fig


# --- Chapter 7: S5 ----------------------------------------------------------------------

__all__ += ["block_eigenvalues_figure", "scan_tree_figure", "scan_timing_figure",
            "irregular_sampling_figure"]


def block_eigenvalues_figure(spectra: dict, *, title: str | None = None):
    """Eigenvalues in the complex plane at the page's width, one panel per entry side by side
    (``spectra``: panel title -> (M,) complex), each with its own Im scale."""
    with page_style():
        fig, axes = page_figure(1, len(spectra), height=3.6, squeeze=False)
        for ax, (name, eigenvalues) in zip(axes[0], spectra.items()):
            eigenvalues = np.asarray(eigenvalues)
            complex_plane(ax, eigenvalues, c="C0", s=30)
            ax.set_title(name)
            # Half a unit of room either side of the eigenvalues and of the axis Re = 0.
            ax.set_xlim(min(eigenvalues.real.min(), 0) - 0.5, max(eigenvalues.real.max(), 0) + 0.5)
            ax.xaxis.set_major_locator(plt.MaxNLocator(3))
        for ax in axes[0, 1:]:
            ax.set_ylabel("")
        if title:
            fig.suptitle(title)
    return fig


def scan_tree_figure(levels, length: int, *, level_labels=None, title: str | None = None):
    """How an associative scan combines its elements, level by level, at the page's width.

    Row 0 holds the elements c_0 … c_{L-1}; row k what each position holds after level k. A box
    "a–b" holds c_a • c_{a+1} • … • c_b. The structure is given, not computed: chapter 7 records
    it from ``jax.lax.associative_scan`` itself.

    Args:
        levels: one list per level, in the order the levels run, of the combinations made in it:
            ``((a, b), (b + 1, c))`` combines the element holding c_a … c_b with the one holding
            c_{b+1} … c_c; the result, c_a … c_c, is drawn at position c (where the right one is).
        length: L, the number of elements.
        level_labels: a name per level (default "level 1", "level 2", …).
        title: drawn above the rows.

    Raises:
        ValueError: a combination of ranges that do not meet, or beyond position L - 1.
    """
    held = [(i, i) for i in range(length)]  # what each position holds, as a range of inputs
    rows = [list(held)]
    for level in levels:
        for left, right in level:
            if (left[1] + 1 != right[0] or right[1] >= length or left[0] > left[1]
                    or right[0] > right[1]):
                raise ValueError(f"cannot combine the ranges {tuple(left)} and {tuple(right)} "
                                 f"of {length} elements")
            held[right[1]] = (left[0], right[1])
        rows.append(list(held))
    labels = ["inputs"] + list(level_labels or [f"level {k + 1}" for k in range(len(levels))])
    if len(labels) != len(rows):
        raise ValueError(f"{len(levels)} levels but {len(labels) - 1} level labels")
    blue, grey = "C0", "0.6"
    with page_style():
        fig, ax = page_figure(height=0.75 * len(rows) + 1.0)
        for r, row in enumerate(rows):
            changed = {right[1]: left[1] for left, right in levels[r - 1]} if r else {}
            for i, (first, last) in enumerate(row):
                text = f"{first}" if first == last else f"{first}–{last}"
                new = i in changed
                ax.text(i, -r, text, ha="center", va="center",
                        color="k" if new or not r else "0.45",
                        bbox=dict(boxstyle="round,pad=0.3", fc="#cfe2f3" if new else "white",
                                  ec=blue if new else grey, lw=1.2 if new else 0.8))
                if not r:
                    continue
                arrows = [(i, grey, 0.8)] if not new else [(i, blue, 1.3), (changed[i], blue, 1.3)]
                for source, color, width in arrows:
                    ax.annotate("", xy=(i, -r), xytext=(source, -(r - 1)),
                                arrowprops=dict(arrowstyle="-|>" if color == blue else "-",
                                                color=color, lw=width, shrinkA=11, shrinkB=11,
                                                mutation_scale=12))
        ax.set_xlim(-0.6, length - 0.4)
        ax.set_ylim(-(len(rows) - 1) - 0.5, 0.5)
        ax.set_yticks([-r for r in range(len(rows))], labels)
        ax.set_xticks(range(length))
        ax.set_xlabel(r"position $\ell$ (a box a–b holds $c_a \bullet \cdots \bullet c_b$)")
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        if title:
            ax.set_title(title)
    return fig


def scan_timing_figure(lengths, timings: dict, *, title: str | None = None):
    """Wall-clock time against sequence length L, log-log, one line per method.

    Args:
        lengths: (K,) sequence lengths.
        timings: label -> (K,) seconds per call.
        title: what was measured, and on which device (the times hold for it only).
    """
    with page_style():
        fig, ax = page_figure(height=3.8)
        for label, seconds in timings.items():
            ax.loglog(lengths, np.asarray(seconds) * 1e3, "o-", label=label)
        ax.set_xlabel("sequence length L")
        ax.set_ylabel("time per call (ms)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        if title:
            ax.set_title(title)
    return fig


def irregular_sampling_figure(t_fine, target_fine, t_obs, observations, predictions: dict, *,
                              observed_label: str = "observed", target_label: str = "target"):
    """Top: a signal and its irregular observations. Bottom: a target against predictions.

    Args:
        t_fine, target_fine: (T,) the dense target trajectory (for reference).
        t_obs: (L,) observation times; observations: (L,) the observed values.
        predictions: label -> (L,) predictions of the target at the observation times.
    """
    with page_style():
        fig, axes = page_figure(2, 1, height=5.2, sharex=True)
        axes[0].plot(t_obs, observations, "o", ms=3.5, color="C0", label=observed_label)
        axes[0].vlines(t_obs, 0, observations, color="C0", alpha=0.25, lw=0.8)
        axes[0].axhline(0, color="0.7", lw=0.8)
        axes[0].legend(loc="upper right")
        axes[1].plot(t_fine, target_fine, color="black", lw=2, alpha=0.35, label=target_label)
        for (label, values), marker in zip(predictions.items(), "xs^v"):
            axes[1].plot(t_obs, values, marker, ms=4, ls="", label=label)
        axes[1].set_xlabel("time t")
        axes[1].legend(loc="upper right")
    return fig


# --- Chapter 8: training ----------------------------------------------------------------
__all__ += ["sequence_examples", "learning_curves", "digit_completions"]


def sequence_examples(x, y, *, n: int = 10, title: str | None = None):
    """One small panel per class, at the page's width in rows of five: the first example of
    each label. x: (n, L, 1), y: (n,)."""
    x, y = np.asarray(x), np.asarray(y)
    labels = sorted(set(y.tolist()))[:n]
    rows = -(-len(labels) // 5)
    with page_style():
        fig, axes = page_figure(rows, min(len(labels), 5), height=0.5 + 1.5 * rows,
                                sharey=True, squeeze=False)
        for ax in axes.ravel()[len(labels):]:
            ax.set_visible(False)
        for ax, label in zip(axes.ravel(), labels):
            ax.plot(x[np.flatnonzero(y == label)[0], :, 0], color="C0", lw=1.4)
            ax.set_title(str(label))
            ax.set_xticks([])
            ax.set_yticks([])
        if title:
            fig.suptitle(title)
    return fig


def learning_curves(histories: dict, *, references: dict | None = None, target: float | None = None):
    """Training loss (top) and per-epoch validation accuracy (bottom) at the page's width,
    one colour per run name.

    Args:
        histories: name -> ``annotated_ssm.train.History`` or a list of them (seeds of one
            configuration: thin lines of one colour; a dot marks the epoch each run kept).
        references: name -> accuracy, drawn as dotted horizontal lines (e.g. published baselines).
        target: an accuracy bar drawn as a dashed line.
    """
    with page_style():
        fig, (ax_loss, ax_acc) = page_figure(2, 1, height=6.4, sharex=True)
        _draw_learning_curves(ax_loss, ax_acc, histories, references, target)
    return fig


def _draw_learning_curves(ax_loss, ax_acc, histories: dict, references, target) -> None:
    """The lines of ``learning_curves`` on its two axes."""
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
        ax_acc.annotate(name, (0.02, value), xycoords=("axes fraction", "data"), ha="left",
                        va="bottom", color="0.3")
    if target is not None:
        ax_acc.axhline(target, color="k", ls="--", lw=0.8)
    ax_loss.set(ylabel="training loss\n(cross-entropy)", yscale="log")
    ax_acc.set(xlabel="epoch", ylabel="validation accuracy", ylim=(0.5, 1.0))
    ax_acc.legend(frameon=False, loc="lower right")


def digit_completions(truth, completions, *, prompt_rows: int = 4):
    """8x8 images, originals above and completions below; a red line marks where the
    model took over. truth, completions: (n, 64) pixels in [0, 1]."""
    truth, completions = np.asarray(truth), np.asarray(completions)
    n = len(truth)
    side = min(1.1, (PAGE_WIDTH - 0.6) / n)  # inches per image, all n in the page's width
    with page_style():
        fig, axes = page_figure(2, n, height=0.3 + 2.1 * side, squeeze=False)
        for k in range(n):
            for row, (images, name) in enumerate(((truth, "original"), (completions, "completed"))):
                ax = axes[row, k]
                ax.imshow(images[k].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
                ax.set_xticks([])
                ax.set_yticks([])
                if row == 1:
                    ax.axhline(prompt_rows - 0.5, color="r", lw=1.5)
                if k == 0:
                    ax.set_ylabel(name)
    return fig


__all__ += ["accuracy_bars_figure", "mode_survival_figure"]


def accuracy_bars_figure(accuracies: dict, *, chance: float | None = None):
    """One bar per layer: the mean test accuracy over seeds, with the sample standard
    deviation as an error bar and each seed as a dot.

    Args:
        accuracies: layer name -> per-seed accuracies (fractions in [0, 1]).
        chance: drawn as a dotted line where given.
    """
    names = list(accuracies)
    values = [100 * np.asarray(accuracies[name], dtype=float) for name in names]
    means = [v.mean() for v in values]
    spreads = [v.std(ddof=1) if v.size > 1 else 0.0 for v in values]
    with page_style():
        fig, ax = page_figure(height=3.2)
        positions = np.arange(len(names))
        ax.bar(positions, means, yerr=spreads, capsize=6, color=[f"C{i}" for i in positions],
               alpha=0.6)
        for x, v in zip(positions, values):
            ax.plot(np.full(v.shape, x), v, "o", color="black", ms=4)
        if chance is not None:
            ax.axhline(100 * chance, color="0.4", ls=":", lw=1)
        low = min(v.min() for v in values)
        ax.set_ylim(max(0.0, low - 5), min(100.0, max(v.max() for v in values) + 3))
        ax.set_xticks(positions, names)
        ax.set_ylabel("test accuracy, %")
    return fig


def mode_survival_figure(spectra: dict, *, steps: int, turn: float, keep: float = 0.1,
                         floor: float = 1e-8):
    """Each mode's amplitude left after ``steps`` steps, |Ā|^steps, against the angle it turns
    per step, |arg Ā|: one panel per initialisation, the region of modes that both keep
    ``keep`` of their amplitude and turn by at least ``turn`` shaded.

    Args:
        spectra: title -> complex Ā of the modes (any shape).
        steps: the steps a mode must survive (L - 40 in chapter 8).
        turn: the smallest useful angle per step, in radians.
        keep: the smallest useful amplitude left after ``steps`` steps.
        floor: amplitudes below it are drawn at it (the axis is logarithmic).
    """
    with page_style():
        fig, axes = page_figure(len(spectra), 1, height=0.6 + 2.2 * len(spectra), sharex=True,
                                sharey=True, squeeze=False)
        for ax, (title, A_bar) in zip(axes[:, 0], spectra.items()):
            A_bar = np.asarray(A_bar).ravel()
            left = np.maximum(np.abs(A_bar) ** steps, floor)
            angle = np.abs(np.angle(A_bar))
            useful = (left >= keep) & (angle >= turn)
            ax.fill_between([turn, np.pi], keep, 3, color="C2", alpha=0.15, lw=0)
            ax.plot([turn, turn, np.pi], [3, keep, keep], color="C2", lw=1)
            ax.plot(angle, left, ".", color="C0", ms=3, alpha=0.6)
            ax.set_yscale("log")
            ax.set_xscale("log")
            ax.set_ylim(floor / 3, 3)
            ax.set_title(f"{title}: {int(useful.sum())} of {A_bar.size} modes useful")
            ax.set_ylabel(rf"$|\bar A|^{{{steps}}}$")
        axes[-1, 0].set_xlabel(r"$|\arg \bar A|$ per step (rad)")
        axes[-1, 0].set_xlim(1e-5, np.pi)
    return fig


# --- Chapter 9: selective state spaces --------------------------------------------------
__all__ += ["input_weights_figure"]


def input_weights_figure(panels: dict, *, ylabel: str = "weight"):
    """Side by side, for each layer, how much each input position weighs in one output,
    for a few inputs: |weight| on a log axis (a page-width figure, chapter 9's first).

    Args:
        panels: title -> {input label -> (L,) weights of positions 0 … L-1}.
        ylabel: the quantity (e.g. the derivative of the last output by each input).
    """
    with page_style():
        fig, axes = page_figure(1, len(panels), height=3.2, sharey=True, squeeze=False)
        for ax, (title, weights) in zip(axes[0], panels.items()):
            for (label, w), style in zip(weights.items(), ("-", "--", ":", "-.")):
                ax.plot(np.abs(np.asarray(w)), style, lw=2, label=label)
            ax.set_yscale("log")
            ax.set_title(title)
            ax.set_xlabel("position s")
        axes[0, 0].set_ylabel(ylabel)
        axes[0, -1].legend()
    return fig


__all__ += ["delta_by_token_figure"]


def delta_by_token_figure(on_data, on_noise, *, ratio: float = 3.0):
    """Per channel, the median step Δ a selective layer chose on data tokens and on noise
    tokens, channels sorted by their ratio, on a log axis.

    Args:
        on_data, on_noise: (H,) median Δ of each channel on the two kinds of token.
        ratio: channels whose Δ on data is more than ``ratio`` times that on noise are
            counted in the title.
    """
    on_data, on_noise = np.asarray(on_data, dtype=float), np.asarray(on_noise, dtype=float)
    order = np.argsort(on_data / on_noise)[::-1]
    opened = int(np.sum(on_data > ratio * on_noise))
    with page_style():
        fig, ax = page_figure(height=3.4)
        channels = np.arange(on_data.size)
        ax.vlines(channels, on_noise[order], on_data[order], color="0.7", lw=1)
        ax.plot(channels, on_data[order], "o", color="C1", ms=5, label="data tokens")
        ax.plot(channels, on_noise[order], "s", color="C0", ms=4, label="noise tokens")
        ax.set_yscale("log")
        ax.set_xlabel("channel (sorted by the ratio)")
        ax.set_ylabel("median step Δ")
        ax.set_title(f"{opened} of {on_data.size} channels: Δ on data > {ratio:g} × on noise")
        ax.legend(loc="upper right")
    return fig


# --- Chapter 5: which kernels depend on the length they are computed for ------------------
__all__ += ["kernel_lengths_figure"]


def kernel_lengths_figure(panels: dict, *, short: int, long: int):
    """One panel per parameterisation (two per row): the kernel computed for length
    ``short``, and over it, dashed, the first ``short`` taps of the kernel computed for
    ``long``. Where the two lines coincide, the kernel does not depend on the length.

    Args:
        panels: title -> (kernel at ``short`` (short,), kernel at ``long`` (long,)).
        short, long: the two lengths, for the legend.
    """
    rows = -(-len(panels) // 2)
    with page_style():
        fig, axes = page_figure(rows, 2, height=0.8 + 2.2 * rows, sharex=True, squeeze=False)
        for ax, (title, (K_short, K_long)) in zip(axes.flat, panels.items()):
            K_short, K_long = np.asarray(K_short), np.asarray(K_long)[:short]
            ax.plot(K_short, color="C0", lw=2.2, label=f"L = {short}")
            ax.plot(K_long, "--", color="C1", lw=1.2, label=f"L = {long}, first {short} taps")
            ax.set_title(title)
        for ax in axes.flat[len(panels):]:  # an odd count: the panel above shows the axis
            ax.set_visible(False)
            if rows > 1:
                axes[-2, 1].xaxis.set_tick_params(labelbottom=True)
                axes[-2, 1].set_xlabel(r"$\ell$")
        for ax in axes[-1]:
            ax.set_xlabel(r"$\ell$")
        for ax in axes[:, 0]:
            ax.set_ylabel(r"$\bar K_\ell$")
        fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside upper center",
                   ncol=2, frameon=False)
    return fig


# --- Chapter 3: stability regions -------------------------------------------------------
__all__ += ["stability_map_figure"]


def stability_map_figure(real, imag, magnitudes: dict, *, points=None,
                         points_label: str | None = None, stable: dict | None = None,
                         inset=None):
    """Where each discretisation rule is stable, as maps of the complex plane z = Δλ: one
    panel per rule, side by side, |Ā(z)| shaded where it is below 1 (a stable recurrence),
    the line |Ā(z)| = 1 drawn, and the edge of the stable continuous half plane Re z < 0
    dashed.

    Args:
        real: (X,) real parts of the grid.
        imag: (Y,) imaginary parts of the grid.
        magnitudes: rule -> (Y, X) |Ā(z)| at z = real + i imag.
        points: complex z to mark on every panel (the eigenvalues of ΔA of a system).
        points_label: their legend entry.
        stable: rule -> (n,) bools, whether that rule keeps each point stable (|Ā| < 1):
            filled dots where it does, hollow ones where not, and the count in the title.
        inset: (real, imag, magnitude) of the first rule on a finer grid, drawn as a zoomed
            inset in its panel (where points crowd near z = 0).
    """
    real, imag = np.asarray(real, dtype=float), np.asarray(imag, dtype=float)
    levels = np.linspace(0.0, 1.0, 6)
    z = None if points is None else np.asarray(points).ravel()

    def draw_points(ax, rule, size):
        kept = np.ones(z.size, bool) if stable is None else np.asarray(stable[rule], bool)
        ax.plot(z.real[kept], z.imag[kept], "o", color="C1", ms=size, mec="black", mew=0.4)
        ax.plot(z.real[~kept], z.imag[~kept], "o", mfc="white", mec="C3", ms=size, mew=0.9)

    with page_style():
        fig, axes = page_figure(1, len(magnitudes), height=4.2 if stable else 3.9,
                                sharex=True, sharey=True, squeeze=False)
        for ax, (rule, magnitude) in zip(axes[0], magnitudes.items()):
            shaded = ax.contourf(real, imag, magnitude, levels=levels, cmap="Blues_r")
            ax.contour(real, imag, magnitude, levels=[1.0], colors="black", linewidths=1.5)
            ax.axvline(0.0, color="C3", ls="--", lw=1.2)
            if z is not None:
                draw_points(ax, rule, 3.5)
            ax.set_aspect("equal")
            ax.set_title(rule if stable is None
                         else f"{rule}\n{int(np.sum(stable[rule]))} of {z.size} stable")
            ax.set_xlabel("Re z")
        axes[0, 0].set_ylabel("Im z")
        if inset is not None:
            zoom_real, zoom_imag, zoom_magnitude = (np.asarray(a, dtype=float) for a in inset)
            ax, rule = axes[0, 0], next(iter(magnitudes))
            zoom = ax.inset_axes([0.03, 0.03, 0.36, 0.84])
            zoom.contourf(zoom_real, zoom_imag, zoom_magnitude, levels=levels, cmap="Blues_r")
            zoom.contour(zoom_real, zoom_imag, zoom_magnitude, levels=[1.0], colors="black",
                         linewidths=1.5)
            zoom.axvline(0.0, color="C3", ls="--", lw=1.2)
            if z is not None:
                draw_points(zoom, rule, 4)
            zoom.set(xlim=(zoom_real[0], zoom_real[-1]), ylim=(zoom_imag[0], zoom_imag[-1]),
                     xticks=[], yticks=[])
            zoom.set_title("zoom", pad=2)
            zoom.spines[:].set_visible(True)  # the book style hides the top and right ones
            ax.indicate_inset_zoom(zoom, edgecolor="0.3")
        handles = [plt.Line2D([], [], color="black", lw=1.5),
                   plt.Line2D([], [], color="C3", ls="--", lw=1.2)]
        labels = ["|Ā| = 1", "Re z = 0"]
        if z is not None:
            handles.append(plt.Line2D([], [], ls="", marker="o", color="C1", ms=3.5, mec="black",
                                      mew=0.4))
            labels.append(points_label or "points")
        if stable is not None:
            labels[-1] += ", stable"
            handles.append(plt.Line2D([], [], ls="", marker="o", mfc="white", mec="C3", ms=3.5,
                                      mew=0.9))
            labels.append("unstable")
        fig.legend(handles, labels, loc="outside upper center", ncol=len(labels),
                   frameon=False, columnspacing=1.0, handletextpad=0.4)
        fig.colorbar(shaded, ax=axes[0].tolist(), orientation="horizontal", shrink=0.7,
                     label="|Ā(z)| where below 1", ticks=levels)
    return fig


# --- Chapter 4: S4 (the kernel at initialisation, the folded tail, C̃ against LΔ) --------
__all__ += ["s4_init_kernels_figure", "folded_kernel_figure", "c_tilde_gap_figure"]


def s4_init_kernels_figure(kernels: dict, reach: dict, *, fraction: float = 0.01):
    """Kernels of one S4 channel at several steps Δ, one panel each, stacked on a shared log ℓ
    axis (ℓ ≥ 1), each scaled to its largest tap; a dotted line marks its reach, the last tap
    above ``fraction`` of that largest one (measured by the caller, which checks it).

    Args:
        kernels: {label: (L,) kernel}, e.g. {"Δ = 0.001": K, ...}.
        reach: {label: index of the last tap above ``fraction`` of the largest}.
        fraction: the level the reach was measured at (for the titles).
    """
    n = len(kernels)
    with page_style():
        fig, axes = page_figure(n, 1, height=0.9 + 1.5 * n, sharex=True, sharey=True, squeeze=False)
        for index, (ax, (label, kernel)) in enumerate(zip(axes[:, 0], kernels.items())):
            kernel = np.asarray(kernel, dtype=float)
            scaled = kernel / np.max(np.abs(kernel))
            last = reach[label]
            ax.plot(np.arange(1, scaled.size), scaled[1:], color=f"C{index}", lw=1)
            ax.axvline(last, color="0.3", lw=1, ls=":")
            ax.axhline(0, color="0.6", lw=0.6)
            ax.set_xscale("log")
            ax.set_title(f"{label}: last tap above {fraction:.0%} at ℓ = {last}")
        axes[-1, 0].set_xlabel(r"$\ell$ (steps into the past)")
        fig.supylabel(r"$\bar K_\ell$ / largest tap")
    return fig


def folded_kernel_figure(kernel, L: int, folded, truncated):
    """What the inverse FFT of the untruncated generating function returns: the kernel's taps
    over several windows of length L (top), and on the first window (bottom) the kernel, the
    folded sum Σ_m K̄_{ℓ+mL} and the result with C̃ (on the kernel); one legend below.

    Args:
        kernel: (mL,) the kernel over m windows.
        L: the window length.
        folded: (L,) the inverse FFT of the generating function with C (the folded kernel).
        truncated: (L,) the inverse FFT with C̃.
    """
    kernel = np.asarray(kernel, dtype=float)
    with page_style():
        fig, (top, bottom) = page_figure(2, 1, height=5.9)
        top.plot(kernel, color="0.2", lw=1.2)
        for start in range(L, kernel.size, L):
            top.axvline(start, color="C0", lw=0.8, ls="--")
        top.set_title(f"the kernel, in windows of L = {L} taps")
        top.set_xlabel(r"$\ell$")
        top.set_ylabel(r"$\bar K_\ell$")
        bottom.plot(kernel[:L], color="0.2", lw=3, alpha=0.4,
                    label=r"kernel $\bar K_\ell$, $\ell < L$")
        bottom.plot(folded, color="C3", lw=1.2, label=r"iFFT with $C$: $\sum_m \bar K_{\ell + mL}$")
        bottom.plot(truncated, "o", color="C0", ms=3.5, label=r"iFFT with $\tilde C$")
        bottom.set_title("the first window: the tail folds back")
        bottom.set_xlabel(r"$\ell$")
        bottom.set_ylabel(r"$\bar K_\ell$")
        fig.legend(*bottom.get_legend_handles_labels(), loc="outside lower center", ncol=2,
                   frameon=False)
    return fig


def c_tilde_gap_figure(durations, gaps: dict, *, marked: dict | None = None):
    """The relative distance |C̃ - C| / |C| against the window's duration LΔ, one line per step
    Δ, on a log y axis.

    Args:
        durations: (n,) the values of LΔ.
        gaps: {label: (n,) |C̃ - C| / |C| at those durations}.
        marked: optional {label: (LΔ, gap)} single points to mark and name.
    """
    with page_style():
        fig, ax = page_figure(height=3.6)
        styles = ("-", "--", ":")
        for index, (label, gap) in enumerate(gaps.items()):
            ax.plot(durations, gap, color=f"C{index}", lw=1.6, ls=styles[index % 3], label=label)
        middle = np.mean(ax.get_xlim())
        for label, (duration, gap) in (marked or {}).items():
            ax.plot(duration, gap, "o", color="0.2", ms=5)
            # The name above and right of the point, or below and left: off the falling curve.
            right = duration > middle
            ax.annotate(label, (duration, gap), xytext=(-6, -6) if right else (6, 4),
                        textcoords="offset points", ha="right" if right else "left",
                        va="top" if right else "bottom")
        ax.set_yscale("log")
        ax.set_xlabel(r"$L\Delta$ (the window's duration)")
        ax.set_ylabel(r"$|\tilde C - C| \,/\, |C|$")
        ax.set_title(r"$\tilde C = C(I - \bar A^L)$ meets $C$ as $\bar A^L$ decays")
        ax.legend(loc="lower left")
    return fig


# --- Chapter 9: Mamba's block ---------------------------------------------------------------
__all__ += ["mamba_block_figure"]


def mamba_block_figure(*, expand: int = 2, d_conv: int = 4):
    """Mamba's block as a dataflow diagram, each arrow labelled with its array's shape, for a
    batch of B sequences of L steps with H channels, E = ``expand`` · H inner channels, W =
    ``d_conv`` taps and N states per channel: in_proj to x and z, causal depthwise conv1d and
    SiLU on x, S6, the gate y · SiLU(z), out_proj. The two boxes that carry a state from step
    to step (the recurrence) say which. The shapes are drawn, not computed.
    """
    inner = "(B, L, E)"
    left, right, middle = 2.9, 8.2, 5.0
    # name: (x, y, text, face colour), top to bottom
    boxes = {
        "in": (middle, 8.2, f"in_proj: H → 2E  (E = {expand}H)", "#e8e8e8"),
        "conv": (left, 6.3, f"causal depthwise conv1d, W = {d_conv}\n"
                            f"state: last {d_conv - 1} inputs (B, {d_conv - 1}, E)", "#cfe2f3"),
        "silu x": (left, 4.95, "SiLU", "#e8e8e8"),
        "s6": (left, 3.6, "S6: Δ, B, C from x\nstate (B, E, N)", "#f9cb9c"),
        "silu z": (right, 3.6, "SiLU", "#e8e8e8"),
        "gate": (middle, 2.15, "y · SiLU(z)", "#e8e8e8"),
        "out": (middle, 1.0, "out_proj: E → H", "#e8e8e8"),
    }
    # (from, to, label): an arrow between two boxes, its label beside it on the outer side
    arrows = [("in", "conv", "x " + inner), ("in", "silu z", "z " + inner),
              ("conv", "silu x", inner), ("silu x", "s6", inner), ("s6", "gate", "y " + inner),
              ("silu z", "gate", inner), ("gate", "out", inner)]
    with page_style():
        fig, ax = page_figure(height=5.0)
        ax.set_xlim(0, 10)
        ax.set_ylim(-0.1, 9.6)
        ax.set_axis_off()
        texts = {name: ax.text(x, y, text, ha="center", va="center", multialignment="center",
                               bbox=dict(boxstyle="round,pad=0.35", fc=colour, ec="0.3", lw=1))
                 for name, (x, y, text, colour) in boxes.items()}
        fig.draw_without_rendering()
        to_data = ax.transData.inverted()
        extent = {name: to_data.transform(text.get_bbox_patch().get_window_extent())
                  for name, text in texts.items()}  # [[x0, y0], [x1, y1]] in data units

        def arrow(start, end):
            ax.annotate("", xy=end, xytext=start, arrowprops=dict(
                arrowstyle="-|>", color="0.3", lw=1.2, mutation_scale=12, shrinkA=0, shrinkB=0))

        def label(x, y, text, side):
            ax.text(x + (0.2 if side == "right" else -0.2), y, text, va="center",
                    ha="left" if side == "right" else "right")

        ax.text(middle, 9.35, "u (B, L, H)", ha="center", va="center")
        arrow((middle, 9.05), (middle, extent["in"][1, 1]))
        for start, end, text in arrows:
            x0, x1 = boxes[start][0], boxes[end][0]
            if start == "in":  # leave in_proj's bottom edge towards the branch
                x0 = middle + (x1 - middle) * 0.35
            elif x0 != x1:  # enter the gate from its side
                x1 = x1 + 0.5 * np.sign(x0 - x1)
            y0, y1 = extent[start][0, 1], extent[end][1, 1]
            arrow((x0, y0), (x1, y1))
            side = "right" if x0 > middle or (x0 == x1 == middle) else "left"
            label((x0 + x1) / 2, (y0 + y1) / 2, text, side)
        arrow((middle, extent["out"][0, 1]), (middle, 0.05))
        label(middle, 0.25, "(B, L, H)", "right")
    return fig
