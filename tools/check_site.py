"""Open every page of the built website in headless Chromium, offline, and report problems.

Serves _build/html on localhost, opens each page in Chromium (driven by playwright-core
from .node/, installed by `make node`) with every request that leaves localhost blocked, on
a 1280 px desktop and on a 400 px touch-screen phone, and prints per page:

- MathJax errors (TeX that does not parse, macros nobody defined), console errors and
  uncaught exceptions, blocked requests;
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

A page that only redirects (Jupyter Book's index.html) is not opened: the page it leads to
is checked, and a redirect to a page that does not exist is a problem.

    make book && python tools/check_site.py                  # exit 1 if any page has a problem
    python tools/check_site.py --shots /tmp/shots            # also screenshots: each page at
                                                             # 400 px with ☰ and Contents opened,
                                                             # the S4 chapter's headings, each
                                                             # chapter's first figure at 400 px
Needs Chromium (Debian: apt-get install chromium; or --chromium PATH).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import threading

ROOT = pathlib.Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / ".node" / "node_modules"


def serve(folder: pathlib.Path) -> http.server.ThreadingHTTPServer:
    """A quiet static file server for ``folder`` on a free localhost port, in a thread."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


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
    lines = [f"MathJax error: {error}" for error in report["mathErrors"]]
    lines += [f"console error: {text}" for text in report["console"]]
    lines += [f"exception: {text}" for text in report["exceptions"]]
    lines += [f"blocked request (offline): {url}" for url in report["blocked"]]
    if report["overflow"]:
        lines.append(f"horizontal overflow: {report['overflow']}")
    lines += [f"1280 px: {text}" for text in report["wideCode"] + report["scrolling"]]
    lines += [f"1920 px: {text}" for text in report["scrollingWide"]]
    lines += [f"1280 px: {text}" for text in report["cutDesktop"] + report["togglesDesktop"]]
    lines += [f"400 px: {text}" for text in report["cutPhone"] + report["togglesPhone"]]
    return lines


def summary(report: dict) -> str:
    """What was measured on a page, problems or not."""
    return (f"{report['math']} math; 1280 px: {len(report['scrolling'])} of {report['blocks']} "
            f"code/output blocks scroll sideways (1920 px: {len(report['scrollingWide'])}), "
            f"{len(report['cutDesktop'])} cut off, "
            f"{len(report['togglesDesktop'])} button failures; 400 px: "
            f"{len(report['cutPhone'])} cut off, {len(report['togglesPhone'])} button failures")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=pathlib.Path, default=ROOT / "_build" / "html")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--shots", type=pathlib.Path, help="folder for screenshots")
    parser.add_argument("pages", nargs="*", help="pages to check (default: all)")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").exists():
        raise SystemExit(f"no website in {args.site}: run `make book` first")
    if not (NODE_MODULES / "playwright-core").is_dir():
        raise SystemExit("playwright-core is missing: run `make node`")
    server = serve(args.site)
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
    chapters = [page for page in chosen if page.startswith("book/0")]
    config = {
        "base": f"http://127.0.0.1:{server.server_port}/",
        "pages": chosen,
        "chromium": args.chromium,
        "shots": str(args.shots) if args.shots else None,
        "headings_page": next((p for p in chapters if "s4.html" in p), chosen[0]),
        "figure_pages": chapters,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(config, file)
    try:
        run = subprocess.run(["node", str(ROOT / "tools" / "check_site.js"), file.name],
                             capture_output=True, text=True,
                             env={**os.environ, "NODE_PATH": str(NODE_MODULES)})
    finally:
        os.unlink(file.name)
        server.shutdown()
    if run.returncode != 0:
        raise SystemExit(f"the browser run failed:\n{run.stderr}")
    bad = 0
    for page, target in redirects.items():
        missing = not (args.site / target).exists()
        bad += missing
        print(f"{page}: redirects to {target}" + (", which does not exist" if missing else ""))
    for line in run.stdout.splitlines():
        report = json.loads(line)
        if "figure" in report:
            print(f"{report['figure']}: first figure shown {report['width']} px wide "
                  f"(drawn {report['natural']} px) -> {report['shot']}")
            continue
        found = problems(report)
        bad += bool(found)
        print(f"{report['page']}: {summary(report)}: "
              + ("OK" if not found else f"{len(found)} problem(s)"))
        for problem in found:
            print(f"    {problem}")
    print(f"{len(chosen) + len(redirects)} pages, {bad} with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
