"""Small helpers every chapter uses: show package code, measure errors, check bounds, style.

They live once, here, so the chapters agree on what "error" means and how a check reads:

    from annotated_ssm.book.display import check, relative_error, show_source, use_book_style
    use_book_style()
    check("kernel vs naive, float32", relative_error(K, K_naive), 1e-5)
    # kernel vs naive, float32: relative error 3.1e-07 <= 1e-05

``check`` prints the measured value beside the bound it asserts. The digits of a float32
rounding error change from one CPU to another, so ``tools/nbval_sanitize.cfg`` lets nbval
compare everything in that line except the measured digits; the assertion itself is what
the test suite checks.
"""

from __future__ import annotations

import inspect

import numpy as np

from .plotting import PAGE_STYLE

__all__ = ["show_source", "relative_error", "check", "use_book_style", "key_figure", "BOOK_STYLE",
           "KEY_FIGURE"]

# The figure style of the whole book: the page style's width, resolution and font sizes (text
# that a phone still shows at 9 px or more, see annotated_ssm.book.plotting), no top/right frame.
BOOK_STYLE = {**PAGE_STYLE, "axes.spines.top": False, "axes.spines.right": False}
# The name under which a chapter's key figure is glued: the chapter's opening shows it with
# ``{glue:figure} key-figure`` (myst-nb's glue; the name only needs to be unique in a chapter).
KEY_FIGURE = "key-figure"


def show_source(obj):
    """The source of a package function or class, syntax-highlighted in a notebook.

    Chapters call ``show_source(annotated_ssm.kernels.causal_conv)`` instead of pasting
    a second copy of the code.
    """
    from IPython.display import Code  # IPython is only needed where a chapter runs

    return Code(inspect.getsource(obj), language="python")


def relative_error(actual, expected) -> float:
    """max |actual - expected| / max |expected|, in float64: the error measure of the book.

    Works for real or complex arrays of any (equal, or broadcastable) shape. ``expected``
    must not be all zeros (there is no relative error against zero).
    """
    actual = np.asarray(actual).astype(np.complex128 if np.iscomplexobj(actual) else np.float64)
    expected = np.asarray(expected).astype(np.complex128 if np.iscomplexobj(expected) else np.float64)
    scale = np.max(np.abs(expected))
    if not np.isfinite(scale) or scale == 0:
        raise ValueError(f"expected must be finite and not all zero; its largest entry is {scale}.")
    return float(np.max(np.abs(actual - expected)) / scale)


def check(label: str, measured: float, bound: float, *, quantity: str = "relative error") -> None:
    """Assert ``measured <= bound`` and print both on one line.

    The line reads ``{label}: {quantity} 3.1e-07 <= 1e-05``. A failing check raises
    AssertionError with the same numbers, so a chapter that drifts stops with the reason.
    ``quantity`` names what was measured (``"relative error"``, ``"max |error|"``, ...).
    """
    measured = float(measured)
    if not np.isfinite(measured) or not measured <= bound:
        raise AssertionError(f"{label}: {quantity} {measured:.2e} exceeds the bound {bound:.0e}")
    # Returns nothing: a check ending a cell would otherwise store the raw value as the
    # cell's result, whose last digits change from CPU to CPU.
    print(f"{label}: {quantity} {measured:.1e} <= {bound:.0e}")


def key_figure(fig) -> None:
    """Show ``fig`` here and on the chapter's first screen.

    A chapter opens with two sentences and its key figure, but the figure is computed where
    the chapter teaches it. This displays ``fig`` as usual and tags the output the way myst-nb's
    ``glue`` does (``metadata["scrapbook"]``), so the website also shows it where the opening
    cell says ``{glue:figure} key-figure``. myst-nb itself is not imported: it is a dependency
    of the website's build only, and the chapters run without it (Colab, the core install).
    The figure is closed afterwards, so the notebook does not draw it a second time.
    """
    import matplotlib.pyplot as plt
    from IPython.core.formatters import format_display_data
    from IPython.display import display

    bundle, metadata = format_display_data(fig)
    metadata["scrapbook"] = {"name": KEY_FIGURE, "mime_prefix": ""}
    display(bundle, raw=True, metadata=metadata)
    plt.close(fig)


def use_book_style() -> None:
    """Apply the book's matplotlib style (call once, in a chapter's imports cell)."""
    import matplotlib.pyplot as plt

    plt.rcParams.update(BOOK_STYLE)
