"""Check the explorers of the built website in headless Chromium, offline: do they move?

Serves a built site (default _build/html) on localhost, opens every page that holds a static
explorer (annotated_ssm.book.static_explorer) in Chromium (the system's, driven by Python's
playwright; tools/browser.py), with every request that leaves localhost blocked. For each explorer it
moves every control the way a reader would (arrow key on a slider, a new choice in a list)
and checks that the figure changes: another frame, another image, decoded by the browser.
A control shown disabled (it changes nothing for the current setting, e.g. θ for
HiPPO-LegS) must keep the image when its value is set anyway, and must be enabled by some
value of another control; it is then moved like the others.
It also reports each explorer's size, whether a widget placeholder was rendered instead,
console errors raised while the controls move (errors while the page loads are listed but
belong to the theme: tools/check_site.py), and whether the explorer fits a 400 px phone.

    make book && python tools/check_explorers.py           # exit 1 if an explorer fails
    python tools/check_explorers.py --site /tmp/jb/_build/html

Needs Chromium (Debian: apt-get install chromium; or --chromium PATH).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from playwright.sync_api import ElementHandle, Page

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from browser import CHROMIUM, chromium, offline, serve  # noqa: E402  (tools/ is not a package)

ROOT = pathlib.Path(__file__).resolve().parents[1]
MARKER = 'class="annotated-ssm-explorer"'
MAX_BYTES = 1_500_000

# What the explorer shows: the frame's number and its image (decoded by the browser?).
FRAME_OF = """root => {
  const img = root.querySelector("img");
  return { frame: img.getAttribute("data-frame"), src: img.src.length + ":" + img.src.slice(-40),
           decoded: img.complete && img.naturalWidth > 0, width: img.naturalWidth };
}"""
# Set a control as a script would (a disabled one too) and let the page update.
SET_VALUE = """(c, v) => { c.value = v; c.dispatchEvent(new Event("change")); }"""
# Every value a control can take.
VALUES_OF = """c => (c.tagName === "SELECT" ? Array.from(c.options, (o) => o.value)
  : Array.from({ length: parseInt(c.max, 10) + 1 }, (_, i) => String(i)))"""
LABEL = """c => c.closest("label").textContent.trim()"""


def frame_of(root: ElementHandle) -> dict:
    return root.evaluate(FRAME_OF)


def disabled(control: ElementHandle) -> bool:
    return control.evaluate("c => c.disabled")


def set_value(control: ElementHandle, value: str) -> None:
    control.evaluate(SET_VALUE, value)


def enable(controls: list[ElementHandle], k: int) -> str:
    """Moves the other (enabled) controls, one at a time, until ``controls[k]`` is enabled;
    the label of the control that enabled it ("" if none did), leaving that setting in place."""
    for j, other in enumerate(controls):
        if j == k or disabled(other):
            continue
        start = other.evaluate("c => c.value")
        for value in other.evaluate(VALUES_OF):
            set_value(other, value)
            if not disabled(controls[k]):
                return other.evaluate(LABEL).split(" ")[0]
        set_value(other, start)
    return ""


def move(page: Page, root: ElementHandle, controls: list[ElementHandle], k: int) -> dict:
    """Moves ``controls[k]`` as a reader would; what the figure did."""
    control = controls[k]
    # A control disabled here must change nothing (try another value), and some setting of
    # the other controls must enable it: then it is moved like the rest.
    idle = None
    if disabled(control):
        start = control.evaluate("c => c.value")
        before = frame_of(root)
        set_value(control, "1" if start == "0" else "0")
        after = frame_of(root)
        set_value(control, start)
        idle = {"inert": before["src"] == after["src"], "enabledBy": enable(controls, k)}
    before = frame_of(root)
    if control.evaluate("c => c.tagName.toLowerCase()") == "select":
        count = control.evaluate("c => c.options.length")
        value = control.evaluate("c => c.value")
        target = str((int(value) + 1) % count)
        control.select_option(target)
        moved = f"select {value} -> {target}"
    else:
        value, maximum = control.evaluate("c => [c.value, c.max]")
        control.focus()
        page.keyboard.press("ArrowLeft" if value == maximum else "ArrowRight")
        moved = f"slider {value} -> {control.evaluate('c => c.value')}"
    page.wait_for_function("r => r.querySelector('img').complete", arg=root)
    after = frame_of(root)
    return {"label": control.evaluate(LABEL)[:40], "moved": moved, "idle": idle,
            "before": before["frame"], "after": after["frame"],
            "changed": (before["frame"] != after["frame"] and before["src"] != after["src"]
                        and after["decoded"])}


def check_page(page: Page, url: str, name: str, blocked: list[str]) -> list[dict]:
    """One result per explorer on the page (one with index -1 if it holds none)."""
    errors = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text[:200]))
    page.on("pageerror", lambda e: errors.append(str(e)[:200]))
    page.goto(url, wait_until="load")
    explorers = page.query_selector_all(".annotated-ssm-explorer")
    widget_views = page.eval_on_selector_all(
        "script[type='application/vnd.jupyter.widget-view+json']", "s => s.length")
    results = []
    for index, root in enumerate(explorers):
        load_errors = len(errors)
        result = {"page": name, "index": index, "widgetViews": widget_views, "blocked": blocked,
                  "pageErrors": errors[:load_errors],
                  "title": root.evaluate("r => r.querySelector('strong').textContent"),
                  "bytes": root.evaluate(
                      "r => r.outerHTML.length + r.nextElementSibling.outerHTML.length"),
                  "frames": root.evaluate(
                      "r => JSON.parse(r.getAttribute('data-explorer')).frames.length")}
        # A reader moves an explorer on screen; its frames load lazily, when it is near the
        # screen (tools/sphinx_ext/site_weight.py).
        root.scroll_into_view_if_needed()
        controls = root.query_selector_all("[data-control]")
        result["controls"] = [move(page, root, controls, k) for k in range(len(controls))]
        # A phone: the explorer must fit 400 px without scrolling sideways.
        page.set_viewport_size({"width": 400, "height": 800})
        result["phone"] = root.evaluate("""r => ({ width: r.getBoundingClientRect().width,
            img: r.querySelector("img").getBoundingClientRect().width,
            scroll: r.scrollWidth > r.clientWidth + 1 })""")
        page.set_viewport_size({"width": 1280, "height": 900})
        result["errors"] = errors[load_errors:]  # raised while the controls moved: the explorer's
        del errors[load_errors:]
        results.append(result)
    return results or [{"page": name, "index": -1, "errors": errors}]


def explorer_pages(site: pathlib.Path) -> list[str]:
    """Pages (relative to the site) whose HTML holds a static explorer."""
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html")
                  if not p.relative_to(site).parts[0].startswith(("_", "."))
                  and MARKER in p.read_text(errors="ignore"))


def failures(result: dict) -> list[str]:
    """What is wrong with one explorer's result (empty: it works)."""
    if result["index"] < 0:
        return ["page lists the marker but no explorer was found"]
    bad = [f"{c['label']}: figure did not change ({c['moved']})" for c in result["controls"]
           if not c["changed"]]
    for c in result["controls"]:
        if c["idle"] and not c["idle"]["inert"]:
            bad.append(f"{c['label']}: disabled, yet another value changes the figure")
        if c["idle"] and not c["idle"]["enabledBy"]:
            bad.append(f"{c['label']}: disabled, and no other control enables it")
    if not result["controls"]:
        bad.append("no controls")
    if result["bytes"] > MAX_BYTES:
        bad.append(f"{result['bytes']} bytes > {MAX_BYTES}")
    if result["widgetViews"]:
        bad.append(f"{result['widgetViews']} widget views rendered on the page")
    if result["errors"]:
        bad.append(f"console errors while moving the controls: {result['errors'][:3]}")
    if result["blocked"]:
        bad.append(f"requests left localhost: {result['blocked'][:3]}")
    if result["phone"]["scroll"] or result["phone"]["img"] > 400:
        bad.append(f"does not fit a 400 px screen: {result['phone']}")
    return bad


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=pathlib.Path, default=ROOT / "_build" / "html")
    parser.add_argument("--chromium", default=CHROMIUM)
    args = parser.parse_args(argv)
    pages = explorer_pages(args.site)
    if not pages:
        print(f"no page of {args.site} holds a static explorer")
        return 1
    failed = 0
    blocked = []
    with serve(args.site) as base, chromium(args.chromium) as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        offline(context, base, blocked)
        for name in pages:
            page = context.new_page()
            results = check_page(page, base + name, name, blocked)
            page.close()
            for result in results:
                failed += report(result)
    print(f"{failed} explorer(s) failing" if failed else "every explorer moves, offline")
    return 1 if failed else 0


def report(result: dict) -> bool:
    """Prints one explorer's result; True if it fails."""
    bad = failures(result)
    if result["index"] < 0:
        print(f"{result['page']}: FAIL {bad}")
        return True
    moves = ", ".join(f"{c['label'].split()[0]} {c['before']}->{c['after']}"
                      + (f" (disabled until {c['idle']['enabledBy'] or '?'} moved)"
                         if c["idle"] else "")
                      for c in result["controls"])
    print(f"{result['page']} #{result['index']} {result['title'][:50]!r}: "
          f"{result['bytes'] / 1e6:.2f} MB, "
          f"{result['frames']} frames; moved {moves}; phone {result['phone']['img']:.0f} px: "
          + ("ok" if not bad else "FAIL " + "; ".join(bad)))
    # Errors while the page loaded are the theme's: tools/check_site.py reports them.
    if result["pageErrors"]:
        print(f"    (console errors while the page loaded: {result['pageErrors'][:3]})")
    return bool(bad)


if __name__ == "__main__":
    sys.exit(main())
