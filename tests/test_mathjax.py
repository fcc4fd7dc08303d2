"""Every math span of the book typesets in MathJax 3 (the book's one MathJax check).

tools/check_math.py finds the math the way myst does (dollarmath, amsmath) in every chapter's
markdown cells and in book/*.md, and typesets it with mathjax-full in node (installed into
.node/ by `make node`, which `make test` runs first). Unknown macros are failures: the book
defines none, since Jupyter and Colab would not know them.
"""

import importlib.util
import pathlib
import sys

import pytest

pytest.importorskip("myst_parser")  # the book's tools; absent from the floors environment

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("check_math", ROOT / "tools" / "check_math.py")
check_math = sys.modules["check_math"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_math)

if not (check_math.NODE_MODULES / "mathjax-full").is_dir():
    pytest.fail("mathjax-full is not installed: run `make node`", pytrace=False)


def test_every_math_span_typesets():
    spans, failures = check_math.check(check_math.book_files())
    assert len(spans) > 1000  # the book's math was found at all
    report = "\n".join(f"{span.where}: {error}: {span.tex.strip()[:120]}"
                       for span, error in failures)
    assert not failures, f"{len(failures)} of {len(spans)} math spans do not typeset:\n{report}"


def test_extraction_finds_math_as_myst_does():
    markdown = (
        "Inline $\\mathbf{A}x$ and a price of \\$5, `$not math$` in code.\n\n"
        "$$\ny = \\overline{\\mathbf{K}} * u\n$$\n\n"
        "\\begin{align}\na &= b\n\\end{align}\n"
    )
    spans = check_math.extract(markdown, "test", check_math.site_extensions())
    assert [(span.tex.strip(), span.display) for span in spans] == [
        ("\\mathbf{A}x", False),
        ("y = \\overline{\\mathbf{K}} * u", True),
        ("\\begin{align}\na &= b\n\\end{align}", True),
    ]


@pytest.mark.parametrize("tex, message", [
    ("\\tilde\\mathbf{C}", "Missing argument for \\mathbf"),  # an accent on a bold letter
    ("\\dA x", "Undefined control sequence \\dA"),  # a macro: the book defines none
    ("\\frac{1}{2", "Missing close brace"),
])
def test_checker_reports_what_does_not_typeset(tex, message):
    span = check_math.Span("test", tex, False)
    assert check_math.typeset([span]) == [message]


def test_plain_latex_typesets():
    spans = [check_math.Span("test", "\\overline{\\mathbf{A}} \\tilde{\\mathbf{C}} \\mathbb{R}", True)]
    assert check_math.typeset(spans) == [None]
