"""The explorers' figures: one class per explorer, drawing what its controls chose.

An explorer redraws its figure whenever a control moves, and a redraw must take well under
0.3 s on a laptop's CPU. Building a matplotlib figure is most of that time: the figure, its
axes and a tick object for every tick mark cost more than drawing them. So each class
builds ONE figure when the explorer is made (axes, labels, styled but empty lines) and its
``update`` method only sets data, texts and axis limits, then returns that same figure.

``update`` sets everything that depends on its arguments, the axis limits included, from
its arguments alone (never from matplotlib's autoscaling of what was drawn before): the
image for given values is the same whatever values came before, so the live widget and
the website's precomputed frames agree (tests/test_widgets.py checks it byte for byte).

The figures are :data:`~annotated_ssm.book.plotting.PAGE_WIDTH` inches wide in
:func:`~annotated_ssm.book.plotting.page_style`, the book's rule for figures whose text stays at
least 9 px when a phone shrinks them to its column (see :mod:`annotated_ssm.book.plotting`). The axes are placed with fixed
margins instead of ``tight_layout``: the sizes and fonts never change, and ``tight_layout``
would draw every figure twice.

This module only draws: the numbers come from the modules of their concepts and
:mod:`annotated_ssm.book.explorer_numerics`; :mod:`annotated_ssm.book.widgets` wires the controls.
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from .plotting import PAGE_WIDTH, complex_plane, page_style

__all__ = ["DiagonalSSMFigure", "HiPPOFigure", "DiscretizationFigure", "S4DFigure", "Figure3Figure",
           "S5Figure", "SelectiveFigure", "DecayMaskFigure"]

#: Space added on each side of the data's range, as a fraction of it (matplotlib's default
#: ``axes.xmargin``/``axes.ymargin``, so the figures look as autoscaled ones did).
MARGIN = 0.05
_VIRIDIS = matplotlib.colormaps["viridis"]
_TAB10 = matplotlib.colormaps["tab10"]


def _page_figure(height: float) -> Figure:
    """An empty Figure as wide as the page, ``height`` inches tall, with an Agg canvas.

    Made without pyplot: pyplot would keep every explorer's figure open in its registry,
    and Jupyter's inline backend would show it under the cell that made the explorer."""
    fig = Figure(figsize=(PAGE_WIDTH, height))
    FigureCanvasAgg(fig)
    return fig


def _span(*arrays, log: bool = False) -> tuple[float, float]:
    """The range of the finite values of ``arrays`` (positive ones when ``log``), widened
    by MARGIN of its length on each side (in decades when ``log``); never empty or flat."""
    values = np.concatenate([np.ravel(np.asarray(a, dtype=float)) for a in arrays])
    keep = np.isfinite(values)
    if log:  # a log axis cannot show 0 or less
        keep &= values > 0
    values = np.log10(values[keep]) if log else values[keep]
    low, high = (values.min(), values.max()) if values.size else (0.0, 1.0)
    if high - low < 1e-12 * max(1.0, abs(low)):  # one value: a unit-wide range around it
        low, high = low - 0.5, high + 0.5
    pad = MARGIN * (high - low)
    low, high = low - pad, high + pad
    return (10.0**low, 10.0**high) if log else (float(low), float(high))


def _equal_aspect_limits(ax, x, y) -> None:
    """Set limits around the points (x, y) with one unit as long on both axes.

    The axes' box is fixed, so this is what ``aspect="equal"`` with ``adjustable="datalim"``
    asks for; computed here from the points alone, matplotlib finds the aspect already right
    and leaves the limits alone (its own adjustment would depend on earlier data)."""
    (x0, x1), (y0, y1) = _span(x), _span(y)
    box = ax.get_position(original=True)
    width, height = ax.figure.get_size_inches() * (box.width, box.height)
    want = height / width  # y units per x unit that make circles round
    if (y1 - y0) < want * (x1 - x0):
        middle, half = (y0 + y1) / 2, want * (x1 - x0) / 2
        y0, y1 = middle - half, middle + half
    else:
        middle, half = (x0 + x1) / 2, (y1 - y0) / want / 2
        x0, x1 = middle - half, middle + half
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)


def _scatter(ax):
    """The scatter (a PathCollection) that :func:`complex_plane` has just added to ``ax``:
    the only collection it draws."""
    return ax.collections[-1]


