"""tools/test_gpu.py (`make test-gpu`): its refusals, its summary, and its whole run.

CI has no GPU: the run is checked here on the CPU (a hidden ``--allow-cpu``) in a small
copy of the project's layout, one passing and one failing chapter and a test file, so that
the plumbing (pytest-xdist, nbval with the book's sanitiser, the junit report, the lines it
prints, the exit status) is tested; the GPU results themselves come from running it there.
"""

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "test_gpu.py"


def _load_tool():
    spec = importlib.util.spec_from_file_location("tools_test_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


test_gpu = _load_tool()

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="2" skipped="1" tests="7">
<testcase classname="book.01_a.ipynb" name="Cell 0" time="1.5"/>
<testcase classname="book.01_a.ipynb" name="Cell 1" time="2.25"/>
<testcase classname="book.02_b.ipynb" name="Cell 0" time="3.0"/>
<testcase classname="book.02_b.ipynb" name="Cell 1" time="1.0"><failure message="x"/></testcase>
<testcase classname="tests.test_x" name="test_one" time="0.1"/>
<testcase classname="tests.test_x" name="test_two" time="0.1"><error message="y"/></testcase>
<testcase classname="tests.test_x" name="test_three" time="0.0"><skipped message="z"/></testcase>
</testsuite></testsuites>"""


def test_by_default_it_runs_every_chapter_and_the_test_files_not_left_out():
    paths = test_gpu.default_paths()
    chapters = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.ipynb"))
    assert [path for path in paths if path.endswith(".ipynb")] == chapters
    assert {"book/09_selective.ipynb", "book/10_duality.ipynb"} <= set(chapters)
    assert "tests/test_gpu_mode.py" in paths
    assert not set(test_gpu.LEFT_OUT) & set(paths)


def test_the_summary_has_a_line_per_chapter_and_the_counts():
    chapters = ["book/01_a.ipynb", "book/02_b.ipynb", "book/03_c.ipynb"]
    summary = test_gpu.summarize(JUNIT, chapters)
    assert [(c.path, c.cells, c.failed, c.seconds) for c in summary.chapters] == [
        ("book/01_a.ipynb", 2, 0, 3.75), ("book/02_b.ipynb", 2, 1, 4.0),
        ("book/03_c.ipynb", 0, 0, 0.0)]
    assert (summary.tests_passed, summary.tests_failed, summary.tests_skipped) == (1, 1, 1)
    lines = test_gpu.report(summary, 61.0)
    assert lines[0].split() == ["book/01_a.ipynb", "passed", "3.8", "s"]
    assert lines[1].split()[:5] == ["book/02_b.ipynb", "FAILED", "(1", "of", "2"]
    assert "did not run" in lines[2]  # a chapter missing from the report has failed
    assert lines[3] == ("chapters: 1 of 3 passed | package tests: 1 passed, 1 failed, "
                        "1 skipped | 61 s")
    assert not test_gpu.succeeded(summary)
    every_chapter_passed = test_gpu.summarize(JUNIT.replace('<failure message="x"/>', ""),
                                              chapters[:2])
    assert not test_gpu.succeeded(every_chapter_passed)  # the failed test still counts
    clean = JUNIT.replace('<failure message="x"/>', "").replace('<error message="y"/>', "")
    assert test_gpu.succeeded(test_gpu.summarize(clean, chapters[:2]))


def test_it_names_missing_test_tools_and_installs_nothing(monkeypatch, capsys):
    tools = {"pytest": "pytest", "no_such_module_xyz": "pytest-xyz"}
    monkeypatch.setattr(test_gpu, "TEST_TOOLS", tools)
    assert test_gpu.main([]) == 2
    message = capsys.readouterr().err
    assert "lacks pytest-xyz" in message and "installs nothing" in message


def test_it_refuses_a_machine_whose_jax_has_no_gpu():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 2
    assert "jax's default backend here is 'cpu'" in run.stderr and "not 'gpu'" in run.stderr


def _notebook(stored_output: str) -> dict:
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "print(1 + 1)",
            "outputs": [{"output_type": "stream", "name": "stdout", "text": stored_output}]}
    return {"cells": [cell], "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                          "display_name": "Python 3"}},
            "nbformat": 4, "nbformat_minor": 5}


def test_a_whole_run_on_the_cpu_prints_each_chapter_and_the_counts(tmp_path):
    """The script in a copy of the layout (tools/, tests/, book/): it finds the files itself,
    runs them on two workers, and reports the failing chapter and the failed exit status."""
    for name in ("test_gpu.py", "nbval_sanitize.cfg"):
        (tmp_path / "tools").mkdir(exist_ok=True)
        shutil.copy(ROOT / "tools" / name, tmp_path / "tools" / name)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_small.py").write_text(
        "import pytest\n\ndef test_passes():\n    pass\n\n"
        "def test_is_skipped():\n    pytest.skip('not here')\n")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "01_same.ipynb").write_text(json.dumps(_notebook("2\n")))
    (tmp_path / "book" / "02_differs.ipynb").write_text(json.dumps(_notebook("3\n")))
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    run = subprocess.run([sys.executable, "tools/test_gpu.py", "--allow-cpu", "--workers", "2"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    lines = run.stdout.strip().splitlines()
    assert run.returncode == 1, run.stdout + run.stderr
    assert lines[0].startswith("make test-gpu: cpu [CpuDevice(id=0)]; 3 files on 2 workers")
    assert lines[-3].split()[:2] == ["book/01_same.ipynb", "passed"], lines
    assert lines[-2].split()[:2] == ["book/02_differs.ipynb", "FAILED"], lines
    assert lines[-1].startswith("chapters: 1 of 2 passed | package tests: 1 passed, 0 failed, "
                                "1 skipped |"), lines
