"""Interactive explorers for the chapters (ipywidgets + matplotlib).

Every explorer is an :class:`Explorer`: a row of controls above a figure that is redrawn
whenever a control moves. Its display bundle carries two forms of it:

- ``application/vnd.jupyter.widget-view+json``: the live widget, wherever a kernel runs
  (Jupyter, Colab; ipywidgets 7.7 and 8.x);
- ``text/html``: a static explorer for the website, where no kernel runs. The figure is
  rendered, by the same drawing function, for every point of a small grid of the main
  controls, and a few lines of inline JavaScript swap the images
  (:mod:`annotated_ssm.book.static_explorer`). The book's configuration tells the HTML builder
  to skip the widget view, so the site shows this form.

This module only wires controls to functions: the numbers come from the modules of their
concepts (``hippo``, ``discretize``, ``kernels``, ``ssm``) and, where an explorer needs
padded, cached or closed-form versions to redraw fast, from
:mod:`annotated_ssm.book.explorer_numerics`; the figures come from
:mod:`annotated_ssm.book.explorer_figures`.
"""

from __future__ import annotations

import io
import itertools
import math
import sys
from typing import Callable, Mapping, Sequence

import ipywidgets as w
import jax
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import Collection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from PIL import Image

from .. import continuous, hippo
from ..discretize import METHODS, discretize
from ..initialization import DIAGONAL_INITS
from ..kernels import naive_kernel
from . import explorer_figures
from .explorer_numerics import (FIGURE3_SLOTS, FIGURE3_STEP, FIGURE3_T_MAX, decay_mask, diagonal_kernel,
                                gated_s6_layer, legs_exact_basis, legs_n_basis, s5_responses,
                                selective_responses, warm_up_diagonal_kernel)
from .static_explorer import StaticControl, StaticFrames, static_html

__all__ = [
    "Explorer",
    "WIDGET_VIEW_MIMETYPE",
    "figure_image",
    "drawn_colors",
    "eigenvalue_explorer",
    "hippo_explorer",
    "discretization_explorer",
    "s4d_explorer",
    "figure3_explorer",
    "s5_explorer",
    "selective_explorer",
    "duality_explorer",
]

WIDGET_VIEW_MIMETYPE = "application/vnd.jupyter.widget-view+json"
#: Colours fitted to each static frame (octree), on top of the colours its lines and
#: markers are drawn in, which the palette always holds exactly (:func:`figure_image`). A
#: palette PNG is several times smaller than a full-colour one.
STATIC_COLORS = 64
#: zlib level of the live widget's PNG: level 1 encodes faster than the default 6 for a few
#: percent more bytes, which only travel from the kernel to the browser.
LIVE_PNG_COMPRESSION = 1


def drawn_colors(fig: Figure) -> list[tuple[int, int, int]]:
    """The colours a figure draws its visible lines and markers in, as 8-bit RGB, each once:
    lines first (legend entries and ticks included), then the markers of scatter plots.
    A translucent colour is given as it shows over white."""
    rgba = [to_rgba(line.get_color(), line.get_alpha())
            for line in fig.findobj(Line2D) if line.get_visible()]
    for collection in fig.findobj(Collection):
        if collection.get_visible():
            rgba.extend(map(tuple, collection.get_facecolor()))
    colors = {}
    for r, g, b, a in rgba:
        over_white = np.array([r, g, b]) * a + (1.0 - a)
        colors[tuple(int(v) for v in np.round(255 * over_white))] = None
    return list(colors)


