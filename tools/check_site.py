"""Open every page of the built website in headless Chromium, offline, and report problems.

Serves _build/html on localhost, opens each page in Chromium (the system's, driven by
Python's playwright; tools/browser.py) with every request that leaves localhost blocked, on
a 1280 px desktop and on a 400 px touch-screen phone, and prints per page:

- console errors and uncaught exceptions, blocked requests (MathJax is checked by
  tools/check_math.py, on the chapters' sources, in `make test`);
- code or output blocks with lines over 100 characters, and any that scroll sideways at
  1280 px or at 1920 px (the article leaves room for 100 characters at desktop widths:
  tools/sphinx_ext/static/site_layout.css);
- horizontal overflow: the article wider than its box; anything cut off, at either width
  (an equation, table, code block, image or output wider than the screen or than a box that
  clips it, and not inside a box of its own that scrolls sideways);
- the buttons: on the phone, tapping ☰ must open the site's navigation (shown, whole, on
  screen) and tapping Contents the page's table of contents, where the page has one; on the
  desktop, ☰ must hide the navigation column and Contents, where the table of contents is
  behind it, open it.

- the page's table of contents on screen, without pressing anything, at 1280 and 1440 px
  (where the page has one; tools/sphinx_ext/static/site_layout.css);
- on the phone: every figure's smallest label estimated in CSS px (the book's smallest
  figure font, FIGURE_MIN_PT at FIGURE_DPI, from annotated_ssm.book.plotting, times
  shown/drawn width) at least MIN_LABEL_PX, explorer frames included; a figure that opens
  larger when tapped must open at its drawn size (checked on the first one: the opened
  figure's width); headings sized for phones; wide display equations with a scroll cue;
  explorer controls at least MIN_TARGET px high; the smallest label is reported;
- weight: the bytes a page downloads before the reader scrolls (every response until the
  network is idle after typesetting, on the desktop and on the phone), at most MAX_WEIGHT
  (tools/sphinx_ext/site_weight.py: explorer frames as files, lazy images, no icon script);
  the heaviest page is reported;
- the first screen of each chapter: its key figure (the article's first image) shows at
  least FIRST_SCREEN_PX of itself before the reader scrolls, at 1280 px and on the phone;
- navigation: at 1280 and 1440 px, a link to every chapter (the header's compact list or the
  navigation column) and a search box on screen without a click; on the phone a 🔍 button
  (tools/sphinx_ext/templates/book-header-nav.html);
- search: for each of SEARCH_WORDS and SEARCH_TEACHES, search.html lists results, every
  excerpt shown holds a word of the query (the sentence it was found in, not the top of the
  page) and no TeX source, and the search loads each result's text (NAME.search.js), never a
  whole page (tools/sphinx_ext/search_excerpts.py); for each word the book teaches, its page
  comes first and no API entry the query does not name comes before a page of the book; the
  search page opened as a file (file://) shows excerpts without console errors; no search
  field's magnifier covers the query's text (every page, desktop and phone);
- the API reference's landing page: six groups of modules with one-line summaries and an
  index of classes; on the phone no summary table wraps a name over several lines;
- on the phone, no code or output block scrolls sideways (they wrap).

A page that only redirects (Jupyter Book's index.html) is not opened: the page it leads to
is checked, and a redirect to a page that does not exist is a problem.

    make book && python tools/check_site.py                  # exit 1 if any page has a problem
    python tools/check_site.py --shots /tmp/shots            # also screenshots: each page at
                                                             # 400 px with ☰ and Contents opened,
                                                             # the S4 chapter's headings, each
                                                             # chapter's first figure at 400 px
Needs Chromium (Debian: apt-get install chromium; or --chromium PATH). The checks that run
inside each page are in tools/check_site.js.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import time

from playwright.sync_api import Browser, Page

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from browser import CHROMIUM, chromium, offline, serve  # noqa: E402  (tools/ is not a package)

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from annotated_ssm.book import plotting  # noqa: E402  (the book's figure rule)

# The checks that run inside each page (globals: inspect, scrollingBlocks, cutOff, onScreen).
IN_PAGE = (pathlib.Path(__file__).resolve().parent / "check_site.js").read_text()
MAX_CODE_LINE = 100
MAX_WEIGHT = 2_500_000  # bytes, uncompressed, downloaded before the reader scrolls
FIGURE_MIN_PT = plotting.MIN_FONT_PT  # the smallest font of the book's figures
FIGURE_DPI = plotting.FIGURE_DPI  # their resolution (px per inch of the drawn PNG)
MIN_LABEL_PX = plotting.MIN_TEXT_PX  # CSS px, on the phone, without tapping
MIN_TARGET = 32  # CSS px: a control's height on a phone
TOC_WIDTHS = (1280, 1440)
CHAPTER = re.compile(r"book/\d\d_")  # the chapters' pages, which open with their key figure
FIRST_SCREEN_PX = 100  # CSS px of the key figure on the first screen, at least
WIDE = 1920  # a wide desktop, measured besides 1280 px
SEARCH_WORDS = ("Woodbury", "Vandermonde", "selective copying", "kernel")
# Words the book teaches, and the page that must come first for each (one of them): a
# chapter or the package page, above any API entry whose name is not the query.
SEARCH_TEACHES = {
    "HiPPO": ("book/02_hippo",), "bilinear": ("book/03_discretization",),
    "Cauchy": ("book/04_s4",), "Woodbury": ("book/04_s4",), "parallel scan": ("book/07_s5",),
    "selective": ("book/09_selective",), "train on GPU": ("book/package", "book/08_training"),
    "resume": ("book/package", "book/08_training"),
}
API_PAGES = ("book/reference", "genindex", "py-modindex")  # the landing page and its modules
# TeX source in an excerpt: a command of the book's formulas (\mathbf, \Delta, …) or $…$.
TEX = re.compile(r"\\(?:math[a-z]+|boldsymbol|frac|tfrac|sqrt|bar|overline|tilde|hat|left|"
                 r"right|cdot|times|sum|prod|top|ell|[A-Za-z]*(?:alpha|beta|gamma|delta|"
                 r"lambda|mu|theta|sigma|omega|Delta|Lambda|Sigma|Omega))\b|\$[^$\s][^$]*\$")
PRIMARY = ".bd-sidebar-primary"
SECONDARY = ".bd-sidebar-secondary"


def pages(site: pathlib.Path) -> list[str]:
    """Every HTML page a reader can reach, relative to the site's root.

    Skips assets and hidden folders (pages a stale build may have left from sources now
    excluded, such as .node/).
    """
    skip = ("_static", "_sources", "_images")
    relative = [p.relative_to(site) for p in site.rglob("*.html")]
    return sorted(str(p) for p in relative
                  if p.parts[0] not in skip and not any(part.startswith(".") for part in p.parts))


REFRESH = re.compile(r'\s*<meta http-equiv="refresh" content="\d+;\s*url=([^"]+)"\s*/?>\s*',
                     re.IGNORECASE)


def redirect(site: pathlib.Path, page: str) -> str | None:
    """Where ``page`` sends the reader if it is only a redirect (Jupyter Book's index.html),
    relative to the site's root; None for a real page."""
    match = REFRESH.fullmatch((site / page).read_text(encoding="utf-8", errors="replace"))
    if not match:
        return None
    return (pathlib.PurePosixPath(page).parent / match.group(1)).as_posix()


def problems(report: dict) -> list[str]:
    """One line per problem in a page's report (empty: the page is clean)."""
    lines = [f"console error: {text}" for text in report["console"]]
    lines += [f"exception: {text}" for text in report["exceptions"]]
    lines += [f"blocked request (offline): {url}" for url in report["blocked"]]
    if report["overflow"]:
        lines.append(f"horizontal overflow: {report['overflow']}")
    if report["weight"] > MAX_WEIGHT:
        lines.append(f"downloads {report['weight'] / 1e6:.2f} MB before scrolling "
                     f"(at most {MAX_WEIGHT / 1e6:.1f} MB)")
    lines += [f"1280 px: {text}" for text in report["wideCode"] + report["scrolling"]]
    lines += [f"1920 px: {text}" for text in report["scrollingWide"]]
    lines += [f"1280 px: {text}" for text in report["cutDesktop"] + report["togglesDesktop"]]
    lines += [f"400 px: {text}" for text in report["cutPhone"] + report["togglesPhone"]]
    lines += [f"400 px: {text}" for text in report.get("phone", [])]
    lines += [f"{width} px: the page's table of contents is not on screen"
              for width in report.get("tocHidden", [])]
    lines += [f"{width} px: {text}" for width, text in report.get("navigation", [])]
    lines += [f"{width} px: {text}" for width, text in report.get("searchIcon", [])]
    lines += [f"400 px: {text}" for text in report.get("scrollingPhone", [])]
    lines += [f"400 px: {text}" for text in report.get("wrappedNames", [])]
    lines += [f"{width} px: {text}" for width, text in report.get("firstScreen", [])]
    return lines


def summary(report: dict) -> str:
    """What was measured on a page, problems or not."""
    smallest = report.get("smallestLabel")
    label = "" if smallest is None else f"smallest figure label at 400 px ~{smallest:.1f} px; "
    return (f"{report['weight'] / 1e6:.2f} MB before scrolling; {label}"
            f"1280 px: {len(report['scrolling'])} of {report['blocks']} "
            f"code/output blocks scroll sideways (1920 px: {len(report['scrollingWide'])}), "
            f"{len(report['cutDesktop'])} cut off, "
            f"{len(report['togglesDesktop'])} button failures; 400 px: "
            f"{len(report['cutPhone'])} cut off, {len(report['togglesPhone'])} button failures")


def slug(name: str) -> str:
    """A page's name as part of a file name."""
    return re.sub(r"\W+", "_", name)


def shown_button(page: Page, selector: str):
    """The first shown button matching ``selector`` (the themes also render hidden copies)."""
    buttons = page.locator(selector)
    return next((buttons.nth(i) for i in range(buttons.count()) if buttons.nth(i).is_visible()),
                None)


def on_screen(page: Page, selector: str) -> bool:
    return page.evaluate("selector => onScreen(selector)", selector)


def becomes(page: Page, selector: str, want: bool) -> bool:
    """Waits until ``on_screen(selector)`` says ``want``; False if not within 3 s."""
    deadline = time.monotonic() + 3
    while True:
        if on_screen(page, selector) == want:
            return True
        if time.monotonic() > deadline:
            return False
        page.wait_for_timeout(50)


def toggles(page: Page, phone: bool, shot) -> list[str]:
    """Presses ☰ and Contents (taps them on a phone) and says what did not work.

    On a phone ☰ must open the navigation drawer and Contents the page's table of contents;
    on a desktop ☰ hides the navigation column (and shows it again), and Contents, where the
    page shows the button instead of the table of contents, opens it. ``shot(name)``
    screenshots each opened drawer.
    """
    found = []

    def press(button):
        button.tap() if phone else button.click()

    def close(selector, button, shown_before: bool) -> bool:
        # A drawer is a modal dialog (Escape closes it); the desktop column toggles back to
        # how it was (shown, or behind ☰ between 1200 and 1600 px: site_layout.css).
        if page.locator(f"dialog{selector}[open]").count():
            page.keyboard.press("Escape")
        else:
            press(button)
        return becomes(page, selector, shown_before)

    menu = shown_button(page, ".primary-toggle")
    if menu is None:
        found.append("no ☰ button to show the site's navigation")
    else:
        before = on_screen(page, PRIMARY)
        if phone and before:
            found.append("the navigation is open before ☰ is tapped")
        press(menu)
        if not becomes(page, PRIMARY, not before):
            found.append("tapping ☰ does not open the site's navigation" if phone else
                         f"clicking ☰ does not {'hide' if before else 'show'} the site's navigation")
        else:
            if phone:
                shot("menu")
            if not close(PRIMARY, menu, before):
                found.append("the navigation does not close again")

    # The page's table of contents, where the page has one.
    if page.locator(f"{SECONDARY} nav a, {SECONDARY} .page-toc a").count():
        contents = shown_button(page, ".secondary-toggle")
        if contents is not None:
            press(contents)
            if not becomes(page, SECONDARY, True):
                found.append(f"{'tapping' if phone else 'clicking'} Contents does not open the "
                             "page's table of contents")
            else:
                if phone:
                    shot("contents")
                if page.locator(f"dialog{SECONDARY}[open]").count():
                    page.keyboard.press("Escape")
                    if not becomes(page, SECONDARY, False):
                        found.append("Contents does not close again")
        elif not on_screen(page, SECONDARY):
            found.append("the page's table of contents is neither shown nor behind a Contents "
                         "button")
    return found


def wait_for_math(page: Page) -> None:
    """Until MathJax has typeset the page. A page with math has MathJax's configuration object
    before the script itself has loaded (no startup yet): wait for the script whenever the
    page holds math."""
    page.wait_for_function("""() => {
        const mj = window.MathJax;
        if (mj && mj.startup && mj.startup.promise) return true;
        return !document.querySelector(".math, mjx-container") && !mj;
    }""", timeout=20000)
    page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")


def open_page(browser: Browser, base: str, url: str, width: int) -> tuple[Page, dict]:
    """``url`` on a phone (under 600 px: touch screen) or a desktop, typeset; the page and its
    report so far (console errors, exceptions, blocked requests)."""
    phone = width < 600
    context = browser.new_context(
        viewport={"width": width, "height": 800 if phone else 900},
        **({"is_mobile": True, "has_touch": True} if phone else {}))
    context.add_init_script(script=IN_PAGE)
    report = {"console": [], "exceptions": [], "blocked": [], "weight": 0}
    offline(context, base, report["blocked"])
    page = context.new_page()
    sizes: dict[str, int] = {}
    page.on("requestfinished",
            lambda request: sizes.__setitem__(request.url, request.sizes()["responseBodySize"]))
    page.on("console", lambda message: message.type == "error"
            and report["console"].append(message.text[:200]))
    page.on("pageerror", lambda error: report["exceptions"].append(str(error)[:200]))
    page.goto(url, wait_until="load")
    wait_for_math(page)
    # What typesetting and the first screen's lazy images still fetch.
    page.wait_for_load_state("networkidle")
    report["weight"] = sum(sizes.values())
    return page, report


def read_on_phone(page: Page) -> dict:
    """What check_site.js's phoneChecks finds, after every figure has loaded; and a tap on
    the first figure that opens larger must show it at its drawn width."""
    page.evaluate("""async () => {
        for (const img of document.querySelectorAll("article img")) {
            img.loading = "eager";
            if (!img.complete) await new Promise(done => { img.onload = img.onerror = done; });
        }
        await new Promise(done => requestAnimationFrame(() => setTimeout(done, 50)));
    }""")
    found = page.evaluate("args => phoneChecks(...args)",
                          [FIGURE_MIN_PT, FIGURE_DPI, MIN_LABEL_PX, MIN_TARGET])
    zoomable = page.locator("article img.zoomable")
    if zoomable.count():
        first = zoomable.first
        first.scroll_into_view_if_needed()
        drawn = first.evaluate("img => img.naturalWidth")
        first.tap()
        opened = page.locator(".figure-zoom img")
        if not opened.count():
            found["problems"].append("tapping a shrunk figure does not open it")
        else:
            shown = opened.first.evaluate("img => img.getBoundingClientRect().width")
            if abs(shown - drawn) > 1:
                found["problems"].append(f"a tapped figure opens {shown:.0f} px wide, "
                                         f"not at its drawn {drawn} px")
            page.locator(".figure-zoom").first.tap()
            if page.locator(".figure-zoom").count():
                found["problems"].append("a tap does not close the opened figure")
    return found


def key_figure_shown(page: Page) -> str | None:
    """None if the article's first image shows FIRST_SCREEN_PX of itself on the first screen
    (nothing scrolled); else what is wrong."""
    top = page.evaluate("""() => {
        const img = document.querySelector("article img");
        return img ? img.getBoundingClientRect().top : null;
    }""")
    if top is None:
        return "the chapter shows no figure"
    height = page.viewport_size["height"]
    if top > height - FIRST_SCREEN_PX:
        return (f"the key figure starts {top:.0f} px down, below the first screen "
                f"({height} px high; at least {FIRST_SCREEN_PX} px of it must show)")
    return None


def check_page(browser: Browser, base: str, name: str, shots: pathlib.Path | None) -> dict:
    """One page's report: at 1280 px (and 1920 px), then on a 400 px phone."""
    page, report = open_page(browser, base, base + name, 1280)
    report["firstScreen"] = []
    if CHAPTER.match(name) and (problem := key_figure_shown(page)):
        report["firstScreen"].append((1280, problem))
    report.update(page.evaluate("max => inspect(max)", MAX_CODE_LINE), page=name)
    report["scrolling"] = page.evaluate("() => scrollingBlocks()")
    report["cutDesktop"] = page.evaluate("() => cutOff()")
    report["tocHidden"], report["navigation"], report["searchIcon"] = [], [], []
    has_toc = page.locator(f"{SECONDARY} nav a, {SECONDARY} .page-toc a").count()
    for width in TOC_WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(100)
        if has_toc and not on_screen(page, SECONDARY):
            report["tocHidden"].append(width)
        # The chapters and a search box, on screen without a click (book-header-nav.html).
        report["navigation"] += [(width, text)
                                 for text in page.evaluate("() => navigationOnScreen()")]
        report["searchIcon"] += [(width, text)
                                 for text in page.evaluate("() => searchIconCovers()")]
    page.set_viewport_size({"width": 1280, "height": 900})
    page.wait_for_timeout(100)
    report["togglesDesktop"] = toggles(page, False, lambda what: None)
    # A wide screen, where the page's table of contents has a column of its own.
    page.set_viewport_size({"width": WIDE, "height": 900})
    page.wait_for_timeout(100)
    report["scrollingWide"] = page.evaluate("() => scrollingBlocks()")
    page.context.close()
    # The same page on a phone: console errors and exceptions there count too.
    phone, phone_report = open_page(browser, base, base + name, 400)
    if CHAPTER.match(name) and (problem := key_figure_shown(phone)):
        report["firstScreen"].append((400, problem))
    report["cutPhone"] = phone.evaluate("() => cutOff()")
    # Code and output wrap on a phone; the API reference's names stay on one line.
    report["scrollingPhone"] = phone.evaluate("() => scrollingBlocks()")
    report["wrappedNames"] = phone.evaluate("() => wrappedNames()")
    report["searchIcon"] += [(400, text) for text in phone.evaluate("() => searchIconCovers()")]
    if shown_button(phone, ".search-button") is None and \
            phone.locator(".bd-sidebar-primary").count():
        report["phone"] = ["no 🔍 search button"]
    readable = read_on_phone(phone)
    report["phone"] = report.get("phone", []) + readable["problems"]
    report["smallestLabel"] = readable["smallest"]

    def shot(what):
        if shots:
            phone.screenshot(path=shots / f"{what}_{slug(name)}_400.png")

    report["togglesPhone"] = toggles(phone, True, shot)
    for key in ("console", "exceptions", "blocked"):
        report[key] += [item for item in phone_report[key] if item not in report[key]]
    report["weight"] = max(report["weight"], phone_report["weight"])
    phone.context.close()
    return report


def screenshots(browser: Browser, base: str, headings_page: str, chapters: list[str],
                shots: pathlib.Path) -> None:
    """The S4 chapter's headings at desktop width (the page's table of contents, opened with
    the Contents button where the page keeps it behind one), and the first figure of each
    chapter on a 400 px phone."""
    page, _ = open_page(browser, base, base + headings_page, 1280)
    contents = shown_button(page, ".secondary-toggle")
    if contents is not None:
        contents.click()
        becomes(page, SECONDARY, True)
    toc = page.locator(SECONDARY).filter(visible=True).first
    target = page if not toc.count() else toc
    target.screenshot(path=shots / "s4_headings_1280.png")
    page.context.close()
    for name in chapters:
        page, _ = open_page(browser, base, base + name, 400)
        figure = page.locator("article .cell_output img").first
        if figure.count():
            figure.scroll_into_view_if_needed()
            # A lazy image has no width until it has loaded: measure it after.
            page.wait_for_function("img => img.complete && img.naturalWidth > 0",
                                   arg=figure.element_handle())
            box = figure.bounding_box()
            shot = shots / f"{slug(name)}_400.png"
            figure.screenshot(path=shot)
            natural = figure.evaluate("img => img.naturalWidth")
            print(f"{name}: first figure shown {round(box['width'])} px wide "
                  f"(drawn {natural} px) -> {shot}")
        page.context.close()


def check_search(browser: Browser, base: str, query: str) -> tuple[str, list[str]]:
    """Searches for ``query``; what was found and downloaded, and the problems."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    blocked: list[str] = []
    offline(context, base, blocked)
    page = context.new_page()
    fetched: dict[str, int] = {}
    page.on("requestfinished",
            lambda request: fetched.__setitem__(request.url.split("?")[0],
                                                request.sizes()["responseBodySize"]))
    page.goto(base + "search.html?q=" + query.replace(" ", "+"), wait_until="load")
    page.wait_for_function("""() => {
        const status = document.querySelector("p.search-summary");
        return status && /found|did not match/.test(status.innerText);
    }""", timeout=60000)
    # The excerpts arrive one result after another: until every result without a
    # description (an object's entry has one instead) has its excerpt.
    page.wait_for_function("""() => [...document.querySelectorAll("ul.search li")]
        .every(item => item.querySelector("p.context, span"))""", timeout=60000)
    results = page.eval_on_selector_all("ul.search li", """items => items.map(item => [
        item.querySelector("a").innerText,
        (item.querySelector("p.context") || {}).innerText || null,
        item.querySelector("a").getAttribute("href")])""")
    context.close()
    found = [f"blocked request (offline): {url}" for url in blocked]
    found += search_problems(query, results)
    pages_fetched = [url for url in fetched if url.endswith(".html")
                     and not url.endswith("/search.html")]
    found += [f"fetched a whole page for an excerpt: {url}" for url in pages_fetched]
    texts = sum(size for url, size in fetched.items() if url.endswith(".search.js"))
    return (f"{len(results)} results, {sum(fetched.values()) / 1e6:.2f} MB downloaded "
            f"({texts / 1e6:.2f} MB of it the results' text)"), found


def search_problems(query: str, results: list) -> list[str]:
    """What is wrong with the results of ``query``, each [title, excerpt or None, href]:
    none; an excerpt without a word of the query, or with TeX source; for a word the book
    teaches (SEARCH_TEACHES), another page first, or an API entry not named by the query
    above a page of the book."""
    # A word as typed or by its start, as the search stems it ("selective" finds "selection").
    words = [w[:max(4, len(w) - 3)] for w in query.lower().split() if len(w) > 2]
    found = [] if results else ["no results"]
    for title, excerpt, _ in results:
        if excerpt is not None and not any(word in excerpt.lower() for word in words):
            found.append(f"the excerpt under {title!r} does not show the query: {excerpt[:80]!r}")
        if excerpt is not None and TEX.search(excerpt):
            found.append(f"the excerpt under {title!r} shows TeX source: "
                         f"{TEX.search(excerpt).group(0)!r}")
    pages = [href.split("#")[0].removesuffix(".html") for _, _, href in results]
    if query in SEARCH_TEACHES and results:
        if pages[0] not in SEARCH_TEACHES[query]:
            found.append(f"the first result is {pages[0]}, not {' or '.join(SEARCH_TEACHES[query])}")
        book = [k for k, page in enumerate(pages) if not page.startswith(API_PAGES)]
        for k, page in enumerate(pages):
            name = results[k][0].split(".")[-1].strip().lower()
            named = name in (query.lower(), query.lower().replace(" ", "_"))
            if page.startswith(API_PAGES) and not named and book and k < book[-1]:
                found.append(f"the API entry {results[k][0]!r} comes before a page of the book")
                break
    return found


def check_search_file(browser: Browser, site: pathlib.Path, query: str) -> list[str]:
    """The search page opened as a file (file://, as the README's first link): results with
    excerpts and no console errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto((site / "search.html").resolve().as_uri() + "?q=" + query.replace(" ", "+"))
    page.wait_for_function("""() => {
        const status = document.querySelector("p.search-summary");
        return status && /found|did not match/.test(status.innerText);
    }""", timeout=60000)
    try:
        page.wait_for_function("""() => [...document.querySelectorAll("ul.search li")]
            .every(item => item.querySelector("p.context, span"))""", timeout=15000)
    except Exception:  # noqa: BLE001  (playwright's timeout: reported below)
        pass
    results = page.eval_on_selector_all("ul.search li", """items => items.map(item =>
        (item.querySelector("p.context") || {}).innerText || null)""")
    context.close()
    found = [f"console error: {text[:150]}" for text in errors]
    if not results:
        found.append("no results")
    elif not all(results):
        found.append(f"{results.count(None)} of {len(results)} results without an excerpt")
    return found


def api_landing(browser: Browser, base: str, name: str) -> list[str]:
    """The API reference's landing page: at least six groups of modules, each a table of
    modules with a one-line summary, and an index of classes."""
    page, _ = open_page(browser, base, base + name, 1280)
    tables = page.evaluate("""() => [...document.querySelectorAll("article section")]
        .map(section => [section.querySelector("h2") ? section.querySelector("h2").innerText : "",
                         [...section.querySelectorAll(":scope > div table.autosummary tr, "
                           + ":scope > table.autosummary tr")]
                         .filter(tr => tr.cells.length > 1 && tr.cells[1].innerText.trim()).length])
        .filter(([title]) => title)""")
    page.context.close()
    groups = [title for title, rows in tables if rows and "class" not in title.lower()]
    classes = sum(rows for title, rows in tables if "class" in title.lower())
    found = []
    if len(groups) < 6:
        found.append(f"{len(groups)} groups of modules with summaries (at least 6): {groups}")
    if classes == 0:
        found.append("no index of classes")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=pathlib.Path, default=ROOT / "_build" / "html")
    parser.add_argument("--chromium", default=CHROMIUM)
    parser.add_argument("--shots", type=pathlib.Path, help="folder for screenshots")
    parser.add_argument("pages", nargs="*", help="pages to check (default: all)")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").exists():
        raise SystemExit(f"no website in {args.site}: run `make book` first")
    chosen, redirects = [], {}
    for page in args.pages or pages(args.site):
        target = redirect(args.site, page)
        if target is None:
            chosen.append(page)
        else:
            # A redirect has nothing to read: the page it leads to is checked instead.
            redirects[page] = target
            if (args.site / target).exists():
                chosen.append(target)
    chosen = list(dict.fromkeys(chosen))  # a page reached directly and by a redirect: once
    chapters = [page for page in chosen if CHAPTER.match(page)]  # book/01_ … book/10_
    bad = 0
    heaviest = (0, "")
    for page, target in redirects.items():
        missing = not (args.site / target).exists()
        bad += missing
        print(f"{page}: redirects to {target}" + (", which does not exist" if missing else ""))
    if args.shots:
        args.shots.mkdir(parents=True, exist_ok=True)
    with serve(args.site) as base, chromium(args.chromium) as browser:
        for page in chosen:
            report = check_page(browser, base, page, args.shots)
            heaviest = max(heaviest, (report["weight"], page))
            found = problems(report)
            bad += bool(found)
            print(f"{page}: {summary(report)}: "
                  + ("OK" if not found else f"{len(found)} problem(s)"), flush=True)
            for problem in found:
                print(f"    {problem}")
        if not args.pages and (args.site / "book" / "reference.html").exists():
            found = api_landing(browser, base, "book/reference.html")
            bad += bool(found)
            print("API reference landing: " + ("OK" if not found else
                                               f"{len(found)} problem(s)"), flush=True)
            for problem in found:
                print(f"    {problem}")
        if not args.pages and (args.site / "search.html").exists():
            found = check_search_file(browser, args.site, "Woodbury")
            bad += bool(found)
            print("search from file://: " + ("OK" if not found else f"{len(found)} problem(s)"),
                  flush=True)
            for problem in found:
                print(f"    {problem}")
            for query in dict.fromkeys([*SEARCH_WORDS, *SEARCH_TEACHES]):
                what, found = check_search(browser, base, query)
                bad += bool(found)
                print(f"search {query!r}: {what}: "
                      + ("OK" if not found else f"{len(found)} problem(s)"), flush=True)
                for problem in found:
                    print(f"    {problem}")
        if args.shots:
            headings = next((p for p in chapters if "s4.html" in p), chosen[0])
            screenshots(browser, base, headings, chapters, args.shots)
    print(f"heaviest page before scrolling: {heaviest[1]}, {heaviest[0] / 1e6:.2f} MB "
          f"(at most {MAX_WEIGHT / 1e6:.1f} MB)")
    print(f"{len(chosen) + len(redirects)} pages, {bad} with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
