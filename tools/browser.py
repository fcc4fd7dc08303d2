"""What tools/check_site.py and tools/check_explorers.py share: a built website served on
localhost, and the system's Chromium driven by Python's playwright (no browser download),
offline: every request that leaves the served site is blocked and recorded.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import pathlib
import threading
from collections.abc import Iterator

from playwright.sync_api import Browser, BrowserContext, Route, sync_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextlib.contextmanager
def serve(folder: pathlib.Path) -> Iterator[str]:
    """``folder`` served on a free localhost port, in a thread; yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium(executable: str = CHROMIUM) -> Iterator[Browser]:
    """Headless Chromium from ``executable``."""
    if not pathlib.Path(executable).exists():
        raise SystemExit(f"no Chromium at {executable} (Debian: apt-get install chromium; "
                         "or --chromium PATH)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def offline(context: BrowserContext, base: str, blocked: list[str]) -> None:
    """Let ``context`` load only ``base`` (and data: URLs); append every other URL to ``blocked``."""

    def route(route: Route) -> None:
        url = route.request.url
        if url.startswith(base) or url.startswith("data:"):
            route.continue_()
        else:
            blocked.append(url)
            route.abort()

    context.route("**/*", route)