class DiagonalSSMFigure:
    """Chapter 1: a diagonal SSM x' = diag(λ) x + B u, y = C x. Three panels: where the
    eigenvalues λ sit (left half plane shaded: stable), the impulse response Re K(t), and
    (full width below) the basis functions Re[e^{tλ_n} B_n], one curve per state.

    Args:
        max_basis: draw at most this many basis functions (the first ones).
    """

    def __init__(self, *, max_basis: int = 8):
        self.max_basis = max_basis
        with page_style():
            self.figure = fig = _page_figure(5.6)
            grid = fig.add_gridspec(2, 2, width_ratios=[1, 1.35])
            cells = grid[0, 0], grid[0, 1], grid[1, :]  # two panels above one
            self.ax_eig, self.ax_kernel, self.ax_basis = (fig.add_subplot(cell) for cell in cells)
            # The shading reaches past any limit that update sets.
            self.ax_eig.axvspan(-1e6, 0, color="tab:green", alpha=0.08, lw=0)
            self.ax_eig.axvspan(0, 1e6, color="tab:red", alpha=0.06, lw=0)
            complex_plane(self.ax_eig, np.empty(0), s=30, zorder=3)
            self.eigenvalues = _scatter(self.ax_eig)
            self.ax_eig.set_title("eigenvalues λ (green: stable)")

            self.kernel, = self.ax_kernel.plot([], [], color="black", lw=1.4)
            self.ax_kernel.axhline(0, color="0.7", lw=0.8)
            self.ax_kernel.set_xlabel("t")
            self.ax_kernel.set_title(r"impulse response Re $C e^{tA} B$")

            self.basis = [self.ax_basis.plot([], [], lw=1.3, label=f"n={n}")[0]
                          for n in range(max_basis)]
            self.ax_basis.set_xlabel("t")
            self.ax_basis.set_title(r"basis functions Re$[e^{t\lambda_n} B_n]$")
            fig.subplots_adjust(left=0.1, right=0.98, bottom=0.09, top=0.94, hspace=0.5,
                                wspace=0.25)

    def update(self, eigenvalues, t, kernel, basis) -> Figure:
        """Show one system.

        Args:
            eigenvalues: (N,) complex λ_n.
            t: (T,) times >= 0.
            kernel: (T,) the impulse response K(t) (its real part is drawn).
            basis: (T, N) the basis functions e^{tλ_n} B_n (real parts drawn).

        Returns:
            The figure, updated.
        """
        lam = np.asarray(eigenvalues, dtype=complex).ravel()
        N = lam.size
        colors = _VIRIDIS(np.linspace(0, 0.9, max(N, 2)))
        shown = min(N, self.max_basis)
        with page_style():
            self.eigenvalues.set_offsets(np.column_stack([lam.real, lam.imag]))
            self.eigenvalues.set_facecolor(colors[:N])
            # Limits that only grow past the default box when λ leaves it, so the axes stay
            # put while a slider moves λ.
            self.ax_eig.set_xlim(min(-3.2, lam.real.min() - 0.3), max(1.0, lam.real.max() + 0.3))
            self.ax_eig.set_ylim(min(-0.8, lam.imag.min() - 0.5),
                                 max(10.5, np.abs(lam.imag).max() + 0.5))

            self.kernel.set_data(t, np.real(kernel))
            self.ax_kernel.set_xlim(_span(t))
            # 0: the axis line is always in view.
            self.ax_kernel.set_ylim(_span(np.real(kernel), 0.0))

            curves = np.real(basis[:, :shown])
            for n, line in enumerate(self.basis):
                line.set_visible(n < shown)
                if n < shown:
                    line.set_data(t, curves[:, n])
                    line.set_color(colors[n])
            self.ax_basis.set_xlim(_span(t))
            self.ax_basis.set_ylim(_span(curves))
            if N <= self.max_basis:  # its entries change with N: made anew
                self.ax_basis.legend(handles=self.basis[:shown], ncol=4, loc="upper right")
            elif self.ax_basis.legend_ is not None:
                self.ax_basis.legend_.remove()
        return self.figure


