// Open pages of the built website in headless Chromium and report what a reader would hit.
//
//   node tools/check_site.js CONFIG.json     (run by tools/check_site.py, which serves the site)
//
// CONFIG: {"base": "http://127.0.0.1:PORT/", "pages": [...], "chromium": "/usr/bin/chromium",
//          "shots": "folder or null", "figure_pages": [...], "headings_page": "..."}.
// Prints one JSON object per page. On a 1280 px desktop: MathJax errors, console errors and
// exceptions, requests that tried to leave localhost (blocked: the check runs offline),
// horizontal overflow, code or output blocks that scroll sideways (also at 1920 px). On a
// 400 px phone (touch): what is cut off (wider than the screen or than a box that clips it,
// and not inside a box of its own that scrolls sideways); whether tapping ☰ opens the site's
// navigation and tapping Contents the page's table of contents. At both widths, whether the
// two buttons do what they should.
"use strict";
const fs = require("fs");
const path = require("path");
const { chromium } = require("playwright-core");

const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run"];
const MAX_CODE_LINE = 100;
const WIDE = 1920;  // a wide desktop, measured besides 1280 px

// Runs inside the page once MathJax has finished.
function inspect(maxCodeLine) {
  const result = { math: 0, mathErrors: [], overflow: null, wideCode: [] };
  if (window.MathJax && MathJax.startup && MathJax.startup.document) {
    for (const item of MathJax.startup.document.math) {
      result.math += 1;
      // merror: TeX that does not parse; red mtext: a macro nobody defined (noundefined).
      const bad = [];
      item.root.walkTree((node) => {
        if (node.kind === "merror") bad.push(node.attributes.get("data-mjx-error") || "error");
        if (node.kind === "mtext" && node.attributes.get("mathcolor") === "red") {
          bad.push("undefined: " + node.childNodes.map((c) => c.text || "").join(""));
        }
      });
      if (bad.length) result.mathErrors.push(`${(item.math || "").trim().slice(0, 80)}  [${bad}]`);
    }
  }
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  if (article && article.scrollWidth > article.clientWidth + 1) {
    result.overflow = `article ${article.scrollWidth} px wide in ${article.clientWidth} px`;
  }
  // Lines over the book's limit (see scrollingBlocks for blocks that scroll sideways).
  result.blocks = 0;
  for (const pre of document.querySelectorAll("article pre")) {
    const lines = pre.textContent.split("\n");
    const longest = Math.max(...lines.map((line) => line.length));
    result.blocks += 1;
    if (longest > maxCodeLine) {
      const kind = pre.closest(".cell_output") ? "output" : "code";
      result.wideCode.push(`${kind} block with a line of ${longest} characters: ` +
        lines.find((line) => line.length === longest).slice(0, 60) + "…");
    }
  }
  return result;
}

// Runs inside the page: the code and output blocks that scroll sideways at this width, which
// tools/sphinx_ext/static/site_layout.css leaves room for 100 characters at desktop widths.
// A block hidden on the page (the collapsed setup cell) is laid out all the same.
function scrollingBlocks() {
  const found = [];
  for (const pre of document.querySelectorAll("article pre")) {
    if (pre.scrollWidth <= pre.clientWidth + 1) continue;
    const lines = pre.textContent.split("\n");
    const longest = Math.max(...lines.map((line) => line.length));
    const kind = pre.closest(".cell_output") ? "output" : "code";
    found.push(`${kind} block scrolls sideways (${pre.scrollWidth} px of text in a ` +
      `${pre.clientWidth} px box, ${longest} characters): ` +
      lines.find((line) => line.length === longest).slice(0, 60) + "…");
  }
  return found;
}

