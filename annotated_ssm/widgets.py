"""Interactive explorers for the chapters (ipywidgets + matplotlib).

Every explorer is an :class:`Explorer`: a row of controls above a figure that is redrawn
whenever a control moves. It displays as a live widget wherever a kernel runs (Jupyter,
Colab) and, on the static website, as a PNG of its default figure: its display bundle
carries both, and the book's configuration tells the HTML builder to prefer the PNG.
"""

from __future__ import annotations

import base64
import io
from typing import Callable, Mapping

import ipywidgets as w
import matplotlib.pyplot as plt
from IPython.display import clear_output, display
from matplotlib.figure import Figure

__all__ = ["Explorer"]


class Explorer:
    """Controls plus a figure ``draw(**values)`` redrawn on every change.

    Args:
        draw: builds and returns a matplotlib Figure from the controls' values (keyword
            arguments named like the keys of ``controls``).
        controls: name -> ipywidgets control (anything with a ``value`` trait).
        title: one line shown as the plain-text form of the explorer.
    """

    def __init__(self, draw: Callable[..., Figure], controls: Mapping[str, w.ValueWidget], title: str):
        self.draw = draw
        self.controls = dict(controls)
        self.title = title
        self.output = w.Output()
        self.widget = w.VBox([w.HBox(list(self.controls.values()), layout=w.Layout(flex_flow="row wrap")), self.output])
        for control in self.controls.values():
            control.observe(self._redraw, names="value")
        self.default_png = self._render_png(self.values())
        self._redraw()

    def values(self) -> dict:
        """The controls' current values, by name."""
        return {name: control.value for name, control in self.controls.items()}

    def figure(self, **overrides) -> Figure:
        """The figure for the current values, with any of them overridden."""
        return self.draw(**{**self.values(), **overrides})

    def _redraw(self, *_):
        fig = self.figure()
        # Replace the Output widget's contents directly instead of `with self.output:
        # display(fig)`: capturing display messages needs a frontend, so under nbval (no
        # frontend) the figure would leak into the cell's own outputs and break the
        # comparison. Setting the `outputs` trait works the same live, in nbclient and nbval.
        with self.output.hold_sync():
            self.output.outputs = ()
            self.output.append_display_data(fig)
        plt.close(fig)

    def _render_png(self, values: dict) -> str:
        fig = self.draw(**values)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        return base64.b64encode(buffer.getvalue()).decode("ascii")

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle = dict(bundle)
        bundle["image/png"] = self.default_png
        # A short, stable text form (nbval compares it; the widget's own repr lists every trait).
        bundle["text/plain"] = f"<{self.title}: interactive with a running kernel; default figure shown on the website>"
        return bundle


# --- Chapter 1: continuous-time SSMs ----------------------------------------------------
__all__ += ["eigenvalue_explorer"]


def _chapter1_eigenvalues(real: float, imag: float, states: int):
    """λ_n = real + i·imag·n, n = 0 … states-1: one decay rate, equally spaced frequencies."""
    import numpy as np

    return real + 1j * imag * np.arange(states)


def eigenvalue_explorer(real: float = -0.5, imag: float = 3.0, states: int = 4, t_max: float = 8.0) -> Explorer:
    """Chapter 1's widget: choose the eigenvalues λ_n = real + i·imag·n of a diagonal A
    (B = C = 1) and watch the eigenvalue plot, the basis functions e^{tλ_n} and the impulse
    response update. Everything is a few scalar exponentials, so a redraw is quick."""
    import numpy as np

    from .plotting import diagonal_ssm_figure

    t = np.linspace(0.0, t_max, 600)

    def draw(real, imag, states):
        return diagonal_ssm_figure(_chapter1_eigenvalues(real, imag, states), t)

    # Redraw when a slider is released, not at every pixel of a drag (a redraw takes
    # a few tenths of a second, and queued redraws would make the sliders lag).
    common = {"style": {"description_width": "initial"}, "continuous_update": False}
    controls = {
        "real": w.FloatSlider(value=real, min=-3.0, max=0.5, step=0.05, description="Re λ (decay)", **common),
        "imag": w.FloatSlider(value=imag, min=0.0, max=10.0, step=0.1, description="Im λ spacing", **common),
        "states": w.IntSlider(value=states, min=1, max=8, description="states N", **common),
    }
    return Explorer(draw, controls, title="Eigenvalue explorer (chapter 1)")



# --- Chapter 2: HiPPO -------------------------------------------------------------------


# --- Chapter 3: discretisation ----------------------------------------------------------


# --- Chapter 6: S4D eigenvalue explorer and Figure 3 ------------------------------------


# --- Chapter 7: S5 ----------------------------------------------------------------------

__all__ += ["s5_explorer"]


def s5_explorer(d_model: int = 3, length: int = 200, pairs=((0, 0), (1, 0), (0, 2))) -> Explorer:
    """S5's initialisation: choose P, J and the Δ range; see Λ, Λ̄ and a few impulse responses.

    Each redraw builds ``S5Layer(d_model, P, blocks=J, step_min, step_max)`` with a fixed seed
    and plots its eigenvalues (coloured by block) and the responses K̄[out, in] of ``pairs``.
    """
    import numpy as np
    from flax import nnx

    from .layers.s5 import S5Layer
    from .plotting import s5_system_figure

    def draw(P, J, log10_step):
        layer = S5Layer(d_model, P, blocks=J, step_min=10 ** log10_step[0], step_max=10 ** log10_step[1], rngs=nnx.Rngs(0))
        system = layer.discrete_system(length)
        K = np.asarray(layer.impulse_response(length))
        responses = {f"out {o} ← in {i}": K[:, o, i] for o, i in pairs}
        return s5_system_figure(layer.eigenvalues(), layer.step_sizes(), system.Lambda_bar, responses, blocks=J,
                                title=f"S5 initialisation: P = {P}, J = {J} blocks of HiPPO-N of size {P // J}")

    controls = {
        "P": w.Dropdown(options=[16, 32, 64], value=32, description="P"),
        "J": w.Dropdown(options=[1, 2, 4, 8], value=4, description="J"),
        "log10_step": w.FloatRangeSlider(value=(-3.0, -1.0), min=-4.0, max=0.0, step=0.25, description="log10 Δ"),
    }
    return Explorer(draw, controls, "S5 explorer: P, J and the Δ range -> eigenvalues and impulse responses")

