"""README.md's Python examples run as written, and print what their comments say.

Every ```python block of README.md runs, in order, in one fresh interpreter (the blocks
share their variables, as a reader pasting them one after another would) in an empty
temporary directory (what they save goes there).

The convention for a printed result: a line holding one ``print(...)`` call may end in

    print(results)  # prints: 54.0 ± 6.2 % (seeds 0: 52.0, 1: 49.0, 2: 61.0)

which claims that the call prints exactly that line, and the test compares the two. Any other
comment on a ``print`` line that holds a digit or "e.g." fails the test: a result shown in the
README is a checked claim.
"""

import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLAIM = "# prints:"
MARKER = "@@README claim {}@@"
# Executes the blocks (a JSON list of [name, source]) one after another in one namespace.
RUNNER = r'''
import json, sys
namespace = {"__name__": "__main__"}
for name, source in json.loads(sys.argv[1]):
    exec(compile(source, name, "exec"), namespace)
'''


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, source) of each ```python block."""
    blocks, lines, start = [], text.splitlines(), None
    for number, line in enumerate(lines, 1):
        if start is None and line.strip() == "```python":
            start, body = number + 1, []
        elif start is not None and line.strip() == "```":
            blocks.append((start, "\n".join(body) + "\n"))
            start = None
        elif start is not None:
            body.append(line)
    return blocks


def comments(source: str) -> dict[int, str]:
    """Line number (from 1) -> the comment ending that line."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {token.start[0]: token.string for token in tokens if token.type == tokenize.COMMENT}


def instrumented(source: str, claims: list[str]) -> str:
    """``source`` with a marker printed before each claimed print; appends the claims."""
    lines = source.splitlines()
    for number, comment in comments(source).items():
        code = lines[number - 1][:lines[number - 1].rindex(comment)].rstrip()
        is_print = code.lstrip().startswith("print(")
        if comment.startswith(CLAIM):
            assert is_print, f"{code!r}: '{CLAIM}' belongs to a line holding one print(...) call"
            indent = code[:len(code) - len(code.lstrip())]
            lines[number - 1] = (f"{indent}print({MARKER.format(len(claims))!r}, flush=True); "
                                 f"{code.lstrip()}")
            claims.append(comment[len(CLAIM):].strip())
        elif is_print:
            assert not re.search(r"\d|e\.g\.", comment), (
                f"{code} {comment}: write a printed result as '{CLAIM} <the printed line>'")
    return "\n".join(lines) + "\n"


def test_readme_examples_run_and_print_what_they_claim(tmp_path):
    claims, blocks = [], []
    for start, source in python_blocks((ROOT / "README.md").read_text()):
        blocks.append([f"README.md, the block from line {start}", instrumented(source, claims)])
    assert len(blocks) >= 3 and len(claims) >= 2
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONHASHSEED": "0"}
    run = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(blocks)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"a README example failed:\n{run.stderr[-4000:]}"
    printed = run.stdout.splitlines()
    for index, claim in enumerate(claims):
        marker = MARKER.format(index)
        assert marker in printed, f"the print claiming {claim!r} did not run"
        line = (printed[printed.index(marker) + 1:] or [""])[0]
        assert line == claim, f"README claims `{claim}`, the example printed `{line}`"


def test_a_claim_must_be_on_a_print_and_other_print_comments_hold_no_result():
    claims = []
    with pytest.raises(AssertionError, match="belongs to a line holding one print"):
        instrumented("x = 1  # prints: 1\n", claims)
    with pytest.raises(AssertionError, match=re.escape(f"write a printed result as '{CLAIM}")):
        instrumented("print(41.7)  # e.g. 41.7\n", claims)
    out = instrumented("if True:\n    print(2)  # prints: 2\nprint(x)  # the value\n", claims)
    assert out.splitlines()[1] == f"    print({MARKER.format(0)!r}, flush=True); print(2)"
    assert claims == ["2"]
