"""Typeset every math span of the book with MathJax 3; list failures.

Math is found the way the website finds it: markdown-it with myst's ``dollarmath`` and
``amsmath`` extensions (``$...$``, ``$$...$$``, ``\\begin{...}`` blocks), in every markdown
cell of book/*.ipynb and in book/*.md. Each span goes through MathJax 3 in node
(tools/mathjax_check.js, mathjax-full installed into .node/ by ``make node``); unknown
macros count as failures (the book defines none: chapters are also read in Jupyter and Colab,
which would not know them).

This is the book's one MathJax check; it needs no built website. (tools/check_site.py, on the
built site, does not inspect MathJax.)

    python tools/check_math.py                 # every chapter and page; exit 1 on failure
    python tools/check_math.py book/04_s4.ipynb
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
from dataclasses import dataclass

import yaml
from markdown_it.renderer import RendererHTML
from myst_parser.config.main import MdParserConfig
from myst_parser.parsers.mdit import create_md_parser

ROOT = pathlib.Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / ".node" / "node_modules"
MATH_TOKENS = {"math_inline": False, "math_inline_double": True, "math_block": True,
               "math_block_label": True, "amsmath": True}


@dataclass
class Span:
    """One piece of math: where it is, its TeX, and whether it is displayed."""

    where: str
    tex: str
    display: bool


def site_extensions() -> set[str]:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    return set(config["parse"]["myst_enable_extensions"])


def markdown_sources(path: pathlib.Path) -> list[tuple[str, str]]:
    """(label, markdown) for a page, or for each markdown cell of a notebook."""
    if path.suffix == ".md":
        return [(str(path.relative_to(ROOT)), path.read_text())]
    notebook = json.loads(path.read_text())
    return [(f"{path.relative_to(ROOT)} cell {index}", "".join(cell["source"]))
            for index, cell in enumerate(notebook["cells"]) if cell["cell_type"] == "markdown"]


def extract(markdown: str, where: str, extensions: set[str]) -> list[Span]:
    """The math spans myst would hand to MathJax for this markdown."""
    parser = create_md_parser(MdParserConfig(enable_extensions=extensions), RendererHTML)
    spans = []

    def walk(tokens):
        for token in tokens:
            if token.type in MATH_TOKENS:
                spans.append(Span(where, token.content, MATH_TOKENS[token.type]))
            if token.children:
                walk(token.children)

    walk(parser.parse(markdown))
    return spans


def typeset(spans: list[Span]) -> list[str | None]:
    """MathJax's error message for each span (None where it typesets)."""
    if not (NODE_MODULES / "mathjax-full").is_dir():
        raise SystemExit("mathjax-full is missing: run `make node` (npm installs it into .node/)")
    lines = "".join(json.dumps({"tex": s.tex, "display": s.display}) + "\n" for s in spans)
    result = subprocess.run(
        ["node", str(ROOT / "tools" / "mathjax_check.js")], input=lines,
        capture_output=True, text=True, check=True,
        env={**os.environ, "NODE_PATH": str(NODE_MODULES)})
    return [json.loads(line)["error"] for line in result.stdout.splitlines()]


def book_files() -> list[pathlib.Path]:
    return sorted((ROOT / "book").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.md"))


def check(paths: list[pathlib.Path]) -> tuple[list[Span], list[tuple[Span, str]]]:
    """All spans in ``paths`` and the (span, error) pairs that fail."""
    extensions = site_extensions()
    spans = [span for path in paths for where, text in markdown_sources(path.resolve())
             for span in extract(text, where, extensions)]
    errors = typeset(spans)
    return spans, [(span, error) for span, error in zip(spans, errors) if error is not None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    spans, failures = check(args.files or book_files())
    for span, error in failures:
        print(f"{span.where}: {error}\n    {span.tex.strip()[:200]}")
    print(f"{len(spans)} math spans, {len(failures)} do not typeset")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
