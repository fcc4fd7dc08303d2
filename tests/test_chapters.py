"""Checks on the stored chapters (book/*.ipynb) that nbval does not make.

nbval re-runs each chapter and compares outputs; these tests look at the files as
committed: the mandatory setup cell, a clean top-to-bottom execution, no stored errors,
and a reason next to every nbval marker.
"""

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
MARKERS = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP", "NBVAL_RAISES_EXCEPTION", "NBVAL_CHECK_OUTPUT")


def _load_tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SETUP_TOOL = _load_tool("setup_cell")
SETUP_CELL, SETUP_TAG = _SETUP_TOOL.setup_cell_source(), _SETUP_TOOL.TAG
_MACRO_TOOL = _load_tool("expand_macros")
MACROS, EXPAND = _MACRO_TOOL.macros(), _MACRO_TOOL.expand


def code_cells(notebook):
    return [c for c in notebook["cells"] if c["cell_type"] == "code"]


def source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def setup_cell_problems(notebook) -> list[str]:
    cells = code_cells(notebook)
    if not cells:
        return ["no code cell"]
    if source(cells[0]) != SETUP_CELL:
        return ["first code cell differs from tools/setup_cell.py (run `python tools/setup_cell.py` on it)"]
    if SETUP_TAG not in cells[0]["metadata"].get("tags", []):
        return [f"the setup cell lacks the {SETUP_TAG!r} tag (run `python tools/setup_cell.py` on it)"]
    return []


def execution_problems(notebook) -> list[str]:
    """Every non-empty code cell executed once, in order, in one fresh run (counts 1, 2, 3, …)."""
    problems = []
    counts = [c.get("execution_count") for c in code_cells(notebook) if source(c).strip()]
    if any(count is None for count in counts):
        problems.append(f"{counts.count(None)} code cell(s) never executed")
    executed = [count for count in counts if count is not None]
    if executed != list(range(1, len(executed) + 1)):
        problems.append(f"execution counts are not 1, 2, 3, …: {executed}")
    return problems


def error_problems(notebook) -> list[str]:
    problems = []
    for index, cell in enumerate(code_cells(notebook)):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(f"code cell {index} stores an error: {output.get('ename')}: {output.get('evalue')}")
    return problems


def marker_problems(notebook) -> list[str]:
    """Each nbval marker stands alone on its line and is followed by a comment saying why."""
    problems = []
    for index, cell in enumerate(code_cells(notebook)):
        lines = source(cell).splitlines()
        for number, line in enumerate(lines):
            found = [m for m in MARKERS if m in line]
            if not found:
                continue
            if line.strip() != f"# {found[0]}":
                problems.append(f"code cell {index}: marker not alone on its line: {line.strip()!r}")
                continue
            reason = lines[number + 1].strip() if number + 1 < len(lines) else ""
            if not reason.startswith("#") or len(reason.lstrip("# ()").strip()) < 10 or any(m in reason for m in MARKERS):
                problems.append(f"code cell {index}: {found[0]} is not followed by a comment line saying why")
    return problems


def macro_problems(notebook) -> list[str]:
    """Markdown math uses plain LaTeX: the site's MathJax macros are unknown to Jupyter and Colab."""
    used = [
        i for i, c in enumerate(notebook["cells"])
        if c["cell_type"] == "markdown" and EXPAND(source(c), MACROS) != source(c)
    ]
    if used:
        return [f"markdown cells {used} use site-only macros (run `python tools/expand_macros.py` on the chapter)"]
    return []


CHECKS = [setup_cell_problems, execution_problems, error_problems, marker_problems, macro_problems]


@pytest.mark.skipif(not CHAPTERS, reason="no chapter in book/ yet")
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_chapter(path, check):
    problems = check(json.loads(path.read_text()))
    assert not problems, f"{path.name}: " + "; ".join(problems)


# --- the checks themselves catch what they should ------------------------------------------

def make_notebook(*sources, counts=None, outputs=None):
    counts = counts or list(range(1, len(sources) + 1))
    outputs = outputs or [[] for _ in sources]
    cells = [{"cell_type": "code", "source": s, "execution_count": c, "outputs": o, "metadata": {}}
             for s, c, o in zip(sources, counts, outputs)]
    if cells:
        cells[0]["metadata"]["tags"] = [SETUP_TAG]
    return {"cells": [{"cell_type": "markdown", "source": "# Title", "metadata": {}}, *cells]}


def test_checks_accept_a_good_notebook():
    good = make_notebook(SETUP_CELL, "x = 1\n", "# NBVAL_IGNORE_OUTPUT\n# (nbval: timings differ between runs)\nprint(1)")
    assert all(check(good) == [] for check in CHECKS)


def test_setup_cell_check_catches_an_edited_cell():
    assert setup_cell_problems(make_notebook(SETUP_CELL + "\nprint('extra')"))
    assert setup_cell_problems(make_notebook("import numpy"))
    assert setup_cell_problems({"cells": []})


def test_execution_check_catches_unexecuted_and_out_of_order_cells():
    assert execution_problems(make_notebook("a = 1", "b = 2", counts=[1, None]))
    assert execution_problems(make_notebook("a = 1", "b = 2", counts=[2, 1]))
    assert execution_problems(make_notebook("a = 1", "b = 2", counts=[1, 3]))


def test_error_check_catches_stored_tracebacks():
    error = {"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": []}
    assert error_problems(make_notebook("raise ValueError('boom')", outputs=[[error]]))


@pytest.mark.parametrize(
    "cell",
    [
        "# NBVAL_IGNORE_OUTPUT\nprint(time.time())",  # no reason
        "# NBVAL_SKIP\n#\nx = 1",  # empty reason
        "x = 1  # NBVAL_IGNORE_OUTPUT\n# (nbval: timings)",  # not alone on its line
        "# NBVAL_IGNORE_OUTPUT",  # last line, nothing after it
        "# NBVAL_IGNORE_OUTPUT\n# NBVAL_SKIP\n# (nbval: because)",  # a marker is not a reason
    ],
)
def test_marker_check_catches_markers_without_a_reason(cell):
    assert marker_problems(make_notebook(cell))


def test_macro_check_catches_site_only_macros():
    notebook = make_notebook("x = 1")
    notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["The matrix $\\dA$ is stable."]})
    assert macro_problems(notebook)
    notebook["cells"][-1]["source"] = ["The matrix $\\overline{\\mathbf{A}}$ is stable."]
    assert not macro_problems(notebook)
