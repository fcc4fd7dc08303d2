"""Checks on the stored chapters (book/*.ipynb) that nbval does not make.

nbval re-runs each chapter and compares outputs; these tests look at the files as
committed: the mandatory setup cell, a clean top-to-bottom execution, no stored errors,
nbval markers as cell tags with a reason in the metadata, lines a reader can see without
scrolling sideways, no stored widget state, and figures whose text stays legible where the
website shows them (see ``figure_problems``).
"""

import base64
import importlib
import importlib.util
import inspect
import json
import pathlib
import re
import struct

import pytest

from annotated_ssm.book import plotting
from annotated_ssm.book.display import KEY_FIGURE

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
# nbval's comment markers (``# NBVAL_SKIP`` ...); the book uses the equivalent cell tags.
COMMENT_MARKER = re.compile(r"#\s*NBVAL_[A-Z_]+")
# The longest line a reader sees without scrolling sideways (code and printed output).
MAX_LINE = 100
# Tags that hide a cell's source from readers (myst-nb); its lines need not fit.
HIDDEN_SOURCE = {"remove-input", "remove-cell"}
HIDDEN_OUTPUT = {"remove-output", "remove-cell"}


def _load_tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SETUP_TOOL = _load_tool("setup_cell")
SETUP_CELL, SETUP_TAG = _SETUP_TOOL.setup_cell_source(), _SETUP_TOOL.TAG


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
    if not _SETUP_TOOL.is_current(cells[0], SETUP_CELL):
        return ["the setup cell lacks its tags or Colab's form view "
                "(run `python tools/setup_cell.py` on it)"]
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
    """nbval markers are cell tags (``nbval-ignore-output`` ...), each with a reason.

    A ``# NBVAL_...`` comment would be shown to every reader; the tag is not, and the
    reason lives in the cell's metadata (``nbval_reason``) for maintainers.
    """
    problems = []
    for index, cell in enumerate(code_cells(notebook)):
        if COMMENT_MARKER.search(source(cell)):
            problems.append(f"code cell {index} has an nbval comment marker; make it a cell tag "
                            "(tools/nbval_tags.py; the setup cell: tools/setup_cell.py)")
        tags = [t for t in cell["metadata"].get("tags", []) if t.startswith("nbval-")]
        reason = cell["metadata"].get("nbval_reason", "")
        if tags and len(reason.strip()) < 10:
            problems.append(f"code cell {index} is tagged {tags} without metadata.nbval_reason "
                            "saying why")
    return problems


def output_lines(cell) -> list[str]:
    """The text lines a reader sees printed below a code cell: streams, plain results, and
    package source shown by ``show_source`` (a highlighted listing of its text/plain)."""
    listing = "show_source(" in source(cell)
    lines = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            text = output["text"]
        elif (output.get("output_type") == "execute_result"
              and (listing or set(output["data"]) == {"text/plain"})):  # else a richer form shows
            text = output["data"]["text/plain"]
        else:
            continue
        text = "".join(text) if isinstance(text, list) else text
        lines += re.split(r"\r\n|\r|\n", text)
    return lines


def line_length_problems(notebook) -> list[str]:
    """Visible code lines and printed lines fit in MAX_LINE characters (no sideways scroll)."""
    problems = []
    for index, cell in enumerate(code_cells(notebook)):
        tags = set(cell["metadata"].get("tags", []))
        for kind, lines, hidden in (("code", source(cell).splitlines(), HIDDEN_SOURCE),
                                    ("output", output_lines(cell), HIDDEN_OUTPUT)):
            long = [line for line in lines if len(line) > MAX_LINE]
            if long and not tags & hidden:
                problems.append(f"code cell {index}: {len(long)} {kind} line(s) longer than "
                                f"{MAX_LINE} characters, e.g. {long[0][:60]!r}…")
    return problems


def widget_state_problems(notebook) -> list[str]:
    """No widget state in the metadata: nothing uses it (the site shows each explorer's PNG)."""
    if "widgets" in notebook.get("metadata", {}):
        return ["notebook metadata stores widget state (re-run the chapter with `make execute`, "
                "which strips it)"]
    return []