// Runs inside the page: everything in the article that a reader cannot see whole. An element
// is cut off when it reaches past the screen's edge, or past a box that clips it (overflow
// hidden), without a box between them that scrolls sideways (overflow-x auto or scroll) and
// itself fits. Display and inline equations, tables, code and output blocks, images, and
// each cell output's parts.
function cutOff() {
  const found = [];
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > width + 1) {
    found.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px wide ` +
      `on a ${width} px screen`);
  }
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  if (!article) return found;
  const scrolls = (style) => style.overflowX === "auto" || style.overflowX === "scroll";
  const describe = (element) => {
    const math = element.closest("mjx-container");
    let what = element.tagName.toLowerCase();
    if (math) {
      what = math.getAttribute("display") === "true" ? "display equation" : "inline equation";
    } else if (element.closest(".cell_output")) {
      what = `output ${what}`;
    }
    const text = (element.textContent || element.getAttribute("src") || "").replace(/\s+/g, " ");
    return `${what} "${text.trim().slice(0, 50)}"`;
  };
  const selector = "mjx-container, table, pre, img, svg, iframe, video, .cell_output .output > *";
  for (const element of article.querySelectorAll(selector)) {
    let box = element.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;  // not shown (a closed toggle)
    const own = getComputedStyle(element);
    if (!scrolls(own) && own.overflowX !== "visible" &&
      element.scrollWidth > element.clientWidth + 1) {
      found.push(`${describe(element)} cut off by its own box (${element.scrollWidth} px in ` +
        `${element.clientWidth} px)`);
      continue;
    }
    let culprit = null;
    for (let parent = element.parentElement; parent && parent !== document.body;
      parent = parent.parentElement) {
      const style = getComputedStyle(parent);
      if (style.overflowX === "visible") continue;
      const outer = parent.getBoundingClientRect();
      const inside = box.left >= outer.left - 1 && box.right <= outer.right + 1;
      if (scrolls(style)) box = outer;  // what matters from here on is the scroll box itself
      else if (!inside) {
        culprit = `a box that clips it (${parent.tagName.toLowerCase()}.` +
          `${[...parent.classList].join(".")}, ${Math.round(outer.width)} px)`;
        break;
      }
    }
    if (!culprit && (box.right > width + 1 || box.left < -1)) culprit = "the screen's edge";
    if (culprit) {
      const size = Math.round(element.getBoundingClientRect().width);
      found.push(`${describe(element)} (${size} px wide) cut off by ${culprit}`);
    }
  }
  return [...new Set(found)];
}

// Runs inside the page: is the element matching `selector` shown, whole on screen and on top?
// (The themes move a sidebar's classes onto a <dialog> when they open it.)
function onScreen(selector) {
  const width = document.documentElement.clientWidth;
  const height = window.innerHeight;
  for (const element of document.querySelectorAll(selector)) {
    const style = getComputedStyle(element);
    const box = element.getBoundingClientRect();
    if (style.display === "none" || style.visibility !== "visible" || box.width < 50 ||
      box.height < 50 || box.left < -1 || box.right > width + 1 || box.top >= height ||
      box.bottom <= 0) continue;
    const x = (Math.max(box.left, 0) + Math.min(box.right, width)) / 2;
    const y = (Math.max(box.top, 0) + Math.min(box.bottom, height)) / 2;
    const top = document.elementFromPoint(x, y);
    if (top && element.contains(top)) return true;
  }
  return false;
}

// The first shown button matching `selector` (the themes also render hidden copies).
async function shownButton(page, selector) {
  const buttons = page.locator(selector);
  for (let i = 0; i < await buttons.count(); i += 1) {
    if (await buttons.nth(i).isVisible()) return buttons.nth(i);
  }
  return null;
}

// Waits until onScreen(selector) says `want` (true or false); false if not within 3 s.
async function becomes(page, selector, want) {
  for (let waited = 0; waited <= 3000; waited += 50) {
    if ((await page.evaluate(onScreen, selector)) === want) return true;
    await page.waitForTimeout(50);
  }
  return false;
}

const PRIMARY = ".bd-sidebar-primary";
const SECONDARY = ".bd-sidebar-secondary";

// Presses ☰ and Contents (taps them on a phone) and says what did not work. On a phone ☰
// must open the navigation drawer and Contents the page's table of contents; on a desktop
// ☰ hides the navigation column (and shows it again), and Contents, where the page shows
// the button instead of the table of contents, opens the table of contents. `shot(name)`
// screenshots each opened drawer.
async function toggles(page, phone, shot) {
  const found = [];
  const press = (button) => (phone ? button.tap() : button.click());
  const isOn = (selector) => page.evaluate(onScreen, selector);
  const close = async (selector, button) => {
    // A drawer is a modal dialog (Escape closes it); the desktop column toggles back.
    if (await page.locator(`dialog${selector}[open]`).count()) await page.keyboard.press("Escape");
    else await press(button);
    return becomes(page, selector, !phone);
  };

  const menu = await shownButton(page, ".primary-toggle");
  if (!menu) found.push("no ☰ button to show the site's navigation");
  else {
    const before = await isOn(PRIMARY);
    if (phone && before) found.push("the navigation is open before ☰ is tapped");
    await press(menu);
    if (!(await becomes(page, PRIMARY, !before))) {
      found.push(phone ? "tapping ☰ does not open the site's navigation"
        : `clicking ☰ does not ${before ? "hide" : "show"} the site's navigation`);
    } else {
      if (phone) await shot("menu");
      if (!(await close(PRIMARY, menu))) found.push("the navigation does not close again");
    }
  }

  // The page's table of contents, where the page has one.
  const tocLinks = await page.locator(`${SECONDARY} nav a, ${SECONDARY} .page-toc a`).count();
  if (tocLinks) {
    const contents = await shownButton(page, ".secondary-toggle");
    if (contents) {
      await press(contents);
      if (!(await becomes(page, SECONDARY, true))) {
        found.push(`${phone ? "tapping" : "clicking"} Contents does not open the page's ` +
          "table of contents");
      } else {
        if (phone) await shot("contents");
        if (await page.locator(`dialog${SECONDARY}[open]`).count()) {
          await page.keyboard.press("Escape");
          if (!(await becomes(page, SECONDARY, false))) found.push("Contents does not close again");
        }
      }
    } else if (!(await isOn(SECONDARY))) {
      found.push("the page's table of contents is neither shown nor behind a Contents button");
    }
  }
  return found;
}

