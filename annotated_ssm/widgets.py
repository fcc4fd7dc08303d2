"""Interactive explorers for the chapters (ipywidgets + matplotlib).

Every explorer is an :class:`Explorer`: a row of controls above a figure that is redrawn
whenever a control moves. It displays as a live widget wherever a kernel runs (Jupyter,
Colab) and, on the static website, as a PNG of its default figure: its display bundle
carries both, and the book's configuration tells the HTML builder to prefer the PNG.
"""

from __future__ import annotations

import base64
import functools
import io
from typing import Callable, Mapping

import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

__all__ = [
    "Explorer",
    "eigenvalue_explorer",
    "hippo_explorer",
    "discretization_explorer",
    "s4d_explorer",
    "figure3_explorer",
    "s4d_explorer_data",
    "s5_explorer",
]


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


def hippo_explorer(signal, *, T: float = 10.0, dt: float = 0.01, window: float = 4.0) -> Explorer:
    """N and the measure -> the HiPPO basis functions and the reconstruction of a signal.

    Args:
        signal: vectorised function u(t) for t in [0, T].
        T: length of the signal fed to the SSM; the reconstruction is of its last ``window``
            time units, from the state at time T.
        dt: sampling step (the input is held constant over each step, so ZOH is exact).
    """
    import jax
    import numpy as np

    from . import hippo
    from .discretize import discretize
    from .plotting import basis_functions, history_reconstruction
    from .scan import ssm_recurrence

    u = signal(np.arange(0, T, dt) + dt / 2)  # mid-step samples
    s = np.linspace(0, window, 400)
    t = np.linspace(0, window, 400)

    def draw(N, measure, theta):
        A, B = hippo.hippo_matrices(measure, N, theta=theta)
        with jax.enable_x64(True):
            A_bar, B_bar = discretize(A, B, dt, "zoh")
            states, _ = ssm_recurrence(A_bar, B_bar, np.zeros(N), u)
            # The basis e^{tA}B on a grid: the impulse response, one ZOH step at a time.
            E, _ = discretize(A, B, t[1] - t[0], "zoh")
        E = np.asarray(E)
        basis = [B]
        for _ in t[1:]:
            basis.append(E @ basis[-1])
        basis = np.stack(basis, axis=1)
        recon = hippo.reconstruct(np.asarray(states[-1]), s, measure, theta=theta)
        history = signal(T - s)
        error = np.sqrt(np.mean((recon - history) ** 2)) / np.std(u)
        fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.6))
        basis_functions(ax0, t, basis, title=f"{measure}: basis $e^{{tA}}B$, first {min(N, 8)} of N = {N}")
        limit = np.max(np.abs(basis[: min(N, 8)]))
        ax0.set_ylim(-1.1 * limit, 1.1 * limit)
        history_reconstruction(
            ax1, s, history, {f"from the state (rms error {error:.1e})": recon},
            title=f"reconstruction of the last {window:g} time units",
        )
        if measure == "legt":
            ax1.axvline(theta, color="0.5", ls=":", lw=1)
        fig.tight_layout()
        return fig

    controls = {
        "N": w.IntSlider(value=32, min=2, max=128, step=2, description="N", continuous_update=False),
        "measure": w.Dropdown(options=list(hippo.MEASURES), value="legs", description="measure"),
        # LegT: window length; LagT: time scale (try ~0.05). Log scale covers both.
        "theta": w.FloatLogSlider(value=2.0, base=10, min=-2, max=0.6, step=0.05, description="θ (LegT, LagT)", continuous_update=False),
    }
    return Explorer(draw, controls, "HiPPO explorer: N and measure -> basis functions and reconstruction")


# --- Chapter 3: discretisation ----------------------------------------------------------