# The website shrinks each figure to its text column, 368 px on a 400 px phone
# (annotated_ssm.book.plotting states the rule): every text must stay >= MIN_TEXT_PX there.
# The chapters draw in BOOK_STYLE (FIGURE_DPI, fonts >= MIN_FONT_PT, PAGE_WIDTH wide by default).
MIN_FONT_PX = plotting.MIN_FONT_PT * plotting.FIGURE_DPI / 72  # in the drawn PNG
# A figure whose smallest font is MIN_FONT_PT keeps it at >= MIN_TEXT_PX up to this width
# (11 pt at 100 dpi: 624 px; PAGE_WIDTH is 600 px, plus what the stored crop may add).
MAX_FIGURE_WIDTH = int(MIN_FONT_PX * plotting.PHONE_COLUMN_PX / plotting.MIN_TEXT_PX)
FONT_SIZE = re.compile(r"\b(?:fontsize|title_fontsize|labelsize)\s*=\s*(\d+(?:\.\d+)?)")


def png_widths(cell) -> list[int]:
    """Pixel widths of the image/png outputs stored under a code cell (from the PNG header)."""
    widths = []
    for output in cell.get("outputs", []):
        data = output.get("data", {}).get("image/png")
        if data:
            png = base64.b64decode("".join(data) if isinstance(data, list) else data)
            widths.append(struct.unpack(">I", png[16:20])[0])  # IHDR: width, then height
    return widths


def figure_problems(notebook) -> list[str]:
    """Figure text stays legible on a phone: every stored figure shown in the phone's column
    (``plotting.PHONE_COLUMN_PX``) keeps its text at >= ``plotting.MIN_TEXT_PX``.

    - Every figure is at most MAX_FIGURE_WIDTH px wide: drawn in ``BOOK_STYLE`` (fonts
      >= ``MIN_FONT_PT`` at ``FIGURE_DPI``), ``PAGE_WIDTH`` wide (``figsize`` no wider).
    - A font size a cell asks for (``fontsize=...``) keeps >= MIN_TEXT_PX at the width of the
      cell's figure. (Fonts set inside ``annotated_ssm.book`` are checked by
      ``tests/test_plotting.py``.)
    """
    problems = []
    for index, cell in enumerate(code_cells(notebook)):
        widths = png_widths(cell)
        if not widths:
            continue
        widest = max(widths)
        if widest > MAX_FIGURE_WIDTH:
            problems.append(f"code cell {index}: a figure {widest} px wide (at most {MAX_FIGURE_WIDTH}: "
                            f"its text would shrink below {plotting.MIN_TEXT_PX} px on a phone; "
                            f"draw it plotting.PAGE_WIDTH wide)")
        shrink = min(1.0, plotting.PHONE_COLUMN_PX / widest)
        for points in map(float, FONT_SIZE.findall(source(cell))):
            shown = points * plotting.FIGURE_DPI / 72 * shrink
            if shown < plotting.MIN_TEXT_PX:
                problems.append(f"code cell {index}: fontsize {points:g} in a figure {widest} px wide "
                                f"is {shown:.1f} px on a phone (at least {plotting.MIN_TEXT_PX})")
    return problems


# The opening: ``(label)=``, the title, two sentences, then the key figure glued from the cell
# that draws it (annotated_ssm.book.display.key_figure), all on the reader's first screen.
SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
GLUE_FIGURE = re.compile(r"^(`{3,}|:{3,})\{glue:figure\}\s*(\S+)", re.MULTILINE)


def glued_names(notebook) -> set[str]:
    """Names of the outputs glued in the notebook (myst-nb's ``scrapbook`` metadata)."""
    return {output.get("metadata", {}).get("scrapbook", {}).get("name")
            for cell in code_cells(notebook) for output in cell.get("outputs", [])} - {None}