class HiPPOFigure:
    """Chapter 2: the basis e^{sA}B of a HiPPO measure (the first 8 of N) above the history
    of a signal and its reconstruction from the state, against the lag s."""

    max_basis = 8

    def __init__(self):
        with page_style():
            self.figure = fig = _page_figure(5.6)
            self.ax_basis, self.ax_history = fig.subplots(2, 1)
            self.basis = [self.ax_basis.plot([], [], lw=1.3)[0] for _ in range(self.max_basis)]
            self.ax_basis.axhline(0, color="0.7", lw=0.8)
            self.ax_basis.set_xlabel("s")

            self.history, = self.ax_history.plot([], [], color="black", lw=2.2, alpha=0.35,
                                                 label="true history")
            self.reconstruction, = self.ax_history.plot([], [], color="C0", lw=1.2)
            self.theta = self.ax_history.axvline(0, color="0.5", ls=":", lw=1)
            self.ax_history.set_xlabel("lag s (how far in the past)")
            self.ax_history.set_ylabel("u(t - s)")
            fig.subplots_adjust(left=0.12, right=0.98, bottom=0.09, top=0.94, hspace=0.5)

    def update(self, lags, basis, history, reconstruction, *, measure: str, N: int,
               theta: float | None = None) -> Figure:
        """Show one measure and state size.

        Args:
            lags: (S,) lags s >= 0 (0 = now).
            basis: (N, S) basis functions at the lags.
            history: (S,) the true u(T - s); reconstruction: (S,) read back from the state.
            measure, N: named in the title.
            theta: drawn as the end of LegT's window (when ``measure == "legt"``).

        Returns:
            The figure, updated.
        """
        error = np.sqrt(np.mean((reconstruction - history) ** 2)) / max(np.std(history), 1e-300)
        shown = min(N, self.max_basis)
        colors = _VIRIDIS(np.linspace(0, 0.9, shown))
        with page_style():
            for n, line in enumerate(self.basis):
                line.set_visible(n < shown)
                if n < shown:
                    line.set_data(lags, basis[n])
                    line.set_color(colors[n])
            self.ax_basis.set_title(f"{measure}: basis $e^{{sA}}B$, first {shown} of N = {N}")
            limit = np.max(np.abs(basis[:shown]))
            self.ax_basis.set_xlim(_span(lags))
            self.ax_basis.set_ylim(-1.1 * limit, 1.1 * limit)

            self.history.set_data(lags, history)
            self.reconstruction.set_data(lags, reconstruction)
            self.reconstruction.set_label(f"from the state (relative rms error {error:.1e})")
            self.theta.set_visible(measure == "legt" and theta is not None)
            if theta is not None:
                self.theta.set_xdata([theta, theta])
            low, high = _span(lags)
            self.ax_history.set_xlim(high, low)  # reversed: time runs left to right
            self.ax_history.set_ylim(_span(history, reconstruction))
            self.ax_history.set_title(f"the last {lags[-1]:g} time units, read back from the state")
            # Made anew: the label holds the new error.
            self.ax_history.legend(handles=[self.history, self.reconstruction], loc="upper left")
        return self.figure


class DiscretizationFigure:
    """Chapter 3: the eigenvalues of Ā against the unit circle, and the discrete kernel K̄_ℓ
    against the sampled continuous one Δ·K(ℓΔ)."""

    def __init__(self):
        with page_style():
            self.figure = fig = _page_figure(3.6)
            self.ax_eig, self.ax_kernel = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.6]})
            complex_plane(self.ax_eig, np.empty(0), unit_circle=True, color="C3")
            self.eigenvalues = _scatter(self.ax_eig)
            self.continuous, = self.ax_kernel.plot([], [], color="black", alpha=0.4, lw=2,
                                                   label="Δ·K(ℓΔ)")
            self.discrete, = self.ax_kernel.plot([], [], ".-", ms=3, lw=0.8, color="C3",
                                                 label="K̄_ℓ")
            self.ax_kernel.set_xlabel("time ℓΔ")
            self.ax_kernel.legend(loc="upper right")
            fig.subplots_adjust(left=0.13, right=0.98, bottom=0.15, top=0.91, wspace=0.25)

    def update(self, A_bar, t, K, K_bar, *, step: float, method: str) -> Figure:
        """Show one step and method.

        Args:
            A_bar: (N,) discrete eigenvalues (their conjugates are drawn too).
            t: (T,) fine times; K: (T,) the continuous kernel at t.
            K_bar: (L,) the discrete kernel, at times ℓΔ.
            step: Δ; method: named in the title.

        Returns:
            The figure, updated.
        """
        z = np.concatenate([np.asarray(A_bar), np.conj(A_bar)])
        times = np.arange(len(K_bar)) * step
        with page_style():
            self.eigenvalues.set_offsets(np.column_stack([z.real, z.imag]))
            # The limits hold the unit circle and the points.
            _equal_aspect_limits(self.ax_eig, [-1, 1, *z.real], [-1, 1, *z.imag])
            self.ax_eig.set_title(f"Ā, max |·| = {np.max(np.abs(A_bar)):.3f}")

            self.continuous.set_data(t, step * K)
            self.discrete.set_data(times, K_bar)
            scale = 1.5 * np.max(np.abs(step * K))
            self.ax_kernel.set_xlim(_span(t, times))
            self.ax_kernel.set_ylim(-scale, scale)
            self.ax_kernel.set_title(f"{method}, Δ = {step:.2g}")
        return self.figure


