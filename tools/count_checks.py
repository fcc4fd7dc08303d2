"""How much of the library is checking code: the count of issue 39.

A line of code is a non-blank line of annotated_ssm/ (the library; annotated_ssm/book/, the
book wing, is left out) that is not a comment and not part of a docstring. A line of code is
a checking line when it belongs to
- a ``raise`` statement;
- a function named ``check`` or ``check_...`` (``_check_...``; its whole definition);
- a statement that calls such a function (``check_bool("x", x)``, ``n = check_positive_int(...)``);
- an ``if`` block that only raises (``if bad: raise ValueError(...)``, its condition included).
A raise site is one ``raise`` statement.

    python tools/count_checks.py [ROOT]     # ROOT: the repository (default: this one)

prints, per file and in total, the checking lines, the lines of code, the share, the raise sites.

Calibration: on the commit issue 39 was filed against (faba4a0's parent, a348362) this gives
1,040 checking lines of 3,951 (26 %) and 188 raise sites; the issue's 1,058 of 3,685 (29 %)
counted the same 188 raise sites, and fewer lines of code (its rule for them is not stated:
leaving out import statements and ``__all__`` gives 3,568 lines, 29 %).
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path


def _is_check_name(name: str) -> bool:
    """``check``, ``check_x``, ``_check_x``, ``check_x_y``: not ``jax.checkpoint`` or ``checked``."""
    bare = name.lstrip("_")
    return bare == "check" or bare.startswith("check_")


def _lines(node: ast.AST) -> set[int]:
    return set(range(node.lineno, node.end_lineno + 1))


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                lines |= _lines(body[0])
    return lines


def code_lines(source: str, tree: ast.AST) -> set[int]:
    """Lines holding a token other than a comment, minus the docstrings' lines."""
    lines: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER, tokenize.ENCODING}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            lines |= set(range(token.start[0], token.end[0] + 1))
    return lines - _docstring_lines(tree)


def _calls_check(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if _is_check_name(name):
                return True
    return False


def _only_raises(body: list[ast.stmt]) -> bool:
    return all(isinstance(s, ast.Raise) for s in body)


def checking_lines(tree: ast.AST) -> tuple[set[int], int]:
    """(the checking lines, the number of raise sites) of a module."""
    lines: set[int] = set()
    raises = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise):
            raises += 1
            lines |= _lines(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_check_name(node.name):
            lines |= _lines(node)
        elif isinstance(node, ast.If) and _only_raises(node.body) and (not node.orelse or _only_raises(node.orelse)):
            lines |= _lines(node)
        elif isinstance(node, ast.stmt) and not isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While,
                       ast.With, ast.Try)) and _calls_check(node):
            lines |= _lines(node)
    return lines, raises


def count(path: Path) -> tuple[int, int, int]:
    """(checking lines, lines of code, raise sites) of one file."""
    source = path.read_text()
    tree = ast.parse(source)
    code = code_lines(source, tree)
    checks, raises = checking_lines(tree)
    return len(checks & code), len(code), raises


def main(argv: list[str]) -> None:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    package = root / "annotated_ssm"
    files = sorted(p for p in package.rglob("*.py") if "book" not in p.relative_to(package).parts)
    total = [0, 0, 0]
    print(f"{'file':34} {'checking':>8} {'code':>6} {'share':>6} {'raises':>6}")
    for path in files:
        checks, code, raises = count(path)
        total = [total[0] + checks, total[1] + code, total[2] + raises]
        share = checks / code if code else 0.0
        print(f"{str(path.relative_to(root)):34} {checks:8d} {code:6d} {share:6.0%} {raises:6d}")
    print(f"{'total':34} {total[0]:8d} {total[1]:6d} {total[0] / total[1]:6.0%} {total[2]:6d}")


if __name__ == "__main__":
    main(sys.argv)