def opening_problems(notebook) -> list[str]:
    """The first cell is the title, a two-sentence summary and ``{glue:figure} key-figure``,
    and a code cell's stored output is glued under that name (with a PNG)."""
    first = notebook["cells"][0]
    text = source(first)
    lines = [line for line in text.splitlines() if line.strip()]
    if first["cell_type"] != "markdown" or len(lines) < 2 or not lines[1].startswith("# "):
        return ["the first cell is not the chapter's label and title"]
    glue = GLUE_FIGURE.search(text)
    if not glue:
        return [f"the first cell shows no key figure ({{glue:figure}} {KEY_FIGURE})"]
    problems = []
    summary = text[text.index(lines[1]) + len(lines[1]):glue.start()].strip()
    sentences = len(SENTENCE_END.findall(summary))
    if sentences != 2:
        problems.append(f"the summary before the key figure has {sentences} sentences, not two")
    if glue.group(2) != KEY_FIGURE:
        problems.append(f"the opening glues {glue.group(2)!r}, not {KEY_FIGURE!r}")
    if KEY_FIGURE not in glued_names(notebook):
        problems.append(f"no stored output is glued as {KEY_FIGURE!r} (display.key_figure(fig))")
    return problems


# Links to the API reference: a chapter's prose links (``{func}`~annotated_ssm.kernels.cauchy```,
# ``{class}`` ...; Sphinx's -n build fails on a target that does not exist) every library
# module and name its code imports. The book wing (annotated_ssm.book: drawing, widgets) is not
# the library a reader comes to use, so it needs no link.
PACKAGE_IMPORT = re.compile(r"^from (annotated_ssm(?:\.[\w.]+)?) import (\([^)]*\)|[^\n]+)", re.MULTILINE)
API_ROLE = re.compile(r"\{(?:py:)?(?:func|class|mod|data|meth|attr|obj)\}`~?([\w.]+)`")


def imported_library_names(notebook) -> set[str]:
    """Full names (``annotated_ssm.kernels.cauchy``, ``annotated_ssm.hippo``) imported by the
    chapter's code cells from the library, the book wing left out."""
    names = set()
    for cell in code_cells(notebook)[1:]:  # the setup cell imports nothing of the package
        for module, imported in PACKAGE_IMPORT.findall(source(cell)):
            for item in re.sub(r"#.*|[()]", "", imported).split(","):
                name = item.split()[0] if item.split() else ""  # "x as y": x
                if name and not module.startswith("annotated_ssm.book") and name != "book":
                    names.add(f"{module}.{name}")
    return names


def defined_name(full: str) -> str:
    """Where the reference documents an imported name: ``annotated_ssm.layers.S4DLayer`` (a
    re-export) is documented as ``annotated_ssm.layers.s4d.S4DLayer``; a constant where it is
    imported from."""
    module, _, name = full.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return full
    if inspect.ismodule(obj):
        return obj.__name__
    if hasattr(obj, "__module__") and hasattr(obj, "__qualname__"):
        return f"{obj.__module__}.{obj.__qualname__}"
    return full


def api_link_problems(notebook) -> list[str]:
    """Every library name the chapter imports is linked to the API reference from its prose
    (under its own name or where it is defined): the name itself, or for a module any name
    inside it."""
    prose = "\n".join(source(c) for c in notebook["cells"] if c["cell_type"] == "markdown")
    targets = set(API_ROLE.findall(prose))
    unlinked = sorted(name for name in imported_library_names(notebook)
                      if not any(t == n or t.startswith(n + ".") for t in targets
                                 for n in (name, defined_name(name))))
    return [f"the prose never links {', '.join(unlinked)} to the API reference "
            "(e.g. {func}`~annotated_ssm.kernels.cauchy`)"] if unlinked else []


CHECKS = [setup_cell_problems, execution_problems, error_problems, marker_problems,
          line_length_problems, widget_state_problems, figure_problems, opening_problems,
          api_link_problems]


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_chapter(path, check):
    problems = check(json.loads(path.read_text()))
    assert not problems, f"{path.name}: " + "; ".join(problems)