def discretization_explorer(Lambda, B, C, *, duration: float = 8.0) -> Explorer:
    """Δ and the method -> eigenvalues of Ā against the unit circle, and the discrete kernel
    ``K̄_ℓ`` against the sampled continuous kernel ``Δ·K(ℓΔ)``.

    Args:
        Lambda, B, C: (N,) complex diagonal SSM; the kernel plotted is ``2 Re`` of its
            kernel (one of each conjugate pair stored, as in the layers).
        duration: continuous time shown; the kernel has ``duration / Δ`` samples.
    """
    import jax
    import numpy as np

    from .discretize import METHODS, discretize
    from .kernels import naive_kernel
    from .plotting import complex_plane

    Lambda, B, C = (np.asarray(a, dtype=np.complex128) for a in (Lambda, B, C))

    def draw(log10_step, method):
        step = 10.0**log10_step
        L = int(np.ceil(duration / step))
        with jax.enable_x64(True):
            A_bar, B_bar = (np.asarray(a) for a in discretize(Lambda, B, step, method))
        K_bar = 2 * naive_kernel(A_bar, B_bar, C, L).real
        t = np.linspace(0, duration, 600)
        K = 2 * np.real(np.exp(t[:, None] * Lambda) @ (B * C))
        fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1, 1.6]})
        complex_plane(ax0, np.concatenate([A_bar, A_bar.conj()]), unit_circle=True, color="C3")
        radius = np.max(np.abs(A_bar))
        ax0.set_title(f"eigenvalues of Ā ({method}, Δ = {step:.2g}); max |·| = {radius:.3f}")
        ax1.plot(t, step * K, color="black", alpha=0.4, lw=2, label="Δ·K(ℓΔ) (continuous)")
        ax1.plot(np.arange(L) * step, K_bar, ".-", ms=3, lw=0.8, color="C3", label="K̄_ℓ (discrete)")
        scale = 1.5 * np.max(np.abs(step * K))
        ax1.set_ylim(-scale, scale)
        ax1.set_xlabel("time ℓΔ")
        ax1.legend(fontsize=8, loc="upper right")
        ax1.set_title("kernel: discrete vs sampled continuous")
        fig.tight_layout()
        return fig

    controls = {
        "log10_step": w.FloatSlider(value=-1.0, min=-2.0, max=0.5, step=0.1, description="log10 Δ", continuous_update=False),
        "method": w.Dropdown(options=list(METHODS), value="bilinear", description="method"),
    }
    return Explorer(draw, controls, "Discretisation explorer: Δ and method -> Ā's eigenvalues and the kernel")


# --- Chapter 6: S4D eigenvalue explorer and Figure 3 ------------------------------------


_EXPLORER_LENGTH = 1024  # kernel length shown by the S4D explorer
_FIGURE3_SLOTS = 512  # the Figure 3 widget pads N/2 to this (N <= 1024): one compiled kernel


@functools.lru_cache(maxsize=64)
def _explorer_eigenvalues(init: str, N: int, real_part: float, imag_scale: float) -> np.ndarray:
    """Cached: S4D-LegS needs an eigenvalue computation; the random ones use a fixed key."""
    import jax

    from .init import diagonal_init

    if init == "real":
        return diagonal_init("real", N).astype(np.complex128)
    return diagonal_init(init, N, key=jax.random.key(0), real_part=real_part, imag_scale=imag_scale)


_DISPLAY_NAMES = {"legs": "LegS", "inv": "Inv", "lin": "Lin", "inv2": "Inv2", "quad": "Quad", "real": "Real",
                  "rand": "Rand"}
_EXPLORER_SLOTS = 256  # every N <= 256 is padded to this many states: one compiled kernel


@functools.lru_cache(maxsize=1)
def _explorer_compute():
    """The discretisation and kernel of the explorer, jit-compiled once per
    (discretisation, conjugate) for padded inputs, so moving a slider never recompiles."""
    import jax
    import jax.numpy as jnp

    from .discretize import discretize_diagonal
    from .kernels import vandermonde_kernel

    @functools.partial(jax.jit, static_argnames=("method", "conjugate"))
    def compute(A, C, step, method, conjugate):
        A_bar, B_bar = discretize_diagonal(A, jnp.ones_like(A), step, method)
        K = vandermonde_kernel(A, jnp.ones_like(A), C, step, _EXPLORER_LENGTH, method=method, conjugate=conjugate)
        return A_bar, B_bar, K

    return compute


def s4d_explorer_data(init: str, N: int, real_part: float, imag_scale: float, discretization: str, step: float):
    """What the S4D explorer draws, for one setting of its controls.

    Returns:
        A (M,) continuous eigenvalues, A_bar (M,) discrete ones, basis (4, 1024): the four
        slowest basis functions Re(B̄_n Ā_n^ℓ)/Δ, kernel (1024,): K̄ for a fixed random C
        (seed 0, complex normal, E|C|² = 1) and B = 1.
    """
    A = _explorer_eigenvalues(init, int(N), float(real_part), float(imag_scale))
    M = len(A)
    if M > _EXPLORER_SLOTS:
        raise ValueError(f"N must be <= {2 * _EXPLORER_SLOTS} (or {_EXPLORER_SLOTS} for 'real'); got N={N}.")
    rng = np.random.default_rng(0)
    C = (rng.standard_normal(M) + 1j * rng.standard_normal(M)) / np.sqrt(2)
    pad = _EXPLORER_SLOTS - M
    A_padded = np.concatenate([A, np.full(pad, -1.0 + 0j)]).astype(np.complex64)
    C_padded = np.concatenate([C, np.zeros(pad)]).astype(np.complex64)
    A_bar, B_bar, kernel = (np.asarray(x) for x in _explorer_compute()(
        A_padded, C_padded, np.float32(step), method=discretization, conjugate=init != "real"))
    A_bar, B_bar = A_bar[:M].astype(np.complex128), B_bar[:M].astype(np.complex128)
    slowest = np.argsort(np.abs(A.imag), kind="stable")[:4]
    ell = np.arange(_EXPLORER_LENGTH)
    basis = np.real(B_bar[slowest, None] * A_bar[slowest, None] ** ell) / step
    return A, A_bar, basis, kernel