def figure_image(fig: Figure, *, palette: int | None = None,
                 compress_level: int = LIVE_PNG_COMPRESSION) -> bytes:
    """The PNG of a figure, without metadata (so the same figure gives the same bytes).

    Args:
        fig: a matplotlib Figure, drawn at its own size and dpi (no tight cropping: every
            frame of an explorer keeps the same size).
        palette: None keeps full colour. A number (1-255) gives a palette PNG, much smaller
            and compressed as far as PNG goes (the website stores it): the figure's
            :func:`drawn_colors` exactly (at most ``256 - palette`` of them), plus
            ``palette`` colours fitted to the image for the rest (antialiased edges,
            shading). A palette fitted alone loses rare colours: 32 colours by median cut
            lost blue and drew two of four thin curves in one green.
        compress_level: zlib level (0-9) of the full-colour PNG.
    """
    counts = isinstance(palette, (int, np.integer)) and not isinstance(palette, bool)
    if palette is not None and not (counts and 1 <= palette <= 255):
        raise ValueError(f"palette must be None or a number of colours in 1 … 255; "
                         f"got {palette!r}.")
    buffer = io.BytesIO()
    # A palette image is decoded again at once: no need to compress the full-colour one.
    level = 0 if palette is not None else compress_level
    fig.savefig(buffer, format="png", metadata={"Software": None},
                pil_kwargs={"compress_level": level})
    if palette is None:
        return buffer.getvalue()
    image = Image.open(buffer).convert("RGB")
    fitted = image.quantize(palette, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    fitted_rgb = np.reshape(fitted.getpalette()[: 3 * palette], (-1, 3))
    used = fitted_rgb[np.unique(np.asarray(fitted))]
    # Drawn colours first: the fitted colours that equal one of them are dropped.
    colors = dict.fromkeys(drawn_colors(fig)[: 256 - palette] + [tuple(map(int, c)) for c in used])
    table = Image.new("P", (1, 1))
    table.putpalette([v for color in colors for v in color])
    # Each pixel takes its nearest palette colour: a line's own pixels keep its exact colour.
    out = io.BytesIO()
    image.quantize(palette=table, dither=Image.Dither.NONE).save(out, format="png", optimize=True)
    return out.getvalue()


def _value_label(value) -> str:
    """How a control's value reads on the static page."""
    if isinstance(value, tuple):
        return " … ".join(_value_label(v) for v in value)
    if isinstance(value, (float, np.floating)):
        return f"{value:g}"
    return str(value)


def _with_default(values: Sequence, default) -> list:
    """The grid values with the explorer's default added (sorted when numeric), so that the
    static page opens on the live widget's first figure."""
    values = list(values)
    if default in values:
        return values
    if isinstance(default, (int, float)) and all(isinstance(v, (int, float)) for v in values):
        return sorted(values + [default])
    return values + [default]


class Explorer:
    """Controls plus a figure ``draw(**values)`` redrawn on every change.

    Args:
        draw: returns a matplotlib Figure showing the controls' values (keyword arguments
            named like the keys of ``controls``). The explorers of this module return one
            figure that they update in place (:mod:`annotated_ssm.book.explorer_figures`), so its
            image must depend on the values only, not on the values drawn before; a new
            pyplot figure per call works too (it is closed once rendered).
        controls: name -> ipywidgets control (anything with ``value``, ``description`` and
            ``disabled``).
        title: one line: the plain-text form of the explorer and the static page's heading.
        grid: name -> values of that control for which the static page stores a frame
            (every combination is drawn); controls left out stay at their first value
            there. Each control's first value is added to its list if missing.
        inactive: name -> rule(values) that is True where that control changes nothing
            (θ for HiPPO-LegS, which has no window). There the live widget disables the
            control and the static page shows it disabled, with the frame of the control's
            first value for all of its values. A rule reads the other controls' values
            (a dict by name), never its own control's.
    """

    def __init__(self, draw: Callable[..., Figure], controls: Mapping[str, w.ValueWidget],
                 title: str, *, grid: Mapping[str, Sequence] | None = None,
                 inactive: Mapping[str, Callable[[dict], bool]] | None = None):
        self.draw = draw
        self.controls = dict(controls)
        self.title = title
        for argument, names in (("grid", grid), ("inactive", inactive)):
            unknown = set(names or {}) - set(self.controls)
            if unknown:
                raise ValueError(f"{argument} must name controls of this explorer "
                                 f"({sorted(self.controls)}); got {sorted(unknown)}.")
        self.inactive = dict(inactive or {})
        self.initial = self.values()
        self.grid = {name: _with_default(values, self.initial[name])
                     for name, values in (grid or {}).items()}
        self._disable_idle_controls()
        self.image = w.Image(value=self.render(), format="png",
                             layout=w.Layout(max_width="100%", height="auto"))
        for control in self.controls.values():
            # Touch targets of at least 32 px (a slider's default track is 28 px high).
            control.layout.min_height = "32px"
        self.widget = w.VBox([w.HBox(list(self.controls.values()),
                                     layout=w.Layout(flex_flow="row wrap")), self.image])
        for control in self.controls.values():
            control.observe(self._redraw, names="value")
        self._static_html = None

    def values(self) -> dict:
        """The controls' current values, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def idle(self, values: Mapping) -> set[str]:
        """The names of the controls that change nothing at ``values`` (see ``inactive``)."""
        return {name for name, rule in self.inactive.items() if rule(values)}

    def figure(self, **overrides) -> Figure:
        """The figure for the current values, with any of them overridden. It may be the
        explorer's one figure, which the next call redraws for other values."""
        return self.draw(**{**self.values(), **overrides})

    def render(self, *, palette: int | None = None, **overrides) -> bytes:
        """The PNG of :meth:`figure` (see :func:`figure_image`)."""
        fig = self.figure(**overrides)
        try:
            return figure_image(fig, palette=palette)
        finally:
            plt.close(fig)  # frees a pyplot figure; a figure pyplot does not know is left as is

    def _disable_idle_controls(self):
        idle = self.idle(self.values())
        for name in self.inactive:
            self.controls[name].disabled = name in idle

    def _redraw(self, *_):
        self._disable_idle_controls()
        self.image.value = self.render()

    def frames(self) -> StaticFrames:
        """The static page's data (:class:`~annotated_ssm.book.static_explorer.StaticFrames`),
        drawn at the first values of the controls, whatever the live widget shows now."""
        names = list(self.grid)
        controls = []
        for name in names:
            control = self.controls[name]
            values = self.grid[name]
            slider = not isinstance(control, (w.Dropdown, w.ToggleButtons))
            label = control.description or name
            controls.append(StaticControl(name, label, tuple(_value_label(v) for v in values),
                                          values.index(self.initial[name]), slider))
        images, frames, disabled = [], [], []
        by_bytes, by_point = {}, {}
        for point in itertools.product(*(self.grid[name] for name in names)):
            values = {**self.initial, **dict(zip(names, point))}
            idle = self.idle(values)
            # A control that changes nothing here is drawn at its first value: one frame
            # serves all of its values, and it is drawn once.
            drawn = tuple(self.initial[name] if name in idle else values[name] for name in names)
            if drawn not in by_point:
                image = self.render(palette=STATIC_COLORS, **{**values, **dict(zip(names, drawn))})
                if image not in by_bytes:  # other points may look alike too: stored once
                    by_bytes[image] = len(images)
                    images.append(image)
                by_point[drawn] = by_bytes[image]
            frames.append(by_point[drawn])
            disabled.append(tuple(k for k, name in enumerate(names) if name in idle))
        return StaticFrames(controls, images, frames, disabled)

    def static_html(self) -> str:
        """The ``text/html`` form: the static explorer (computed once, then cached)."""
        if self._static_html is None:
            fixed = [f"{self.controls[name].description or name} = {_value_label(value)}"
                     for name, value in self.initial.items() if name not in self.grid]
            self._static_html = static_html(self.title, *self.frames(), mime="image/png",
                                            fixed=fixed, alt=self.title)
        return self._static_html

    def _widget_view(self) -> dict:
        """The widget-view mime data, for ipywidgets 8 (``_repr_mimebundle_``) and 7 (which
        only has ``_ipython_display_``, sending this same dictionary)."""
        if hasattr(self.widget, "_repr_mimebundle_"):  # ipywidgets 8
            return dict(self.widget._repr_mimebundle_() or {}).get(WIDGET_VIEW_MIMETYPE)
        # ipywidgets 7: run the display callbacks.
        on_displayed = getattr(self.widget, "_handle_displayed", None)
        if on_displayed is not None:
            on_displayed()
        return {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id}

    def _repr_mimebundle_(self, include=None, exclude=None):
        forms = {
            WIDGET_VIEW_MIMETYPE: self._widget_view,
            # A short, stable text form (nbval compares it; the widget's own repr lists
            # every trait).
            "text/plain": lambda: (f"<{self.title}: interactive with a running kernel; "
                                   "precomputed frames on the website>"),
        }
        # Colab only ever shows the live widget: skip the seconds the frames take there.
        if "google.colab" not in sys.modules:
            forms["text/html"] = self.static_html
        return {mime: make() for mime, make in forms.items()
                if (not include or mime in include) and (not exclude or mime not in exclude)}


_STYLE = {"description_width": "initial"}


# --- Chapter 1: continuous-time SSMs ----------------------------------------------------


def eigenvalue_explorer(real: float = -0.5, imag: float = 3.0, states: int = 4,
                        t_max: float = 8.0) -> Explorer:
    """Chapter 1's widget: choose the eigenvalues λ_n = real + i·imag·n (n = 0 … states-1) of
    a diagonal A (B = C = 1) and watch the eigenvalue plot, the impulse response and the
    basis functions e^{tλ_n} update."""
    t = np.linspace(0.0, t_max, 600)
    figure = explorer_figures.DiagonalSSMFigure()

    def draw(real, imag, states):
        eigenvalues = real + 1j * imag * np.arange(states)
        A, B, C = np.diag(eigenvalues), np.ones(states), np.ones(states)
        return figure.update(eigenvalues, t, continuous.impulse_response(A, B, C, t),
                             continuous.basis_functions(A, B, t))

    # Redraw when a slider is released, not at every pixel of a drag (queued redraws would
    # make the sliders lag).
    common = {"style": _STYLE, "continuous_update": False}
    controls = {
        "real": w.FloatSlider(value=real, min=-3.0, max=0.5, step=0.05, description="Re λ (decay)",
                              **common),
        "imag": w.FloatSlider(value=imag, min=0.0, max=10.0, step=0.1, description="Im λ spacing",
                              **common),
        "states": w.IntSlider(value=states, min=1, max=8, description="states N", **common),
    }
    grid = {"real": [-1.5, -0.5, 0.2], "imag": [0.0, 1.0, 3.0, 6.0], "states": [1, 2, 4, 8]}
    # One state has the one eigenvalue λ_0 = real: the spacing of the others changes nothing.
    inactive = {"imag": lambda values: values["states"] == 1}
    return Explorer(draw, controls, title="Eigenvalue explorer (chapter 1)", grid=grid,
                    inactive=inactive)


# --- Chapter 2: HiPPO -------------------------------------------------------------------


def hippo_explorer(signal, *, T: float = 10.0, dt: float = 0.01, window: float = 4.0) -> Explorer:
    """N and the measure -> the HiPPO basis functions and the reconstruction of a signal
    (:func:`annotated_ssm.hippo.memory`).

    Args:
        signal: vectorised function u(t) for t in [0, T].
        T: length of the signal fed to the SSM; the reconstruction is of its last ``window``
            time units, from the state at time T.
        dt: sampling step (the input is held constant over each step, so ZOH is exact).
    """
    u = signal(np.arange(round(T / dt)) * dt + dt / 2)  # mid-step samples
    figure = explorer_figures.HiPPOFigure()

    def draw(N, measure, theta):
        m = hippo.memory(u, dt, measure, N, window, theta=theta)
        return figure.update(m.lags, m.basis, signal(T - m.lags), m.reconstruction, measure=measure,
                             N=N, theta=theta)

    controls = {
        "N": w.IntSlider(value=32, min=2, max=128, step=2, description="N",
                         continuous_update=False),
        "measure": w.Dropdown(options=list(hippo.MEASURES), value="legs", description="measure"),
        # LegT: window length; LagT: time scale (try ~0.05). Log scale covers both.
        "theta": w.FloatLogSlider(value=2.0, base=10, min=-2, max=0.6, step=0.05,
                                  description="θ (LegT, LagT)", continuous_update=False,
                                  style=_STYLE),
    }
    grid = {"N": [8, 16, 32, 64, 128], "measure": list(hippo.MEASURES), "theta": [0.05, 0.5, 2.0]}
    inactive = {"theta": lambda values: values["measure"] == "legs"}  # LegS has no window
    return Explorer(draw, controls,
                    "HiPPO explorer: N and measure -> basis functions and reconstruction",
                    grid=grid, inactive=inactive)


# --- Chapter 3: discretisation ----------------------------------------------------------


def discretization_explorer(Lambda, B, C, *, duration: float = 8.0) -> Explorer:
    """Δ and the method -> eigenvalues of Ā against the unit circle, and the discrete kernel
    ``K̄_ℓ`` against the sampled continuous kernel ``Δ·K(ℓΔ)``.

    Args:
        Lambda, B, C: (N,) complex diagonal SSM; the kernel plotted is ``2 Re`` of its
            kernel (one of each conjugate pair stored, as in the layers).
        duration: continuous time shown; the kernel has ``duration / Δ`` samples.
    """
    Lambda, B, C = (np.asarray(a, dtype=np.complex128) for a in (Lambda, B, C))
    t = np.linspace(0, duration, 600)
    K = 2 * continuous.impulse_response(np.diag(Lambda), B, C, t).real
    figure = explorer_figures.DiscretizationFigure()

    def draw(log10_step, method):
        step = 10.0**log10_step
        with jax.enable_x64(True):
            A_bar, B_bar = (np.asarray(a) for a in discretize(Lambda, B, step, method))
        K_bar = 2 * naive_kernel(A_bar, B_bar, C, math.ceil(duration / step)).real
        return figure.update(A_bar, t, K, K_bar, step=step, method=method)

    controls = {
        "log10_step": w.FloatSlider(value=-1.0, min=-2.0, max=0.5, step=0.1, description="log10 Δ",
                                    continuous_update=False),
        "method": w.Dropdown(options=list(METHODS), value="bilinear", description="method"),
    }
    grid = {"log10_step": [-2.0, -1.5, -1.0, -0.5, 0.0, 0.5], "method": list(METHODS)}
    return Explorer(draw, controls,
                    "Discretisation explorer: Δ and method -> Ā's eigenvalues and the kernel",
                    grid=grid)


# --- Chapter 6: S4D eigenvalue explorer and Figure 3 ------------------------------------


_DISPLAY_NAMES = {"legs": "LegS", "inv": "Inv", "lin": "Lin", "inv2": "Inv2", "quad": "Quad",
                  "real": "Real", "rand": "Rand"}


def s4d_explorer(init: str = "legs", N: int = 64, real_part: float = -0.5, imag_scale: float = 1.0,
                 discretization: str = "zoh", step: float = 0.01) -> Explorer:
    """The eigenvalue explorer of chapter 6: initialisation, N, real part, imaginary scale,
    discretisation and Δ -> eigenvalues Ā in the unit disc, basis functions, and the kernel
    for a fixed random C (:func:`annotated_ssm.book.explorer_numerics.diagonal_kernel`)."""
    figure = explorer_figures.S4DFigure()

    def draw(init, N, real_part, imag_scale, discretization, log10_step):
        step = 10.0**log10_step
        data = diagonal_kernel(init, N, real_part, imag_scale, discretization, step)
        note = " (Re, scale fixed)" if init == "real" else ""
        title = f"S4D-{_DISPLAY_NAMES[init]}, N = {N}, {discretization}{note}"
        return figure.update(*data, step=step, title=title)

    warm_up_diagonal_kernel()  # compile now, not on the first click
    controls = {
        "init": w.Dropdown(options=list(DIAGONAL_INITS), value=init, description="init",
                           style=_STYLE),
        "N": w.IntSlider(value=N, min=4, max=256, step=4, description="N", continuous_update=False,
                         style=_STYLE),
        "real_part": w.FloatSlider(value=real_part, min=-3.0, max=-0.05, step=0.05,
                                   description="Re A", continuous_update=False, style=_STYLE),
        "imag_scale": w.FloatLogSlider(value=imag_scale, base=10, min=-2, max=2, step=0.25,
                                       description="Im scale", continuous_update=False,
                                       style=_STYLE),
        "discretization": w.ToggleButtons(options=["zoh", "bilinear"], value=discretization,
                                          description="method", style=_STYLE),
        "log10_step": w.FloatSlider(value=float(np.log10(step)), min=-3.0, max=0.0, step=0.25,
                                    description="log10 Δ", continuous_update=False, style=_STYLE),
    }
    grid = {"init": list(DIAGONAL_INITS), "N": [16, 64], "log10_step": [-3.0, -2.0, -1.0]}
    # S4D-Real's eigenvalues are -1, -2, …: it has no common real part or imaginary parts.
    is_real = lambda values: values["init"] == "real"  # noqa: E731
    inactive = {"real_part": is_real, "imag_scale": is_real}
    return Explorer(draw, controls, title="S4D eigenvalue explorer", grid=grid, inactive=inactive)


def figure3_explorer(N: int = 256, discretization: str = "zoh") -> Explorer:
    """Figure 3 with a slider: the S4D-LegS basis (A^(N), B/2) for any N and discretisation,
    drawn over the exact LegS basis (dashed), t ∈ [0, 2.5], Δ = 0.002."""
    L = int(round(FIGURE3_T_MAX / FIGURE3_STEP)) + 1
    t = FIGURE3_STEP * np.arange(L)
    exact, _ = legs_exact_basis(L)
    figure = explorer_figures.Figure3Figure(t, exact)

    def draw(N, discretization):
        basis = legs_n_basis(N, L, FIGURE3_STEP, discretization, slots=FIGURE3_SLOTS)
        return figure.update(basis, N=N, discretization=discretization)

    controls = {
        "N": w.SelectionSlider(options=[16, 32, 64, 128, 256, 512, 1024], value=N, description="N",
                               continuous_update=False),
        "discretization": w.ToggleButtons(options=["zoh", "bilinear"], value=discretization,
                                          description="method"),
    }
    grid = {"N": [16, 32, 64, 128, 256, 512, 1024], "discretization": ["zoh", "bilinear"]}
    return Explorer(draw, controls, title="Figure 3 explorer", grid=grid)


# --- Chapter 7: S5 ----------------------------------------------------------------------


def s5_explorer(d_model: int = 3, length: int = 200, pairs=((0, 0), (1, 0), (0, 2))) -> Explorer:
    """S5's initialisation: choose P, J and the Δ range; see Λ, each state's timescale and a
    few impulse responses K̄[out, in] of the layer's initialisation with key 0
    (:func:`annotated_ssm.book.explorer_numerics.s5_responses`)."""
    figure = explorer_figures.S5Figure([f"out {o} ← in {i}" for o, i in pairs])
    outputs, inputs = np.array(pairs).T

    def draw(P, J, log10_step):
        system = s5_responses(d_model, P, J, 10.0 ** log10_step[0], 10.0 ** log10_step[1], length)
        return figure.update(np.asarray(system.init.Lambda, np.complex128), system.step,
                             system.Lambda_bar,
                             system.responses[:, outputs, inputs].T, blocks=J,
                             title=f"P = {P}, J = {J} blocks of HiPPO-N of size {P // J}")

    controls = {
        "P": w.Dropdown(options=[16, 32, 64], value=32, description="P"),
        "J": w.Dropdown(options=[1, 2, 4, 8], value=4, description="J"),
        "log10_step": w.FloatRangeSlider(value=(-3.0, -1.0), min=-4.0, max=0.0, step=0.25,
                                         description="log10 Δ", continuous_update=False),
    }
    grid = {"P": [16, 32, 64], "J": [1, 2, 4, 8],
            "log10_step": [(-4.0, -2.0), (-3.0, -1.0), (-2.0, 0.0)]}
    for P in controls["P"].options:  # compile the layer's draws for every P now, not on a move
        s5_responses(d_model, P, 1, 1e-3, 1e-1, 1)
    return Explorer(draw, controls,
                    "S5 explorer: P, J and the Δ range -> eigenvalues and impulse responses",
                    grid=grid)


# --- Chapter 9: selective state spaces --------------------------------------------------


def selective_explorer(length: int = 48, position: int = 24, gate: float = 4.0,
                       sources=(2, 12, 22, 32, 42), seed: int = 0) -> Explorer:
    """A selective layer on one input: choose which token is gated and how strongly, and
    see the step Δ every token chose and the time-varying impulse responses K[t, s].

    The layer is :func:`annotated_ssm.book.explorer_numerics.gated_s6_layer` (inputs: content,
    gate, 1); the contents are seeded normal draws, every gate is 0 (the base step) except
    the chosen token's. Numbers from :func:`.selective_responses`; the input's
    shape never changes, so nothing is compiled again.
    """
    layer = gated_s6_layer()
    content = np.random.default_rng(seed).standard_normal(length)
    figure = explorer_figures.SelectiveFigure(sources)

    def draw(position, gate):
        u = np.stack([content, np.zeros(length), np.ones(length)], axis=1).astype(np.float32)
        u[position, 1] = gate
        data = selective_responses(layer, u)
        other = 1 if position == 0 else 0  # any ungated token: they all have the base step
        title = (f"gate {gate:g} at token {position}: Δ = {data.step[position]:.2g} there, "
                 f"{data.step[other]:.2g} elsewhere")
        return figure.update(data.step, data.responses, position=position, title=title)

    controls = {
        "position": w.IntSlider(value=position, min=0, max=length - 1,
                                description="gated token", continuous_update=False,
                                style=_STYLE),
        "gate": w.FloatSlider(value=gate, min=-10.0, max=8.0, step=0.5, description="gate",
                              continuous_update=False, style=_STYLE),
    }
    grid = {"position": [8, 16, 24, 32, 40], "gate": [-8.0, 0.0, 2.0, 4.0, 6.0]}
    return Explorer(draw, controls,
                    "Selective explorer: a gated token -> each token's Δ and the impulse "
                    "responses", grid=grid)


# --- Chapter 10: state space duality ----------------------------------------------------


def duality_explorer(length: int = 32, position: int = 12, base_step: float = 0.1,
                     A: float = -1.0, token_step: float = 10.0, chunk_size: int = 8) -> Explorer:
    """SSD's decay mask L as A and one token's Δ move: every token has the step
    ``base_step`` except the one at ``position``; log a_t = Δ_t A
    (:func:`annotated_ssm.book.explorer_numerics.decay_mask`). With equal steps L is constant
    along its diagonals (a convolution); a large Δ at the token cuts the later outputs off
    from the earlier inputs, a tiny one lets them pass. The length never changes, so
    nothing is compiled again.
    """
    figure = explorer_figures.DecayMaskFigure(chunk_size=chunk_size)

    def draw(A, token_step):
        step = np.full(length, base_step)
        step[position] = token_step
        title = (f"A = {A:g}: a = {np.exp(base_step * A):.3g} per step of Δ = {base_step:g}; "
                 f"token {position}: Δ = {token_step:g}, a = {np.exp(token_step * A):.2g}")
        return figure.update(decay_mask(step, A), position=position, title=title)

    controls = {
        "A": w.SelectionSlider(options=[-8.0, -4.0, -2.0, -1.0, -0.5, -0.25, -0.125], value=A,
                               description="A", continuous_update=False, style=_STYLE),
        "token_step": w.FloatLogSlider(value=token_step, base=10, min=-3, max=1, step=0.25,
                                       description=f"Δ at token {position}",
                                       continuous_update=False, style=_STYLE),
    }
    grid = {"A": [-4.0, -1.0, -0.25], "token_step": [0.001, 0.1, 1.0, 10.0]}
    return Explorer(draw, controls, "Duality explorer: A and one token's Δ -> the decay mask",
                    grid=grid)