# --- the main line: markdown words a reader meets without opening an aside -------------

# A MyST fence (``` or :::, three or more), with an optional {directive} and its argument.
FENCE = re.compile(r"^\s*(`{3,}|:{3,})\s*(\{[\w-]+\})?\s*(.*)$")
OPTION = re.compile(r"^\s*:[\w-]+:")
# Directives whose body a reader sees only on asking: collapsed asides and margin notes.
ASIDE_DIRECTIVES = {"{dropdown}", "{margin}"}
# The longest main line a chapter may have, in words.
MAIN_LINE_WORDS = 2500



def markdown_words(text: str) -> tuple[int, int]:
    """(main-line words, all words) of one markdown cell: words are whitespace-separated;
    the body of a ``{dropdown}``, a ``{margin}`` or a directive with ``:class: dropdown`` is
    not main line (its title is), and neither is a code block (it is not prose); all words
    counts everything."""
    stack = [[None, False, 0]]  # per open fence: the fence, hidden, main-line words inside
    total = 0
    for line in text.splitlines():
        match = FENCE.match(line)
        fence = stack[-1][0]
        if (match and fence and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)
                and not match.group(2) and not match.group(3)):
            _, hidden, words = stack.pop()  # the block closes
            stack[-1][2] += 0 if hidden else words
            continue
        if match and (match.group(2) or fence is None or fence[0] != "`"):
            code = match.group(1)[0] == "`" and not match.group(2)
            title = 0 if code else len(match.group(3).split())
            total += title
            stack[-1][2] += title
            stack.append([match.group(1), code or match.group(2) in ASIDE_DIRECTIVES or stack[-1][1], 0])
            continue
        if OPTION.match(line) and len(stack) > 1:
            if line.split(":", 2)[1] == "class" and "dropdown" in line:
                stack[-1][1] = True
            continue
        words = len(line.split())
        total += words
        stack[-1][2] += words
    while len(stack) > 1:  # an unclosed fence runs to the end of the cell
        _, hidden, words = stack.pop()
        stack[-1][2] += 0 if hidden else words
    return stack[0][2], total


def main_line_words(notebook) -> tuple[int, int]:
    """(main-line words, all markdown words) of a chapter."""
    counts = [markdown_words(source(c)) for c in notebook["cells"] if c["cell_type"] == "markdown"]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_main_line_is_short_enough(path):
    main, _ = main_line_words(json.loads(path.read_text()))
    assert main <= MAIN_LINE_WORDS, f"{path.name}: {main} main-line words (at most {MAIN_LINE_WORDS})"


def test_main_line_words_leave_out_asides_and_code():
    text = "\n".join([
        "one two three",
        "```{dropdown} Aside title",
        "hidden hidden hidden",
        "```",
        ":::{admonition} Box title",
        ":class: dropdown",
        "hidden too",
        ":::",
        "::::{admonition} Shown box",
        "shown words",
        ":::{margin}",
        "in the margin",
        ":::",
        "::::",
        "```python",
        "x = 1  # code",
        "```",
        "last",
    ])
    # main: 3 + "Aside title" + "Box title" + "Shown box" + "shown words" + "last"
    assert markdown_words(text) == (3 + 2 + 2 + 2 + 2 + 1, 3 + 2 + 3 + 2 + 2 + 2 + 2 + 3 + 5 + 1)


# --- the checks themselves catch what they should ------------------------------------------

OPENING = "(label)=\n# 1. Title\n\nOne sentence. Two.\n\n```{glue:figure} key-figure\nCaption.\n```\n"
GLUED = {"output_type": "display_data", "data": {"image/png": ""},
         "metadata": {"scrapbook": {"name": KEY_FIGURE, "mime_prefix": ""}}}


