"""Show package code inside a chapter, so the book and the package can never drift apart."""

from __future__ import annotations

import inspect

from IPython.display import Code


def show_source(obj) -> Code:
    """The source of a package function or class, syntax-highlighted in a notebook.

    Chapters call ``show_source(annotated_ssm.kernels.causal_conv)`` instead of pasting
    a second copy of the code.
    """
    return Code(inspect.getsource(obj), language="python")
