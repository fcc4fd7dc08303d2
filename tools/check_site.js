// Open pages of the built website in headless Chromium and report what a reader would hit.
//
//   node tools/check_site.js CONFIG.json     (run by tools/check_site.py, which serves the site)
//
// CONFIG: {"base": "http://127.0.0.1:PORT/", "pages": [...], "chromium": "/usr/bin/chromium",
//          "shots": "folder or null", "figure_pages": [...], "headings_page": "..."}.
// Prints one JSON object per page: MathJax errors, console errors and exceptions, requests
// that tried to leave localhost (blocked: the check runs offline), horizontal overflow.
"use strict";
const fs = require("fs");
const path = require("path");
const { chromium } = require("playwright-core");

const config = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run"];
const MAX_CODE_LINE = 100;

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
  // Lines over the book's limit are problems; blocks that merely scroll at this width (the
  // theme's code box holds about 78 characters at 1280 px) are counted for information.
  result.scrolling = 0;
  for (const pre of document.querySelectorAll("article pre")) {
    const longest = Math.max(...pre.innerText.split("\n").map((line) => line.length));
    if (pre.scrollWidth > pre.clientWidth + 1) result.scrolling += 1;
    if (longest > maxCodeLine) {
      const kind = pre.closest(".cell_output") ? "output" : "code";
      result.wideCode.push(`${kind} block with a line of ${longest} characters: ` +
        pre.innerText.split("\n").find((line) => line.length === longest).slice(0, 60) + "…");
    }
  }
  return result;
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

async function openPage(browser, url, width) {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
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
  for (const name of config.pages) {
    const { context, page, report } = await openPage(browser, config.base + name, 1280);
    Object.assign(report, await page.evaluate(inspect, MAX_CODE_LINE), { page: name });
    process.stdout.write(JSON.stringify(report) + "\n");
    await context.close();
  }
  if (config.shots) {
    fs.mkdirSync(config.shots, { recursive: true });
    // The S4 chapter's headings at desktop width: the page's table of contents.
    const { context, page } = await openPage(browser, config.base + config.headings_page, 1280);
    const toc = page.locator(".bd-sidebar-secondary, .bd-toc").first();
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