def make_notebook(*sources, counts=None, outputs=None):
    counts = counts or list(range(1, len(sources) + 1))
    outputs = outputs or [[] for _ in sources]
    cells = [{"cell_type": "code", "source": s, "execution_count": c, "outputs": o, "metadata": {}}
             for s, c, o in zip(sources, counts, outputs)]
    if cells:
        cells[0]["metadata"]["tags"] = [SETUP_TAG, _SETUP_TOOL.OUTPUT_TAG, "nbval-ignore-output"]
        cells[0]["metadata"]["cellView"] = _SETUP_TOOL.CELL_VIEW
        cells[0]["metadata"]["nbval_reason"] = _SETUP_TOOL.NBVAL_REASON
    return {"cells": [{"cell_type": "markdown", "source": OPENING, "metadata": {}}, *cells],
            "metadata": {}}


def stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_checks_accept_a_good_notebook():
    good = make_notebook(SETUP_CELL, "x = 1\n", "print(time.time())",
                         outputs=[[], [GLUED], [stream("1.5\n" + "x" * MAX_LINE)]])
    good["cells"][-1]["metadata"] = {"tags": ["nbval-ignore-output"],
                                     "nbval_reason": "timings differ between runs"}
    assert all(check(good) == [] for check in CHECKS)


def test_setup_cell_check_catches_a_cell_without_its_form_view_or_tags():
    notebook = make_notebook(SETUP_CELL)
    del notebook["cells"][1]["metadata"]["cellView"]
    assert setup_cell_problems(notebook)
    notebook = make_notebook(SETUP_CELL)
    notebook["cells"][1]["metadata"]["tags"].remove(_SETUP_TOOL.OUTPUT_TAG)
    assert setup_cell_problems(notebook)


def test_setup_cell_check_catches_an_edited_cell():
    assert setup_cell_problems(make_notebook(SETUP_CELL + "\nprint('extra')"))
    assert setup_cell_problems(make_notebook("import numpy"))
    compared = make_notebook(SETUP_CELL)
    compared["cells"][1]["metadata"]["tags"].remove("nbval-ignore-output")
    assert setup_cell_problems(compared) == ["the setup cell lacks its tags or Colab's form view "
                                             "(run `python tools/setup_cell.py` on it)"]
    assert setup_cell_problems({"cells": []})


def test_execution_check_catches_unexecuted_and_out_of_order_cells():
    assert execution_problems(make_notebook("a = 1", "b = 2", counts=[1, None]))
    assert execution_problems(make_notebook("a = 1", "b = 2", counts=[2, 1]))
    assert execution_problems(make_notebook("a = 1", "b = 2", counts=[1, 3]))


def test_error_check_catches_stored_tracebacks():
    error = {"output_type": "error", "ename": "ValueError", "evalue": "boom", "traceback": []}
    assert error_problems(make_notebook("raise ValueError('boom')", outputs=[[error]]))


@pytest.mark.parametrize("cell", ["# NBVAL_IGNORE_OUTPUT\nprint(1)", "x = 1  # NBVAL_SKIP"])
def test_marker_check_catches_comment_markers(cell):
    assert marker_problems(make_notebook(cell))


@pytest.mark.parametrize("metadata", [{"tags": ["nbval-skip"]},
                                      {"tags": ["nbval-ignore-output"], "nbval_reason": "time"}])
def test_marker_check_catches_tags_without_a_reason(metadata):
    notebook = make_notebook("print(1)")
    notebook["cells"][-1]["metadata"] = metadata
    assert marker_problems(notebook)


def test_line_length_check_catches_long_code_and_printed_lines():
    long = "y" * (MAX_LINE + 1)
    assert line_length_problems(make_notebook(f"x = '{long}'"))
    # (not in the first cell: the setup cell's output is hidden from the website)
    assert line_length_problems(make_notebook("pass", "print(s)",
                                              outputs=[[], [stream("ok\n" + long)]]))
    result = {"output_type": "execute_result", "data": {"text/plain": long}, "metadata": {}}
    assert line_length_problems(make_notebook("pass", "s", outputs=[[], [result]]))
    hidden = make_notebook(f"x = '{long}'")
    hidden["cells"][-1]["metadata"]["tags"] = ["remove-input"]
    assert not line_length_problems(hidden)
    # Package source shown by show_source: the reader sees its text, highlighted (text/html).
    listing = {"output_type": "execute_result", "metadata": {},
               "data": {"text/plain": f"def f():\n    {long}", "text/html": "<div>…</div>"}}
    assert line_length_problems(make_notebook("pass", "show_source(f)", outputs=[[], [listing]]))
    assert not line_length_problems(make_notebook("pass", "fig", outputs=[[], [listing]]))  # HTML