class Figure3Figure:
    """Chapter 6, the S4D paper's Figure 3 for any N: the S4D-LegS basis over the exact LegS
    basis (dashed).

    Args:
        t: (T,) times.
        exact: (4, T) the exact LegS basis functions, the same for every N.
    """

    def __init__(self, t, exact):
        with page_style():
            self.figure = fig = _page_figure(3.6)
            self.ax = ax = fig.add_subplot()
            self.basis = []
            for n, row in enumerate(exact):
                self.basis.append(ax.plot(t, np.zeros_like(t), color=f"C{n}", lw=1.1,
                                          label=f"$K_{n}$")[0])
                ax.plot(t, row, color="k", lw=0.8, ls="--", alpha=0.7)
            ax.axhline(0, color="0.8", lw=0.6)
            ax.set_xlabel("t")
            ax.set_xlim(_span(t))
            ax.set_ylim(-2.5, 3.5)
            ax.legend(loc="upper right", ncol=4)
            fig.subplots_adjust(left=0.07, right=0.98, bottom=0.15, top=0.91)

    def update(self, basis, *, N: int, discretization: str) -> Figure:
        """Show the basis (4, T) of S4D-LegS with N states, discretised by ``discretization``.

        Returns:
            The figure, updated.
        """
        with page_style():
            for line, row in zip(self.basis, basis):
                line.set_ydata(row)
            self.ax.set_title(f"S4D-LegS, N = {N}, {discretization} (dashed: S4-LegS)")
        return self.figure


class S4DFigure:
    """Chapter 6's eigenvalue explorer: the discrete eigenvalues Ā in the unit disc, a few
    basis functions Re(B̄_n Ā_n^ℓ)/Δ, and (full width below) the kernel K̄_ℓ for a fixed C."""

    def __init__(self):
        with page_style():
            self.figure = fig = _page_figure(5.8)
            grid = fig.add_gridspec(2, 2, width_ratios=[1, 1.5])
            cells = grid[0, 0], grid[0, 1], grid[1, :]  # two panels above one
            self.ax_eig, self.ax_basis, self.ax_kernel = (fig.add_subplot(cell) for cell in cells)
            complex_plane(self.ax_eig, np.empty(0), unit_circle=True, s=10)
            self.eigenvalues = _scatter(self.ax_eig)
            self.ax_eig.set_title(r"$\bar A_n$ (colour: n)")
            self.basis = [self.ax_basis.plot([], [], lw=1)[0] for _ in range(4)]
            self.ax_basis.set_title(r"4 slowest Re$(\bar B_n \bar A_n^\ell)/\Delta$")
            self.kernel, = self.ax_kernel.plot([], [], lw=1, color="k")
            self.ax_kernel.set_title(r"kernel $\bar K_\ell$ for a fixed random C")
            self.ax_kernel.set_xlabel(r"$\ell$")
            self.title = fig.suptitle("")
            fig.subplots_adjust(left=0.13, right=0.98, bottom=0.09, top=0.88, hspace=0.55,
                                wspace=0.25)

    def update(self, A, A_bar, basis, kernel, *, step: float, title: str = "") -> Figure:
        """Show one setting.

        Args:
            A, A_bar: (M,) continuous and discrete eigenvalues (A is not drawn: the argument
                keeps the order of
                :class:`annotated_ssm.book.explorer_numerics.DiagonalKernel`).
            basis: (4, L); kernel: (L,); step: Δ; title: the figure's title.

        Returns:
            The figure, updated.
        """
        A_bar = np.asarray(A_bar)
        ell = np.arange(basis.shape[-1])
        with page_style():
            self.eigenvalues.set_offsets(np.column_stack([A_bar.real, A_bar.imag]))
            # Colour: n, first to last.
            self.eigenvalues.set_facecolor(_VIRIDIS(np.linspace(0, 1, len(A_bar))))
            _equal_aspect_limits(self.ax_eig, [-1, 1, *A_bar.real], [-1, 1, *A_bar.imag])

            for line, row in zip(self.basis, basis):
                line.set_data(ell, row)
            self.ax_basis.set_xlim(_span(ell))
            self.ax_basis.set_ylim(_span(basis))
            self.ax_basis.set_xlabel(r"$\ell$ (t = $\ell\Delta$, " + f"Δ = {step:.3g})")

            self.kernel.set_data(ell, kernel)
            self.ax_kernel.set_xlim(_span(ell))
            self.ax_kernel.set_ylim(_span(kernel))
            self.title.set_text(title)
        return self.figure


