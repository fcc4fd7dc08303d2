"""How long an explorer takes to redraw when a control moves (the live widget, with a kernel).

    python benchmarks/bench_explorers.py            # every explorer, every control, 3 values each
    python benchmarks/bench_explorers.py --repeats 5 --explorers s4d figure3

For each explorer of the book and each of its controls, the control is set to a few values
in turn, the way a reader moves it; each change runs the explorer's redraw exactly as the
widget does (compute, update the figure, encode the PNG the browser shows). Printed: the mean
and the slowest wall-clock seconds per change, after one warm-up pass over the same values
(which compiles what JAX needs and fills the caches a reader's first moves fill).

Side by side, in the same passes, a second copy of each explorer builds a new figure for
every change (what the explorers did before they updated one figure in place); "ratio" is
its mean time over the in-place one's. The book's criterion: every change under 0.3 s on a
2-core CPU. Timings depend on the machine's load: each line ends with the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import statistics
import time
from unittest import mock

import jax
import matplotlib
import numpy as np

matplotlib.use("agg")

from annotated_ssm.book import explorer_figures, widgets  # noqa: E402  (after choosing the backend)


def _signal(t):
    return np.sin(t) + 0.5 * np.cos(3.1 * t)


# The explorers as the chapters build them (chapter 3 passes its own four-state system).
EXPLORERS = {
    "eigenvalue": lambda: widgets.eigenvalue_explorer(),
    "hippo": lambda: widgets.hippo_explorer(_signal),
    "discretization": lambda: widgets.discretization_explorer(-0.3 + 1j * np.pi * np.arange(4), np.ones(4),
                                                              np.ones(4)),
    "s4d": lambda: widgets.s4d_explorer(),
    "figure3": lambda: widgets.figure3_explorer(),
    "s5": lambda: widgets.s5_explorer(),
}


def rebuilt_per_change(figure_class):
    """A stand-in for one of :mod:`annotated_ssm.book.explorer_figures`' classes whose ``update``
    draws on a new figure every time, instead of updating one figure in place."""

    class Rebuilt:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

        def update(self, *args, **kwargs):
            return figure_class(*self.args, **self.kwargs).update(*args, **kwargs)

    return Rebuilt


def rebuilding_explorer(make):
    """The explorer ``make()`` builds, drawing a new figure for every change."""
    with contextlib.ExitStack() as stack:
        for name in explorer_figures.__all__:
            stack.enter_context(mock.patch.object(explorer_figures, name,
                                                  rebuilt_per_change(getattr(explorer_figures, name))))
        return make()


def control_values(control, count: int = 3) -> list:
    """A few values across the control's range, ending back at its current value."""
    current = control.value
    if hasattr(control, "options") and control.options:
        options = [o[1] if isinstance(o, tuple) else o for o in control.options]
        picks = [o for o in options if o != current][:count]
    elif isinstance(current, tuple):  # a range slider: shift the range
        low, high = control.min, control.max
        width = current[1] - current[0]
        picks = [(low, low + width), (high - width, high)]
    else:
        picks = list(np.linspace(control.min, control.max, count + 2)[1:-1])
        if isinstance(current, int):
            picks = [int(round(v / control.step) * control.step) for v in picks]
    return picks + [current]


def time_changes(explorer, name, values) -> list[float]:
    control = explorer.controls[name]
    seconds = []
    for value in values:
        start = time.perf_counter()
        control.value = value  # runs the widget's redraw
        seconds.append(time.perf_counter() - start)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--explorers", nargs="+", choices=list(EXPLORERS), default=list(EXPLORERS))
    parser.add_argument("--repeats", type=int, default=3, help="timed passes over each control's values")
    args = parser.parse_args()
    print(f"JAX {jax.__version__}, matplotlib {matplotlib.__version__}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    print(f"{'':31s} {'':7s} {'in place':>15s} {'new figure':>17s}")
    print(f"{'explorer':15s} {'control':15s} {'changes':>7s} {'mean s':>7s} {'max s':>7s} {'mean s':>8s} "
          f"{'ratio':>8s} {'load':>5s}")
    worst = 0.0
    for explorer_name in args.explorers:
        explorer = EXPLORERS[explorer_name]()
        rebuilding = rebuilding_explorer(EXPLORERS[explorer_name])
        for name, control in explorer.controls.items():
            values = control_values(control)
            time_changes(explorer, name, values)  # warm-up
            time_changes(rebuilding, name, values)
            seconds, rebuilt = [], []
            for _ in range(args.repeats):  # alternated, so that both see the same load
                # The new figures' garbage would otherwise make Python's full collections
                # (~0.1 s) land in the in-place timings, which a reader's session is spared.
                gc.collect()
                seconds += time_changes(explorer, name, values)
                gc.collect()
                rebuilt += time_changes(rebuilding, name, values)
            worst = max(worst, max(seconds))
            print(f"{explorer_name:15s} {name:15s} {len(seconds):7d} {statistics.mean(seconds):7.3f} "
                  f"{max(seconds):7.3f} {statistics.mean(rebuilt):8.3f} "
                  f"{statistics.mean(rebuilt) / statistics.mean(seconds):7.1f}x {os.getloadavg()[0]:5.2f}")
    print(f"slowest change (in place): {worst:.3f} s; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
