"""tools/check_site.py finds what it promises to find, on a small page made to fail.

The page has a table wider than a phone outside any scroll box (cut off at 400 px), the
same table inside a box that scrolls (fine), a code block that scrolls sideways at 1280 px,
and no ☰ button. Needs Chromium and Python's playwright (requirements.txt); skipped
without Chromium.
"""

import importlib.util
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _check_site():
    spec = importlib.util.spec_from_file_location("check_site", ROOT / "tools" / "check_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGE = """<!doctype html>
<html><head><meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><main><article class="bd-article" style="padding: 0 16px">
<p>A page made to fail.</p>
<table id="bare" style="width: 800px"><tr><td>wide and cut off on a phone</td></tr></table>
<div style="overflow-x: auto">
<table style="width: 800px"><tr><td>wide, scrolls</td></tr></table></div>
<pre style="width: 300px; overflow: auto">{line}</pre>
</article></main></body></html>
"""


def test_problems_lists_each_width():
    report = {"console": [], "exceptions": [], "blocked": [], "overflow": None, "weight": 1e6,
              "wideCode": [], "scrolling": ["code block scrolls sideways"],
              "scrollingWide": [], "cutDesktop": [],
              "togglesDesktop": [], "cutPhone": ['table "x" cut off'],
              "togglesPhone": ["tapping ☰ does not open the site's navigation"]}
    assert _check_site().problems(report) == [
        "1280 px: code block scrolls sideways", '400 px: table "x" cut off',
        "400 px: tapping ☰ does not open the site's navigation"]


def test_a_heavy_page_is_a_problem():
    check_site = _check_site()
    report = {"console": [], "exceptions": [], "blocked": [], "overflow": None,
              "weight": check_site.MAX_WEIGHT + 1, "wideCode": [], "scrolling": [],
              "scrollingWide": [], "cutDesktop": [], "togglesDesktop": [], "cutPhone": [],
              "togglesPhone": []}
    assert check_site.problems(report) == ["downloads 2.50 MB before scrolling (at most 2.5 MB)"]
    report["weight"] = check_site.MAX_WEIGHT
    assert check_site.problems(report) == []


@pytest.mark.skipif(not pathlib.Path(CHROMIUM).exists(), reason="needs Chromium")
def test_a_broken_page_fails(tmp_path, capsys):
    pytest.importorskip("playwright")
    (tmp_path / "index.html").write_text(PAGE.format(line="x = 1  # " + "long " * 16),
                                         encoding="utf-8")
    assert _check_site().main(["--site", str(tmp_path), "--chromium", CHROMIUM]) == 1
    out = capsys.readouterr().out
    assert "1280 px: code block scrolls sideways" in out
    assert ('400 px: table "wide and cut off on a phone" (800 px wide) cut off by the screen\'s '
            "edge") in out
    assert "wide, scrolls" not in out
    assert "400 px: no ☰ button" in out
    assert "1 pages, 1 with problems" in out


CHAPTER_PAGE = """<!doctype html>
<html><head><meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><main><article class="bd-article"><h1>A chapter</h1>
<div style="height: {gap}px">two sentences</div>
<img alt="key figure" style="width: 300px; height: 200px; display: block">
</article></main></body></html>
"""


@pytest.mark.skipif(not pathlib.Path(CHROMIUM).exists(), reason="needs Chromium")
def test_a_chapter_whose_key_figure_is_below_the_first_screen_fails(tmp_path, capsys):
    pytest.importorskip("playwright")
    (tmp_path / "index.html").write_text(CHAPTER_PAGE.format(gap=0))
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "01_early.html").write_text(CHAPTER_PAGE.format(gap=200))
    (tmp_path / "book" / "02_late.html").write_text(CHAPTER_PAGE.format(gap=1200))
    _check_site().main(["--site", str(tmp_path), "--chromium", CHROMIUM])
    out = capsys.readouterr().out
    late = [line for line in out.splitlines() if "key figure starts" in line]
    assert any("1280 px" in line for line in late) and any("400 px" in line for line in late)
    assert "01_early" not in "".join(line for line in out.splitlines() if "key figure" in line)


# Issue 43's checks, each on a page made to fail and on the same page mended: the chapters
# and a search box on screen at 1280 and 1440 px, a search icon that covers the query, code
# that scrolls sideways on a phone, an API summary table that wraps a name letter by letter,
# the API reference's landing page without its groups.
NAV_PAGE = """<!doctype html>
<html><head><meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  .bad pre {{ white-space: pre; overflow-x: auto; }}
  .good pre {{ white-space: pre-wrap; overflow-wrap: anywhere; }}
  table.autosummary td:first-child {{ width: 40px; }}
  .bad table.autosummary code {{ word-break: break-all; }}
  .good table.autosummary td:first-child {{ width: auto; white-space: nowrap; }}
  form {{ position: relative; display: flex; align-items: center; width: 220px; }}
  .bad form i {{ position: absolute; left: 6px; }}
  .bad input {{ padding-left: 4px; }}
</style></head>
<body class="{kind}">
<nav><a href="book/01_first.html">1</a> <a href="book/02_second.html" style="{hide}">2</a></nav>
{search}
<main><article class="bd-article" style="padding: 0 16px">
<pre>x = 1  # {long}</pre>
<table class="autosummary"><tr><td><code>DiagonalSystem</code></td><td>A system.</td></tr></table>
</article></main></body></html>
"""
SEARCH_FIELD = '<form><i class="fa-magnifying-glass">Q</i><input type="search" name="q" value="Woodbury"></form>'
REFERENCE_PAGE = """<!doctype html><html><body>
<nav><a href="01_first.html">1</a> <a href="02_second.html">2</a></nav>""" + SEARCH_FIELD + """
<main><article class="bd-article">
<h1>API reference</h1>{sections}</article></main></body></html>"""
SECTION = """<section><h2>{title}</h2><table class="autosummary">
<tr><td><a>annotated_ssm.{title}</a></td><td>What {title} is for.</td></tr></table></section>"""


def _nav_site(folder, broken):
    (folder / "book").mkdir(parents=True)
    page = NAV_PAGE.format(kind="bad" if broken else "good", long="long " * 20,
                           hide="display: none" if broken else "",
                           search="" if broken else SEARCH_FIELD)
    (folder / "index.html").write_text(page, encoding="utf-8")
    (folder / "search_field.html").write_text(
        NAV_PAGE.format(kind="bad" if broken else "good", long="", hide="",
                        search=SEARCH_FIELD), encoding="utf-8")
    groups = ["layers", "numerics"] if broken else [
        "layers", "numerics", "models", "data", "checkpoints", "book", "Index of classes"]
    (folder / "book" / "reference.html").write_text(REFERENCE_PAGE.format(
        sections="".join(SECTION.format(title=title) for title in groups)), encoding="utf-8")


@pytest.mark.skipif(not pathlib.Path(CHROMIUM).exists(), reason="needs Chromium")
def test_navigation_search_icon_phone_code_and_api_checks_fail_where_planted(tmp_path, capsys):
    pytest.importorskip("playwright")
    check_site = _check_site()
    for broken in (True, False):
        site = tmp_path / ("broken" if broken else "mended")
        _nav_site(site, broken)
        check_site.main(["--site", str(site), "--chromium", CHROMIUM])
        out = capsys.readouterr().out
        planted = [
            "1280 px: the chapter list is not on screen without a click (1 of 2 chapters shown)",
            "1440 px: the chapter list is not on screen without a click (1 of 2 chapters shown)",
            "1280 px: no search box on screen without a click",
            "1440 px: no search box on screen without a click",
            "1280 px: the search icon",  # on search_field.html: the icon over the query
            "400 px: code block scrolls sideways",
            '400 px: the summary table wraps the name "DiagonalSystem"',
            "2 groups of modules with summaries (at least 6)",
        ]
        for line in planted:
            assert (line in out) == broken, (broken, line, out)
        if broken:
            assert "no index of classes" in out
        else:
            assert "API reference landing: OK" in out


def test_search_results_of_a_word_the_book_teaches_are_judged():
    check_site = _check_site()
    chapter = ["2. HiPPO", "HiPPO picks an SSM's matrices", "book/02_hippo.html"]
    module = ["annotated_ssm.hippo", None, "book/reference/annotated_ssm.hippo.html#module"]
    helper = ["annotated_ssm.book.plotting.skew_hippo_figure", None,
              "book/reference/annotated_ssm.book.plotting.html#skew"]
    assert check_site.search_problems("HiPPO", [chapter, module, helper]) == []
    assert check_site.search_problems("HiPPO", [helper, chapter]) == [
        "the first result is book/reference/annotated_ssm.book.plotting, not book/02_hippo",
        "the API entry 'annotated_ssm.book.plotting.skew_hippo_figure' comes before a page "
        "of the book"]
    tex = ["4. S4", r"the bilinear \mathbf{A} and the Woodbury identity", "book/04_s4.html"]
    assert check_site.search_problems("Woodbury", [tex]) == [
        r"the excerpt under '4. S4' shows TeX source: '\\mathbf'"]
    assert check_site.search_problems("Woodbury", []) == ["no results"]
