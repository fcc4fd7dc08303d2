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