def test_widget_state_check_catches_stored_state():
    notebook = make_notebook("x = 1")
    notebook["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}
    assert widget_state_problems(notebook)


def png_output(width, height=300):
    """An image/png output whose header says ``width`` x ``height`` (the checks read no more)."""
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)
    return {"output_type": "display_data", "metadata": {},
            "data": {"image/png": base64.b64encode(header).decode(), "text/plain": "<Figure>"}}


def test_figure_check_catches_wide_figures_and_small_fonts():
    # PAGE_WIDTH at FIGURE_DPI (600 px), and a crop a little wider, are fine
    assert not figure_problems(make_notebook("a", "b", outputs=[[png_output(600)], [png_output(620)]]))
    # a figure so wide that 11 pt text falls under 9 px at 368 px (11 * 100/72 * 368/700 = 8.0)
    assert figure_problems(make_notebook("a", "b", outputs=[[png_output(600)], [png_output(700)]]))
    # 12 pt text is fine at 600 px (10.2 px); 10 pt is not (8.5 px), nor is 12 pt in 700 px
    assert not figure_problems(make_notebook("a", "ax.legend(fontsize=12)", outputs=[[], [png_output(600)]]))
    assert figure_problems(make_notebook("a", "ax.legend(fontsize=10)", outputs=[[], [png_output(600)]]))
    assert figure_problems(make_notebook("a", "ax.set_title('t', fontsize=12)", outputs=[[], [png_output(700)]]))


def test_opening_needs_two_sentences_and_the_glued_figure():
    def notebook(first, glued=KEY_FIGURE):
        output = {"output_type": "display_data", "data": {"image/png": ""},
                  "metadata": {"scrapbook": {"name": glued, "mime_prefix": ""}}}
        return {"cells": [{"cell_type": "markdown", "source": first},
                          {"cell_type": "code", "source": "", "outputs": [output]}]}

    good = "(label)=\n# 1. Title\n\nOne thing. And $x = 1.5$ another.\n\n```{glue:figure} key-figure\nCaption.\n```\n"
    assert opening_problems(notebook(good)) == []
    three = good.replace("another.", "another. A third.")
    assert "3 sentences" in opening_problems(notebook(three))[0]
    assert "glued as" in opening_problems(notebook(good, glued="other"))[0]
    assert "no key figure" in opening_problems(notebook("(label)=\n# 1. Title\n\nText.\n"))[0]


def test_api_links_cover_every_imported_library_name():
    def notebook(code, prose):
        return {"cells": [{"cell_type": "code", "source": "setup", "outputs": []},
                          {"cell_type": "code", "source": code, "outputs": []},
                          {"cell_type": "markdown", "source": prose}]}

    code = ("from annotated_ssm import hippo\nfrom annotated_ssm.book import plotting\n"
            "from annotated_ssm.kernels import (\n    cauchy,  # the kernel\n    naive_kernel,\n)\n")
    linked = "{func}`~annotated_ssm.hippo.legs`, {func}`annotated_ssm.kernels.cauchy` and " \
             "{func}`~annotated_ssm.kernels.naive_kernel`"
    assert api_link_problems(notebook(code, linked)) == []
    problem = api_link_problems(notebook(code, linked.replace("cauchy", "other")))
    assert problem and "annotated_ssm.kernels.cauchy" in problem[0]
    assert api_link_problems(notebook(code, "")) and "annotated_ssm.hippo" in api_link_problems(
        notebook(code, ""))[0]