class S5Figure:
    """Chapter 7: an S5 system at a glance: continuous eigenvalues, each state's timescale,
    and (full width below) impulse responses.

    Args:
        labels: one legend label per impulse response drawn ("out ← in").
    """

    def __init__(self, labels):
        with page_style():
            self.figure = fig = _page_figure(6.0)
            grid = fig.add_gridspec(2, 2)
            cells = grid[0, 0], grid[0, 1], grid[1, :]  # two panels above one
            self.ax_eig, self.ax_time, self.ax_response = (fig.add_subplot(cell) for cell in cells)
            complex_plane(self.ax_eig, np.empty(0))
            self.eigenvalues = _scatter(self.ax_eig)
            self.ax_eig.set_title("Λ (colour: block)")

            self.timescales = self.ax_time.scatter([], [], s=18)
            self.ax_time.set_xscale("log")
            self.ax_time.set_yscale("log")
            # Minor ticks stay as marks between the decades; their labels (2×10¹, …) would
            # crowd the axes and take a third of the redraw's time.
            self.ax_time.xaxis.set_minor_formatter(NullFormatter())
            self.ax_time.yaxis.set_minor_formatter(NullFormatter())
            self.ax_time.set_xlabel("memory 1/(-Re(Λ)Δ) (steps)")
            self.ax_time.set_ylabel("cycles per step")
            self.ax_time.set_title("Λ̄ = exp(ΛΔ): timescales")

            self.responses = [self.ax_response.plot([], [], lw=1.2, label=label)[0]
                              for label in labels]
            self.ax_response.axhline(0, color="0.7", lw=0.8)
            self.ax_response.set_xlabel("time step ℓ")
            self.ax_response.set_title("impulse responses K̄[out, in]")
            self.ax_response.legend(loc="upper right")
            self.title = fig.suptitle("")
            fig.subplots_adjust(left=0.1, right=0.98, bottom=0.09, top=0.88, hspace=0.55,
                                wspace=0.4)

    def update(self, Lambda, step, Lambda_bar, responses, *, blocks: int = 1,
               title: str = "") -> Figure:
        """Show one system.

        Args:
            Lambda: (P',) continuous eigenvalues, in block order (P'/blocks per block).
            step: (P',) the timescale Δ of each state.
            Lambda_bar: (P',) discrete eigenvalues exp(ΛΔ) (not drawn: the timescales show
                them; the argument keeps the order of
                :class:`annotated_ssm.book.explorer_numerics.S5Responses`).
            responses: (R, T) the impulse responses, in the order of the labels.
            blocks: J, used to colour the eigenvalues by block.
            title: the figure's title.

        Returns:
            The figure, updated.
        """
        Lambda, step, responses = np.asarray(Lambda), np.asarray(step), np.asarray(responses)
        if responses.shape[0] != len(self.responses):
            raise ValueError(f"responses must have one row per label ({len(self.responses)}); "
                             f"got shape {responses.shape}.")
        colors = _TAB10(np.repeat(np.arange(blocks), len(Lambda) // blocks) % 10)
        # Each state's own clock: it forgets over 1/(-Re Λ·Δ) steps and turns Im Λ·Δ/2π times
        # per step.
        memory = 1 / (-Lambda.real * step)
        frequency = np.abs(Lambda.imag) * step / (2 * np.pi)
        with page_style():
            self.eigenvalues.set_offsets(np.column_stack([Lambda.real, Lambda.imag]))
            self.eigenvalues.set_facecolor(colors)
            # 0: the axes lines through 0 stay in view.
            self.ax_eig.set_xlim(_span(Lambda.real, 0.0))
            self.ax_eig.set_ylim(_span(Lambda.imag, 0.0))

            self.timescales.set_offsets(np.column_stack([memory, frequency]))
            self.timescales.set_facecolor(colors)
            self.ax_time.set_xlim(_span(memory, log=True))
            self.ax_time.set_ylim(_span(frequency, log=True))

            for line, response in zip(self.responses, responses):
                line.set_data(np.arange(len(response)), response)
            self.ax_response.set_xlim(_span(np.arange(responses.shape[1])))
            self.ax_response.set_ylim(_span(responses, 0.0))
            self.title.set_text(title)
        return self.figure


class SelectiveFigure:
    """Chapter 9: what a selective layer does to one input. Above, the step Δ_ℓ that each
    token chose; below, the time-varying impulse responses K[t, s] against t: how much of
    the input at s is still in the output at t, for a few fixed s and (black) for the
    gated token. Both on log axes with fixed limits (Δ and K span many decades).

    Args:
        sources: the positions s whose responses are drawn in colour.
        step_limits, response_limits: the fixed ranges of the two log axes.
    """

    def __init__(self, sources, *, step_limits=(1e-5, 20.0), response_limits=(1e-6, 10.0)):
        self.sources = [int(s) for s in sources]
        with page_style():
            self.figure = fig = _page_figure(5.8)
            self.ax_step, self.ax_response = fig.subplots(2, 1, sharex=True)
            self.step, = self.ax_step.plot([], [], color="0.35", lw=0.8, marker="o", ms=3.5)
            self.gated_step, = self.ax_step.plot([], [], color="black", ls="none", marker="o",
                                                 ms=8)
            self.ax_step.set_yscale("log")
            self.ax_step.set_ylim(*step_limits)
            self.ax_step.set_ylabel(r"$\Delta_\ell$")
            self.ax_step.set_title("the step each token chose (large: reset, tiny: ignore)")
            self.responses = [self.ax_response.plot([], [], lw=1.3, color=_TAB10(k),
                                                    label=f"s = {s}")[0]
                              for k, s in enumerate(self.sources)]
            self.gated, = self.ax_response.plot([], [], lw=2.2, color="black",
                                                label="gated token")
            self.marks = [ax.axvline(0, color="black", lw=0.8, ls=":")
                          for ax in (self.ax_step, self.ax_response)]
            self.ax_response.set_yscale("log")
            self.ax_response.set_ylim(*response_limits)
            self.ax_response.set_xlabel("time step t")
            self.ax_response.set_ylabel("K[t, s]")
            self.ax_response.set_title("weight of the input at s in the output at t")
            # Beside the axes: the responses fill every corner of them at some setting.
            self.ax_response.legend(loc="center left", bbox_to_anchor=(1.01, 0.5),
                                    handlelength=1.2, borderaxespad=0)
            for ax in (self.ax_step, self.ax_response):
                ax.yaxis.set_minor_formatter(NullFormatter())
            self.title = fig.suptitle("")
            fig.subplots_adjust(left=0.12, right=0.76, bottom=0.1, top=0.88, hspace=0.35)

    def update(self, step, responses, *, position: int, title: str = "") -> Figure:
        """Show one input.

        Args:
            step: (L,) Δ_ℓ of the channel.
            responses: (L, L) K[t, s] (:func:`.selective_responses`), zero for s > t.
            position: the gated token's position (drawn in black, marked by a dotted line).
            title: the figure's title.

        Returns:
            The figure, updated.
        """
        step, responses = np.asarray(step), np.asarray(responses)
        L = len(step)
        if responses.shape != (L, L) or not 0 <= position < L:
            raise ValueError(f"responses must have shape ({L}, {L}) and position lie in "
                             f"[0, {L}); got shape {responses.shape}, position {position}.")
        t = np.arange(L)
        with page_style():
            self.step.set_data(t, step)
            self.gated_step.set_data([position], [step[position]])
            for line, s in zip([*self.responses, self.gated], [*self.sources, position]):
                line.set_data(t[s:], responses[s:, s])  # K[t, s] exists from t = s on
            for mark in self.marks:
                mark.set_xdata([position, position])
            self.ax_response.set_xlim(_span(t))
            self.title.set_text(title)
        return self.figure


class DecayMaskFigure:
    """Chapter 10: the decay mask L of one SSD head. Left, L[t, s] on a log colour scale
    (white: below ``floor``, or 0 above the diagonal), cut into the chunks of the chunked
    algorithm; right, its last row, L[L-1, s] against s: how much of the input at s the last
    output still sees. The chosen token is marked on both.

    Args:
        chunk_size: the chunks drawn (lines every ``chunk_size`` steps).
        floor: the smallest value shown on either panel (log axes with fixed limits).
    """

    def __init__(self, *, chunk_size: int = 8, floor: float = 1e-3):
        self.chunk_size, self.floor = int(chunk_size), float(floor)
        with page_style():
            self.figure = fig = _page_figure(3.4)
            self.ax_mask, self.ax_row = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.15]})
            self.image = self.ax_mask.imshow(np.full((2, 2), np.nan), cmap="magma_r",
                                             vmin=np.log10(self.floor), vmax=0.0)
            colorbar = fig.colorbar(self.image, ax=self.ax_mask, fraction=0.046, pad=0.03)
            exponents = np.arange(int(np.ceil(np.log10(self.floor))), 1)
            colorbar.set_ticks(exponents, labels=[f"$10^{{{e}}}$" if e else "1" for e in exponents])
            self.ax_mask.set_xlabel("input step s")
            self.ax_mask.set_ylabel("output step t")
            self.ax_mask.set_title("the mask L")
            self.chunk_lines = []
            self.row, = self.ax_row.plot([], [], color="black", lw=1.3, marker="o", ms=3)
            self.row_mark = self.ax_row.axvline(0, color="tab:blue", lw=1, ls=":")
            self.mask_marks = [self.ax_mask.axvline(0, color="tab:blue", lw=1, ls=":"),
                               self.ax_mask.axhline(0, color="tab:blue", lw=1, ls=":")]
            self.ax_row.set_yscale("log")
            self.ax_row.set_ylim(self.floor, 2.0)
            self.ax_row.yaxis.set_minor_formatter(NullFormatter())
            self.ax_row.set_xlabel("input step s")
            self.ax_row.set_title("its last row (the last output)")
            self.title = fig.suptitle("")
            fig.subplots_adjust(left=0.09, right=0.97, bottom=0.16, top=0.8, wspace=0.4)
        self._length = None

    def update(self, mask, *, position: int, title: str = "") -> Figure:
        """Show one mask.

        Args:
            mask: (L, L) L[t, s] (:func:`.decay_mask`), zero above the diagonal.
            position: the chosen token (marked by dotted lines).
            title: the figure's title.

        Returns:
            The figure, updated.
        """
        mask = np.asarray(mask, np.float64)
        L = mask.shape[0] if mask.ndim == 2 else 0
        if mask.ndim != 2 or mask.shape != (L, L) or L < 1 or not 0 <= position < L:
            raise ValueError(f"mask must be a square (L, L) array and position lie in [0, L); got "
                             f"shape {mask.shape}, position {position}.")
        lower = np.tril(np.ones((L, L), bool))
        with page_style():
            shown = np.log10(np.maximum(mask, 1e-300))
            self.image.set_data(np.where(lower & (mask >= self.floor), shown, np.nan))
            self.image.set_extent((-0.5, L - 0.5, L - 0.5, -0.5))
            if self._length != L:  # the chunk grid and ticks depend on the length only
                for line in self.chunk_lines:
                    line.remove()
                edges = np.arange(self.chunk_size, L, self.chunk_size) - 0.5
                self.chunk_lines = ([self.ax_mask.axhline(e, color="0.6", lw=0.8) for e in edges]
                                    + [self.ax_mask.axvline(e, color="0.6", lw=0.8) for e in edges])
                ticks = [0, L // 2, L - 1]
                self.ax_mask.set_xticks(ticks)
                self.ax_mask.set_yticks(ticks)
                self.ax_row.set_xticks(ticks)
                self.ax_mask.set_xlim(-0.5, L - 0.5)
                self.ax_mask.set_ylim(L - 0.5, -0.5)
                self.ax_row.set_xlim(_span(np.arange(L)))
                self._length = L
            self.row.set_data(np.arange(L), np.where(mask[-1] > 0, mask[-1], np.nan))
            self.ax_row.set_ylabel(f"$L_{{{L - 1},s}}$")
            self.row_mark.set_xdata([position, position])
            self.mask_marks[0].set_xdata([position - 0.5, position - 0.5])
            self.mask_marks[1].set_ydata([position - 0.5, position - 0.5])
            self.title.set_text(title)
        return self.figure
