"""`make test-gpu`: the package tests and every chapter, top to bottom, on this machine's GPU.

Runs in the current Python environment (it creates none and downloads nothing): one that
has CUDA jax and the package's requirements (requirements.txt: pytest-xdist, nbval and
ipykernel included). The checkout's own package is imported (its root goes first on
PYTHONPATH). It refuses to run unless jax's default backend is the GPU, then runs pytest
as `make test` does, files in parallel (pytest-xdist, a file per worker at a time: nbval
runs a chapter's cells in order in one kernel), the chapters' stored outputs compared by
nbval through the same sanitiser (tools/nbval_sanitize.cfg). JAX takes GPU memory as it
needs it (XLA_PYTHON_CLIENT_PREALLOCATE=false), so that the workers share the GPU. It
prints one line per chapter (passed or failed, time) and the counts; exit status 0 only
if everything passed.

    python tools/test_gpu.py [--workers 4] [PATH ...]   (default: tests/ and book/*.ipynb)
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: What pytest needs beyond the package's own imports: module -> distribution to install.
TEST_TOOLS = {"pytest": "pytest", "xdist": "pytest-xdist", "nbval": "nbval",
              "ipykernel": "ipykernel"}

#: Package test files left out, and why: they check the book's tooling, which does not
#: depend on the backend and needs programs outside Python (`make test` runs them).
LEFT_OUT = {
    "tests/test_mathjax.py": "typesets the book's math with MathJax in node (`make node`)",
}


def missing_tools() -> list[str]:
    """The distributions of TEST_TOOLS that this Python cannot import."""
    return [dist for module, dist in TEST_TOOLS.items() if importlib.util.find_spec(module) is None]


def backend(python: str) -> tuple[str, str]:
    """(jax's default backend, its devices) in a fresh interpreter (this process keeps no GPU)."""
    code = "import jax; print(jax.default_backend()); print(jax.devices())"
    run = subprocess.run([python, "-c", code], capture_output=True, text=True,
                         env=test_environment())
    if run.returncode:
        raise SystemExit(f"make test-gpu: jax does not import in {python}:\n{run.stderr.strip()}")
    name, devices = run.stdout.strip().splitlines()[-2:]
    return name, devices


def test_environment() -> dict[str, str]:
    """The environment of the test run: this checkout's package first, GPU memory on demand,
    the persistent compilation cache of `make test` (its own folder), hash seed 0."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    env["PYTHONHASHSEED"] = "0"
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(ROOT / ".cache" / "jax-gpu"))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    return env


def default_paths() -> list[str]:
    tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py"))
    chapters = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.ipynb"))
    return [path for path in tests if path not in LEFT_OUT] + chapters


def pytest_command(python: str, paths: list[str], workers: int, junit: pathlib.Path) -> list[str]:
    return [python, "-m", "pytest", "-n", str(workers), "--dist", "loadfile",
            "-p", "no:cacheprovider", "-q", "-rfE", f"--junitxml={junit}", "-o", "junit_family=xunit2",
            "--nbval", "--nbval-current-env", "--nbval-cell-timeout=900",
            "--nbval-sanitize-with", "tools/nbval_sanitize.cfg", *paths]


# --- the summary -------------------------------------------------------------------------------


@dataclasses.dataclass
class Chapter:
    path: str
    cells: int = 0
    failed: int = 0
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.cells > 0 and self.failed == 0


@dataclasses.dataclass
class Summary:
    chapters: list[Chapter]
    tests_passed: int = 0
    tests_failed: int = 0
    tests_skipped: int = 0


def _outcome(testcase) -> str:
    if testcase.find("failure") is not None or testcase.find("error") is not None:
        return "failed"
    return "skipped" if testcase.find("skipped") is not None else "passed"


def _chapter_of(classname: str) -> str | None:
    """book/01_x.ipynb from the junit classname "book.01_x.ipynb" of one of its cells."""
    if not classname.endswith(".ipynb"):
        return None
    parts = classname[: -len(".ipynb")].split(".")
    return "/".join(parts) + ".ipynb"


def summarize(junit_xml: str, chapters: list[str]) -> Summary:
    """Per chapter: cells run, cells failed, seconds (the sum of its cells'); package tests:
    counts by outcome. A chapter with no cell in the report (it did not run) has failed."""
    found = {path: Chapter(path) for path in chapters}
    summary = Summary(list(found.values()))
    for testcase in ElementTree.fromstring(junit_xml).iter("testcase"):
        outcome = _outcome(testcase)
        path = _chapter_of(testcase.get("classname", ""))
        if path is not None:
            chapter = found.setdefault(path, Chapter(path))
            if chapter not in summary.chapters:
                summary.chapters.append(chapter)
            chapter.cells += 1
            chapter.failed += outcome == "failed"
            chapter.seconds += float(testcase.get("time") or 0)
        else:
            setattr(summary, f"tests_{outcome}", getattr(summary, f"tests_{outcome}") + 1)
    return summary


def report(summary: Summary, seconds: float) -> list[str]:
    """One line per chapter, then the counts."""
    lines = []
    for chapter in summary.chapters:
        if chapter.passed:
            state = "passed"
        elif not chapter.cells:
            state = "did not run"
        else:
            state = f"FAILED ({chapter.failed} of {chapter.cells} cells)"
        lines.append(f"{chapter.path:36s} {state:30s} {chapter.seconds:7.1f} s")
    passed = sum(chapter.passed for chapter in summary.chapters)
    lines.append(f"chapters: {passed} of {len(summary.chapters)} passed | package tests: "
                 f"{summary.tests_passed} passed, {summary.tests_failed} failed, "
                 f"{summary.tests_skipped} skipped | {seconds:.0f} s")
    return lines


def succeeded(summary: Summary) -> bool:
    return summary.tests_failed == 0 and all(chapter.passed for chapter in summary.chapters)


# --- main ------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="test files and chapters (default: all)")
    parser.add_argument("--workers", type=int, default=4, help="pytest-xdist workers (default 4)")
    # Checks the plumbing on a machine without a GPU (tests/test_test_gpu.py): never a GPU result.
    parser.add_argument("--allow-cpu", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    python = sys.executable
    missing = missing_tools()
    if missing:
        print(f"make test-gpu: {python} lacks {', '.join(missing)}; install them into this "
              f"environment (versions in requirements.txt), e.g. {python} -m pip install "
              + " ".join(missing) + ". make test-gpu installs nothing itself.", file=sys.stderr)
        return 2
    name, devices = backend(python)
    if name != "gpu" and not args.allow_cpu:
        print(f"make test-gpu: jax's default backend here is {name!r} ({devices}), not 'gpu'. "
              "Run it where jax has CUDA (README: JAX with CUDA), or "
              "`make test` on the CPU.", file=sys.stderr)
        return 2
    paths = args.paths or default_paths()
    print(f"make test-gpu: {name} {devices}; {len(paths)} files on {args.workers} workers",
          flush=True)
    chapters = [path for path in paths if path.endswith(".ipynb")]
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        junit = pathlib.Path(folder) / "junit.xml"
        run = subprocess.run(pytest_command(python, paths, args.workers, junit), cwd=ROOT,
                             env=test_environment())
        if not junit.exists():
            print(f"make test-gpu: pytest stopped (exit status {run.returncode}) before it "
                  "wrote its report.", file=sys.stderr)
            return run.returncode or 1
        summary = summarize(junit.read_text(), chapters)
    print("\n".join(report(summary, time.monotonic() - start)))
    return 0 if run.returncode == 0 and succeeded(summary) else 1


if __name__ == "__main__":
    sys.exit(main())
