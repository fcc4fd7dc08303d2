"""Check the explorers of the built website in headless Chromium, offline: do they move?

Serves a built site (default _build/html) on localhost, opens every page that holds a static
explorer (annotated_ssm.static_explorer) in Chromium, driven by playwright-core from
.node/ (`make node`), with every request that leaves localhost blocked. For each explorer it
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

Needs Chromium (Debian: apt-get install chromium; or --chromium PATH) and node.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from check_site import serve  # noqa: E402  (tools/ is not a package)

ROOT = pathlib.Path(__file__).resolve().parents[1]
MARKER = 'class="annotated-ssm-explorer"'
MAX_BYTES = 1_500_000
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

DRIVER = r"""
"use strict";
const { chromium } = require("playwright-core");
const config = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));

async function frameOf(handle) {
  return handle.evaluate((root) => {
    const img = root.querySelector("img");
    return { frame: img.getAttribute("data-frame"), src: img.src.length + ":" + img.src.slice(-40),
             decoded: img.complete && img.naturalWidth > 0, width: img.naturalWidth };
  });
}

async function isDisabled(control) {
  return control.evaluate((c) => c.disabled);
}

// Set a control as a script would (a disabled one too) and let the page update.
async function setValue(control, value) {
  await control.evaluate((c, v) => { c.value = v; c.dispatchEvent(new Event("change")); }, value);
}

async function valuesOf(control) {
  return control.evaluate((c) => (c.tagName === "SELECT" ? Array.from(c.options, (o) => o.value)
    : Array.from({ length: parseInt(c.max, 10) + 1 }, (_, i) => String(i))));
}

// Moves the other (enabled) controls, one at a time, until controls[k] is enabled; returns
// the label of the control that enabled it ("" if none did), leaving that setting in place.
async function enable(controls, k) {
  for (const [j, other] of controls.entries()) {
    if (j === k || (await isDisabled(other))) continue;
    const start = await other.evaluate((c) => c.value);
    for (const value of await valuesOf(other)) {
      await setValue(other, value);
      if (!(await isDisabled(controls[k]))) {
        return other.evaluate((c) => c.closest("label").textContent.trim().split(" ")[0]);
      }
    }
    await setValue(other, start);
  }
  return "";
}

(async () => {
  const browser = await chromium.launch({ executablePath: config.chromium, args: config.flags });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const blocked = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(config.base) || url.startsWith("data:")) return route.continue();
    blocked.push(url);
    return route.abort();
  });
  for (const pagePath of config.pages) {
    const page = await context.newPage();
    const errors = [];
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text().slice(0, 200)); });
    page.on("pageerror", (e) => errors.push(String(e).slice(0, 200)));
    await page.goto(config.base + pagePath, { waitUntil: "load" });
    const explorers = await page.$$(".annotated-ssm-explorer");
    const widgetViews = await page.$$eval(
      "script[type='application/vnd.jupyter.widget-view+json']", (s) => s.length);
    for (const [index, root] of explorers.entries()) {
      const loadErrors = errors.length;
      const result = { page: pagePath, index, controls: [], widgetViews, blocked,
                       pageErrors: errors.slice(0, loadErrors) };
      result.title = await root.evaluate((r) => r.querySelector("strong").textContent);
      result.bytes = await root.evaluate(
        (r) => r.outerHTML.length + r.nextElementSibling.outerHTML.length);
      result.frames = await root.evaluate(
        (r) => JSON.parse(r.getAttribute("data-explorer")).frames.length);
      const controls = await root.$$("[data-control]");
      for (const [k, control] of controls.entries()) {
        // A control disabled here must change nothing (try another value), and some
        // setting of the other controls must enable it: then it is moved like the rest.
        let idle = null;
        if (await isDisabled(control)) {
          const start = await control.evaluate((c) => c.value);
          const before = await frameOf(root);
          await setValue(control, start === "0" ? "1" : "0");
          const after = await frameOf(root);
          await setValue(control, start);
          idle = { inert: before.src === after.src, enabledBy: await enable(controls, k) };
        }
        const before = await frameOf(root);
        const kind = await control.evaluate((c) => c.tagName.toLowerCase());
        let moved;
        if (kind === "select") {
          const count = await control.evaluate((c) => c.options.length);
          const value = await control.evaluate((c) => c.value);
          const target = String((parseInt(value, 10) + 1) % count);
          await control.selectOption(target);
          moved = `select ${value} -> ${target}`;
        } else {
          const [value, max] = await control.evaluate((c) => [c.value, c.max]);
          await control.focus();
          await page.keyboard.press(value === max ? "ArrowLeft" : "ArrowRight");
          moved = `slider ${value} -> ${await control.evaluate((c) => c.value)}`;
        }
        await page.waitForFunction((r) => r.querySelector("img").complete, root);
        const after = await frameOf(root);
        const label = await control.evaluate(
          (c) => c.closest("label").textContent.trim().slice(0, 40));
        result.controls.push({ label, moved, idle, before: before.frame, after: after.frame,
                               changed: before.frame !== after.frame && before.src !== after.src
                                 && after.decoded });
      }
      // A phone: the explorer must fit 400 px without scrolling sideways.
      await page.setViewportSize({ width: 400, height: 800 });
      result.phone = await root.evaluate((r) => ({ width: r.getBoundingClientRect().width,
        img: r.querySelector("img").getBoundingClientRect().width,
        scroll: r.scrollWidth > r.clientWidth + 1 }));
      await page.setViewportSize({ width: 1280, height: 900 });
      result.errors = errors.slice(loadErrors);  // raised while the controls moved: the explorer's
      errors.length = loadErrors;
      console.log(JSON.stringify(result));
    }
    if (!explorers.length) console.log(JSON.stringify({ page: pagePath, index: -1, errors }));
    await page.close();
  }
  await browser.close();
})().catch((e) => { console.error(e); process.exit(2); });
"""


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
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--node-modules", type=pathlib.Path,
                        default=ROOT / ".node" / "node_modules",
                        help="a node_modules folder holding playwright-core "
                             "(default: .node/, `make node`)")
    args = parser.parse_args(argv)
    pages = explorer_pages(args.site)
    if not pages:
        print(f"no page of {args.site} holds a static explorer")
        return 1
    server = serve(args.site)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    with tempfile.TemporaryDirectory() as tmp:
        driver, config = pathlib.Path(tmp, "driver.js"), pathlib.Path(tmp, "config.json")
        driver.write_text(DRIVER)
        config.write_text(json.dumps({"base": base, "pages": pages, "chromium": args.chromium,
                                      "flags": FLAGS}))
        run = subprocess.run(["node", str(driver), str(config)], capture_output=True, text=True,
                             env={**os.environ, "NODE_PATH": str(args.node_modules)})
    server.shutdown()
    if run.returncode:
        print(run.stdout, run.stderr, sep="\n")
        return 1
    failed = 0
    for line in run.stdout.splitlines():
        result = json.loads(line)
        bad = failures(result)
        failed += bool(bad)
        if result["index"] < 0:
            print(f"{result['page']}: FAIL {bad}")
            continue
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
    print(f"{failed} explorer(s) failing" if failed else "every explorer moves, offline")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
