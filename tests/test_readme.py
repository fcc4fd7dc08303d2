"""README.md's Python and command-line examples run as written, and print what they say.

Every ```python block of README.md runs, in order, in one fresh interpreter (the blocks
share their variables, as a reader pasting them one after another would) in an empty
temporary directory (what they save goes there). A ```bash block after the line
``<!-- tests/test_readme.py runs the next block's commands ... -->`` is run there too, at
its place in that order: each ``annotated-ssm-train ...`` command as its entry point,
``annotated_ssm.cli.main([...])``, which must succeed; the ```text block after the line
``<!-- tests/test_readme.py: the output of the commands above -->`` is its output: each of
its lines (``...`` stands for any lines) must appear, in that order, with the same words and
counts, measurements (numbers with a decimal point) within 0.02, and times (``3.0 s``) not
compared.

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
import shlex
import subprocess
import sys
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CLAIM = "# prints:"
MARKER = "@@README claim {}@@"
# Executes the blocks (a JSON list of [name, source]) one after another in one namespace.
# Before each, what is alive is left out of the garbage collector (gc.freeze): Python's own
# collections then walk only what the block makes; what the blocks print does not depend on
# it.
RUNNER = r'''
import gc, json, sys
namespace = {"__name__": "__main__"}
for name, source in json.loads(sys.argv[1]):
    gc.freeze()
    exec(compile(source, name, "exec"), namespace)
'''


RUN_COMMANDS = "<!-- tests/test_readme.py runs the next block's commands"
THEIR_OUTPUT = "<!-- tests/test_readme.py: the output of the commands above -->"
COMMAND = "annotated-ssm-train"
OUTPUT_MARKER = "@@README commands {}@@"
OUTPUT_END = "@@README commands end@@"
# Runs one block's commands (a JSON list of argument lists) in the examples' interpreter, as
# the command's entry point does (``annotated-ssm-train`` calls ``annotated_ssm.cli.main``; a
# process each would import jax and the package again, seconds each), printing each one's
# output between the markers; a failing command stops the examples. The entry point in a
# real process: tests/test_cli.py.
RUN_BLOCK = r'''
import contextlib as _contextlib, io as _io, json as _json
from annotated_ssm import cli as _cli
for _argv in _json.loads({argvs!r}):
    with _contextlib.redirect_stdout(_io.StringIO()) as _out:
        try:
            _status = _cli.main(_argv)
        except SystemExit as _exit:
            _status = _exit.code
    print({start!r}, flush=True)
    print(_out.getvalue(), end="", flush=True)
    print({end!r}, flush=True)
    if _status:
        raise SystemExit(f"annotated-ssm-train {{' '.join(_argv)}} exited with status "
                         f"{{_status}} (its error above)")
'''


def fenced_blocks(text: str) -> list[tuple[str, int, str, str]]:
    """(language, first line number, body, the line before the fence) of each ``` block."""
    blocks, lines, start = [], text.splitlines(), None
    for number, line in enumerate(lines, 1):
        if start is None and line.strip().startswith("```"):
            language, start, body = line.strip()[3:], number + 1, []
            before = lines[number - 2].strip() if number > 1 else ""
        elif start is not None and line.strip() == "```":
            blocks.append((language, start, "\n".join(body) + "\n", before))
            start = None
        elif start is not None:
            body.append(line)
    return blocks


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, source) of each ```python block."""
    return [(start, body) for language, start, body, _ in fenced_blocks(text)
            if language == "python"]


def commands(body: str) -> list[list[str]]:
    """The arguments of each ``annotated-ssm-train`` command of a shell block (lines joined
    at a trailing backslash; comments dropped)."""
    found = []
    for line in body.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            assert words[0] == COMMAND, f"{line!r}: the tested blocks hold {COMMAND} commands"
            found.append(words[1:])
    return found


TIME = re.compile(r"\d+(\.\d+)? s\b")
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?")


def same_line(claimed: str, printed: str) -> bool:
    """The same words and counts; measurements within 0.02; times not compared."""
    claimed, printed = TIME.sub("… s", claimed), TIME.sub("… s", printed)
    if NUMBER.sub("#", claimed) != NUMBER.sub("#", printed):
        return False
    for a, b in zip(NUMBER.findall(claimed), NUMBER.findall(printed)):
        if "." in a or "." in b:
            if abs(float(a) - float(b.replace(",", ""))) > 0.02:
                return False
        elif a != b:
            return False
    return True


def check_output(claimed: str, printed: list[str]) -> None:
    """Each claimed line (``...``: any lines) printed, in order."""
    position = 0
    for line in claimed.splitlines():
        if line.strip() == "...":
            continue
        for index in range(position, len(printed)):
            if same_line(line, printed[index]):
                position = index + 1
                break
        else:
            raise AssertionError(f"README claims the line\n  {line}\nafter what came before; the "
                                 "commands printed:\n" + "\n".join(printed))


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
    claims, blocks, outputs = [], [], []  # outputs: the text each command block claims
    for language, start, body, before in fenced_blocks((ROOT / "README.md").read_text()):
        if language == "python":
            blocks.append([f"README.md, the block from line {start}", instrumented(body, claims)])
        elif before.startswith(RUN_COMMANDS):
            source = RUN_BLOCK.format(argvs=json.dumps(commands(body)),
                                      start=OUTPUT_MARKER.format(len(outputs)), end=OUTPUT_END)
            blocks.append([f"README.md, the commands from line {start}", source])
            outputs.append(None)
        elif before == THEIR_OUTPUT:
            assert outputs and outputs[-1] is None, f"line {start}: output of no commands"
            outputs[-1] = body
    assert len(blocks) >= 3 and len(claims) >= 2 and len(outputs) >= 2 and None not in outputs
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONHASHSEED": "0"}
    run = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(blocks)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"a README example failed:\n{run.stderr[-4000:]}"
    printed = run.stdout.splitlines()
    for index, claimed in enumerate(outputs):
        start = printed.index(OUTPUT_MARKER.format(index))
        block = []  # the output of the block's commands, between their markers
        for line in printed[start:]:
            if line in (OUTPUT_MARKER.format(index), OUTPUT_END):
                continue
            if line.startswith("@@README "):  # the next block's, or a claimed print's
                break
            block.append(line)
        check_output(claimed, block)
    for index, claim in enumerate(claims):
        marker = MARKER.format(index)
        assert marker in printed, f"the print claiming {claim!r} did not run"
        line = (printed[printed.index(marker) + 1:] or [""])[0]
        assert line == claim, f"README claims `{claim}`, the example printed `{line}`"
    # The folders the examples say they write: a model alone, and a run folder with its
    # saves and the history (the command line's run folder beside it).
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["s4d"]
    run = tmp_path / "runs" / "s4d-run"  # orbax's numbered saves besides the run's files
    assert any(p.name.isdigit() for p in run.iterdir())
    assert sorted(p.name for p in run.iterdir() if not p.name.isdigit()) == [
        ".annotated_ssm.lock", "history.csv", "history.json"]


def test_command_output_is_compared_by_words_counts_and_measurements():
    printed = ["header", "epoch 1/3: loss 2.2796, accuracy 0.2025 (3.0 s) best", "other",
               "best epoch 2: test accuracy 0.652 (0.15 s per epoch)"]
    check_output("epoch 1/3: loss 2.28, accuracy 0.21 (9.9 s) best\n...\n"
                 "best epoch 2: test accuracy 0.66 (1 s per epoch)", printed)
    for wrong in ("epoch 1/3: loss 2.35, accuracy 0.2025 (3.0 s) best",   # a measurement off
                  "epoch 2/3: loss 2.2796, accuracy 0.2025 (3.0 s) best",  # a count
                  "epoch 1/3: loss 2.2796, accuracy 0.2025 (3.0 s)",       # a word
                  "best epoch 2: test accuracy 0.652 (0.15 s per epoch)\nheader"):  # the order
        with pytest.raises(AssertionError, match="README claims the line"):
            check_output(wrong, printed)
    assert commands("annotated-ssm-train --a 1 \\\n    --b 'x y'  # c\n\n") == [["--a", "1", "--b", "x y"]]


def test_a_claim_must_be_on_a_print_and_other_print_comments_hold_no_result():
    claims = []
    with pytest.raises(AssertionError, match="belongs to a line holding one print"):
        instrumented("x = 1  # prints: 1\n", claims)
    with pytest.raises(AssertionError, match=re.escape(f"write a printed result as '{CLAIM}")):
        instrumented("print(41.7)  # e.g. 41.7\n", claims)
    out = instrumented("if True:\n    print(2)  # prints: 2\nprint(x)  # the value\n", claims)
    assert out.splitlines()[1] == f"    print({MARKER.format(0)!r}, flush=True); print(2)"
    assert claims == ["2"]