async function waitForMath(page) {
  // A page with math has MathJax's configuration object before the script itself has
  // loaded (no startup yet): wait for the script whenever the page holds math.
  const ready = () => {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) return true;
    return !document.querySelector(".math, mjx-container") && !mj;
  };
  await page.waitForFunction(ready, null, { timeout: 20000 });
  await page.evaluate(() => {
    const mj = window.MathJax;
    return mj && mj.startup && mj.startup.promise;
  });
}

// A phone is 400 px wide with a touch screen; a desktop 1280 px with a mouse.
async function openPage(browser, url, width) {
  const phone = width < 600;
  const context = await browser.newContext(phone
    ? { viewport: { width, height: 800 }, isMobile: true, hasTouch: true }
    : { viewport: { width, height: 900 } });
  const page = await context.newPage();
  const report = { console: [], exceptions: [], blocked: [] };
  await page.route("**/*", (route) => {
    const target = route.request().url();
    if (target.startsWith(config.base) || target.startsWith("data:")) return route.continue();
    report.blocked.push(target);
    return route.abort();
  });
  page.on("console", (message) => {
    if (message.type() === "error") report.console.push(message.text().slice(0, 200));
  });
  page.on("pageerror", (error) => report.exceptions.push(String(error).slice(0, 200)));
  await page.goto(url, { waitUntil: "load" });
  await waitForMath(page);
  return { context, page, report };
}

async function main() {
  const browser = await chromium.launch({ executablePath: config.chromium, args: FLAGS });
  if (config.shots) fs.mkdirSync(config.shots, { recursive: true });
  for (const name of config.pages) {
    const { context, page, report } = await openPage(browser, config.base + name, 1280);
    Object.assign(report, await page.evaluate(inspect, MAX_CODE_LINE), { page: name });
    report.scrolling = await page.evaluate(scrollingBlocks);
    report.cutDesktop = await page.evaluate(cutOff);
    report.togglesDesktop = await toggles(page, false, async () => {});
    // A wide screen, where the page's table of contents has a column of its own.
    await page.setViewportSize({ width: WIDE, height: 900 });
    await page.waitForTimeout(100);
    report.scrollingWide = await page.evaluate(scrollingBlocks);
    await context.close();
    // The same page on a phone: console errors and exceptions there count too.
    const phone = await openPage(browser, config.base + name, 400);
    report.cutPhone = await phone.page.evaluate(cutOff);
    report.togglesPhone = await toggles(phone.page, true, async (what) => {
      if (!config.shots) return;
      await phone.page.screenshot({
        path: path.join(config.shots, `${what}_${name.replace(/\W+/g, "_")}_400.png`) });
    });
    for (const key of ["console", "exceptions", "blocked"]) {
      report[key].push(...phone.report[key].filter((item) => !report[key].includes(item)));
    }
    process.stdout.write(JSON.stringify(report) + "\n");
    await phone.context.close();
  }
  if (config.shots) {
    // The S4 chapter's headings at desktop width: the page's table of contents (opened with
    // the Contents button where the page keeps it behind one).
    const { context, page } = await openPage(browser, config.base + config.headings_page, 1280);
    const contents = await shownButton(page, ".secondary-toggle");
    if (contents) {
      await contents.click();
      await becomes(page, SECONDARY, true);
    }
    const toc = page.locator(SECONDARY).filter({ visible: true }).first();
    const file = path.join(config.shots, "s4_headings_1280.png");
    if (await toc.count()) await toc.screenshot({ path: file });
    else await page.screenshot({ path: file });
    await context.close();
    // The first figure of each chapter on a 400 px phone.
    for (const name of config.figure_pages) {
      const { context, page } = await openPage(browser, config.base + name, 400);
      const figure = page.locator("article .cell_output img").first();
      if (await figure.count()) {
        await figure.scrollIntoViewIfNeeded();
        const box = await figure.boundingBox();
        const shot = path.join(config.shots, name.replace(/\W+/g, "_") + "_400.png");
        await figure.screenshot({ path: shot });
        process.stdout.write(JSON.stringify({ figure: name, shot, width: Math.round(box.width),
          natural: await figure.evaluate((img) => img.naturalWidth) }) + "\n");
      }
      await context.close();
    }
  }
  await browser.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(2);
});