def s4d_explorer(init: str = "legs", N: int = 64, real_part: float = -0.5, imag_scale: float = 1.0,
                 discretization: str = "zoh", step: float = 0.01) -> Explorer:
    """The eigenvalue explorer of chapter 6: initialisation, N, real part, imaginary scale,
    discretisation and Δ -> eigenvalues Ā in the unit disc, basis functions, and the kernel
    for a fixed random C."""
    from .init import DIAGONAL_INITS
    from .plotting import s4d_explorer_figure

    def draw(init, N, real_part, imag_scale, discretization, log10_step):
        step = 10.0**log10_step
        A, A_bar, basis, kernel = s4d_explorer_data(init, N, real_part, imag_scale, discretization, step)
        note = " (real part and scale fixed)" if init == "real" else ""
        return s4d_explorer_figure(A, A_bar, basis, kernel, step=step,
                                   title=f"S4D-{_DISPLAY_NAMES[init]}, N = {N}, {discretization}{note}")

    # Compile the four (discretisation, conjugate) variants now, not on the first click.
    zeros = np.zeros(_EXPLORER_SLOTS, np.complex64)
    for method in ("zoh", "bilinear"):
        for conjugate in (True, False):
            _explorer_compute()(zeros - 1, zeros, np.float32(0.01), method=method, conjugate=conjugate)
    style = {"description_width": "initial"}
    controls = {
        "init": w.Dropdown(options=list(DIAGONAL_INITS), value=init, description="init", style=style),
        "N": w.IntSlider(value=N, min=4, max=256, step=4, description="N", continuous_update=False, style=style),
        "real_part": w.FloatSlider(value=real_part, min=-3.0, max=-0.05, step=0.05, description="Re A",
                                   continuous_update=False, style=style),
        "imag_scale": w.FloatLogSlider(value=imag_scale, base=10, min=-2, max=2, step=0.25,
                                       description="Im scale", continuous_update=False, style=style),
        "discretization": w.ToggleButtons(options=["zoh", "bilinear"], value=discretization, style=style),
        "log10_step": w.FloatSlider(value=float(np.log10(step)), min=-3.0, max=0.0, step=0.25,
                                    description="log10 Δ", continuous_update=False, style=style),
    }
    return Explorer(draw, controls, title="S4D eigenvalue explorer")


def figure3_explorer(N: int = 256, discretization: str = "zoh") -> Explorer:
    """Figure 3 with a slider: the S4D-LegS basis (A^(N), B/2) for any N and discretisation,
    drawn over the exact LegS basis (dashed), t ∈ [0, 2.5], Δ = 0.002."""
    from .plotting import FIGURE3_STEP, FIGURE3_T_MAX, figure3_panel, legs_exact_basis, legs_n_basis

    L = int(round(FIGURE3_T_MAX / FIGURE3_STEP)) + 1
    t = FIGURE3_STEP * np.arange(L)
    exact, _ = legs_exact_basis(L)

    def draw(N, discretization):
        basis = legs_n_basis(N, L, FIGURE3_STEP, discretization, slots=_FIGURE3_SLOTS)
        fig, ax = plt.subplots(figsize=(7, 3.4))
        figure3_panel(ax, t, basis, exact=exact, title=f"S4D-LegS (A^(N), B/2), N = {N}, {discretization}; "
                                                       "dashed: S4-LegS")
        ax.set_ylim(-2.5, 3.5)
        ax.legend(fontsize=8, loc="upper right")
        fig.tight_layout()
        return fig

    controls = {
        "N": w.SelectionSlider(options=[16, 32, 64, 128, 256, 512, 1024], value=N, description="N",
                               continuous_update=False),
        "discretization": w.ToggleButtons(options=["zoh", "bilinear"], value=discretization),
    }
    return Explorer(draw, controls, title="Figure 3 explorer")


# --- Chapter 7: S5 ----------------------------------------------------------------------


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

