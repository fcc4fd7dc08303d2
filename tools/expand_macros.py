"""Expand the book's MathJax macros in chapter markdown, so the math renders everywhere.

The website defines macros such as ``\\dA`` in _config.yml, but Jupyter and Colab know
nothing of them. Chapters therefore store plain LaTeX; this tool rewrites any macro an
author used into its definition.

A macro is one token, so ``\\tilde\\mC`` works on the site; its expansion is several
(``\\mathbf`` and ``{C}``), so after an accent or ``\\sqrt`` it is written in braces,
``\\tilde{\\mathbf{C}}``. The same repair is applied to text expanded by older versions
of this tool (``\\tilde\\mathbf{C}``, which TeX reads as "Missing argument for \\mathbf").

    python tools/expand_macros.py book/*.ipynb           # rewrite in place
    python tools/expand_macros.py --check book/*.ipynb   # exit 1 if a chapter uses a macro
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def macros() -> dict[str, tuple[str, int]]:
    """name -> (definition, number of arguments), read from _config.yml's mathjax3_config."""
    text = (ROOT / "_config.yml").read_text()
    block = text[text.index("macros:"):]
    found = {}
    for name, value in re.findall(r"^\s+(\w+):\s*(.+)$", block, flags=re.MULTILINE):
        value = value.strip()
        if value.startswith("["):
            definition, nargs = json.loads(value)
        else:
            definition, nargs = json.loads(value), 0
        found[name] = (definition, nargs)
    return found


# Commands that take one argument and that authors write without braces before a macro.
ONE_ARGUMENT = ("tilde", "widetilde", "bar", "hat", "widehat", "vec", "dot", "ddot", "check",
                "breve", "acute", "grave", "mathring", "overline", "underline", "sqrt")
# What the site's macros expand to: one-argument commands such as ``\\mathbf{C}``.
FONT = ("mathbf", "boldsymbol", "mathbb", "mathrm", "mathcal", "mathsf", "mathit", "overline")
# A braced argument with at most one level of nested braces (``{\\mathbf{A}}``).
BRACED = r"\{(?:[^{}]|\{[^{}]*\})*\}"
# ``\\tilde \\mathbf{C}``: an accent, then a font command that should have been its argument.
UNBRACED = re.compile(r"(\\(?:" + "|".join(ONE_ARGUMENT) + r"))(?![A-Za-z])\s*"
                      r"(\\(?:" + "|".join(FONT) + r")" + BRACED + ")")


def brace_arguments(text: str) -> str:
    """``\\tilde\\mathbf{C}`` -> ``\\tilde{\\mathbf{C}}`` (idempotent)."""
    return UNBRACED.sub(r"\1{\2}", text)


def expand(text: str, table: dict[str, tuple[str, int]]) -> str:
    """Replace every site macro in ``text`` by its definition, as TeX that typesets alone."""
    for name, (definition, nargs) in table.items():
        pattern = re.compile(r"\\" + name + r"(?![A-Za-z])" + (f"({BRACED})" if nargs else ""))

        def replace(match, definition=definition, nargs=nargs):
            result = definition
            if nargs:
                result = result.replace("#1", match.group(1)[1:-1])
            return result

        text = pattern.sub(replace, text)
    return brace_arguments(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    table = macros()
    using = []
    for path in args.notebooks:
        notebook = json.loads(path.read_text())
        changed = False
        for cell in notebook["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            source = "".join(cell["source"])
            new = expand(source, table)
            if new != source:
                changed = True
                cell["source"] = new.splitlines(keepends=True)
        if changed:
            using.append(path)
            if not args.check:
                text = json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False)
                path.write_text(text + "\n")
                print(f"expanded macros in {path}")
    if args.check and using:
        print("chapters using site-only MathJax macros or unbraced accents: "
              + ", ".join(map(str, using)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
