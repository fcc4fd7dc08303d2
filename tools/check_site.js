// The checks tools/check_site.py runs inside each page of the built website (an init script:
// the functions are globals of every page it opens; Python's playwright calls them).
//
// inspect(maxCodeLine): horizontal overflow of the article, code or output lines that are too
// long; scrollingBlocks(): code and output blocks that scroll sideways; cutOff(): what a reader
// cannot see whole at this width; onScreen(selector): is that element shown, whole, on top;
// phoneChecks(...): figures, headings, equations and controls on a phone.
"use strict";

// Once MathJax has typeset the page (its layout depends on it): horizontal overflow of the
// article and lines over the book's limit.
function inspect(maxCodeLine) {
  const result = { overflow: null, wideCode: [] };
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


// Runs inside the page on a phone: what a reader can read and tap there.
// - figures: each article figure's smallest label (explorer frames included), estimated in
//   CSS px from the book's smallest figure font (minPt at dpi: minPt * dpi/72 px in the drawn
//   image) times the shown/drawn width, at least minPx without tapping (a figure may also
//   open at its drawn size when tapped: class "zoomable", tools/sphinx_ext/static/site_layout.js);
// - headings larger than the phone sizes of site_layout.css (28, 23 and 20 px);
// - display equations that scroll without the shadows that say so;
// - explorer controls lower than minTarget px.
function phoneChecks(minPt, dpi, minPx, minTarget) {
  const found = { figures: [], problems: [], smallest: null };
  for (const img of document.querySelectorAll("article .cell_output img, article figure img")) {
    if (!img.naturalWidth || !img.clientWidth) continue;
    const estimate = (minPt * dpi / 72) * img.clientWidth / img.naturalWidth;
    const zoomable = img.classList.contains("zoomable");
    const name = (img.getAttribute("src") || "").split("/").pop().slice(0, 24);
    found.figures.push({ name, estimate, zoomable, shown: img.clientWidth, drawn: img.naturalWidth });
    if (found.smallest === null || estimate < found.smallest) found.smallest = estimate;
    if (estimate < minPx) {
      found.problems.push(`figure ${name} shown ${img.clientWidth} px of ${img.naturalWidth}: ` +
        `labels ~${estimate.toFixed(1)} px (at least ${minPx} without tapping)`);
    }
  }
  const limits = { H1: 28.5, H2: 23, H3: 20 };
  for (const heading of document.querySelectorAll("article h1, article h2, article h3")) {
    const size = parseFloat(getComputedStyle(heading).fontSize);
    if (size > limits[heading.tagName]) {
      found.problems.push(`${heading.tagName} "${heading.textContent.slice(0, 30)}" is ${size} px`);
    }
  }
  for (const math of document.querySelectorAll('article mjx-container[display="true"]')) {
    if (math.scrollWidth <= math.clientWidth + 1) continue;
    const style = getComputedStyle(math);
    if (!/auto|scroll/.test(style.overflowX) || !style.backgroundImage.includes("gradient")) {
      found.problems.push(`a display equation scrolls with no cue: ${math.textContent.slice(0, 30)}`);
    }
  }
  for (const control of document.querySelectorAll(".annotated-ssm-explorer [data-control]")) {
    const box = control.getBoundingClientRect();
    if (box.height < minTarget) {
      found.problems.push(`explorer control "${control.getAttribute("aria-label") ||
        control.closest("label").textContent.slice(0, 20)}" is ${box.height.toFixed(0)} px high`);
    }
  }
  return found;
}

// Is `element` shown on screen, whole, and on top (what a click at its centre would hit)?
function visibleOnTop(element) {
  const style = getComputedStyle(element);
  const box = element.getBoundingClientRect();
  if (style.display === "none" || style.visibility !== "visible" || box.width < 4 ||
    box.height < 4) return false;
  if (box.left < -1 || box.right > document.documentElement.clientWidth + 1 || box.top < -1 ||
    box.bottom > window.innerHeight + 1) return false;
  const top = document.elementFromPoint((box.left + box.right) / 2, (box.top + box.bottom) / 2);
  return Boolean(top && (top === element || element.contains(top) || top.contains(element)));
}

// Runs inside the page on a desktop: without a click, a link to every chapter (the
// header's compact list or the navigation column) and a search box are on screen.
function navigationOnScreen() {
  const found = [];
  const chapter = /(^|\/)\d\d_[^/]*\.html$/;
  const links = [...document.querySelectorAll("a[href]")].filter((a) =>
    chapter.test(a.getAttribute("href").split("#")[0]) && !a.closest("article"));
  const all = new Set(links.map((a) => a.getAttribute("href").split("#")[0]));
  const shown = new Set(links.filter(visibleOnTop).map((a) => a.getAttribute("href").split("#")[0]));
  if (all.size === 0) found.push("no links to the chapters outside the article");
  else if (shown.size < all.size) {
    found.push(`the chapter list is not on screen without a click (${shown.size} of ` +
      `${all.size} chapters shown)`);
  }
  const boxes = [...document.querySelectorAll('input[type="search"]')]
    .filter((input) => !input.closest("dialog"));
  if (!boxes.some(visibleOnTop)) found.push("no search box on screen without a click");
  return found;
}

// Runs inside the page: a search field whose magnifier icon covers the text typed into it.
function searchIconCovers() {
  const found = [];
  for (const input of document.querySelectorAll('input[type="search"]')) {
    if (!visibleOnTop(input)) continue;
    const box = input.getBoundingClientRect();
    const style = getComputedStyle(input);
    const textLeft = box.left + parseFloat(style.borderLeftWidth) + parseFloat(style.paddingLeft);
    const textRight = box.right - parseFloat(style.borderRightWidth) - parseFloat(style.paddingRight);
    const form = input.closest("form") || input.parentElement;
    for (const icon of form.querySelectorAll('i, .fa-magnifying-glass, svg')) {
      const b = icon.getBoundingClientRect();
      if (b.width === 0 || getComputedStyle(icon).display === "none") continue;
      const overlaps = b.right > textLeft + 1 && b.left < textRight - 1 &&
        b.bottom > box.top + 1 && b.top < box.bottom - 1;
      if (overlaps) {
        found.push(`the search icon (${Math.round(b.left)}–${Math.round(b.right)} px) covers ` +
          `the query's text (from ${Math.round(textLeft)} px)`);
      }
    }
  }
  return found;
}

// Runs inside the page on a phone: the API reference's summary tables, a name wrapped
// over several lines ("Dia/gona/lSys/tem").
function wrappedNames() {
  const found = [];
  for (const cell of document.querySelectorAll("table.autosummary td:first-child")) {
    const name = cell.querySelector("code, a") || cell;
    const lines = new Set([...name.getClientRects()].map((r) => Math.round(r.top)));
    if (lines.size > 1) {
      found.push(`the summary table wraps the name "${name.textContent.trim().slice(0, 40)}" ` +
        `over ${lines.size} lines`);
    }
  }
  return [...new Set(found)];
}

// Globals of the page, for tools/check_site.py (playwright runs an init script in a scope of
// its own).
Object.assign(window, { inspect, scrollingBlocks, cutOff, onScreen, phoneChecks,
  navigationOnScreen, searchIconCovers, wrappedNames });
