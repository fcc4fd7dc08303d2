// Typeset TeX with MathJax 3 (mathjax-full, as on the website) and report what fails.
//
//   node tools/mathjax_check.js < spans.jsonl > results.jsonl
//
// Each input line is {"tex": "...", "display": true|false}; each output line is
// {"ok": bool, "error": "message or null"}. Undefined macros are errors here, although
// the website (with the `noundefined` package) would show them as red text. The book
// defines no macros of its own: Jupyter and Colab would not know them.
// The Makefile installs mathjax-full into .node/ (git-ignored); NODE_PATH points there.
"use strict";
const readline = require("readline");
const { mathjax } = require("mathjax-full/js/mathjax.js");
const { TeX } = require("mathjax-full/js/input/tex.js");
const { liteAdaptor } = require("mathjax-full/js/adaptors/liteAdaptor.js");
const { RegisterHTMLHandler } = require("mathjax-full/js/handlers/html.js");
const { STATE } = require("mathjax-full/js/core/MathItem.js");
require("mathjax-full/js/input/tex/AllPackages.js");

// The packages the site's tex-chtml.js has loaded or autoloads on first use, except
// `noundefined` and `noerrors`, which would hide exactly the failures we look for.
const PACKAGES = [
  "base", "ams", "newcommand", "configmacros", "action", "amscd", "bbox", "boldsymbol",
  "braket", "cancel", "cases", "centernot", "color", "enclose", "extpfeil", "gensymb",
  "html", "mathtools", "upgreek", "unicode", "verb",
];

let lastError = null;
const tex = new TeX({
  packages: PACKAGES,
  formatError(jax, error) {
    lastError = error.message;
    return jax.formatError(error);
  },
});
const adaptor = liteAdaptor();
RegisterHTMLHandler(adaptor);
const html = mathjax.document("", { InputJax: tex });

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (!line.trim()) return;
  const span = JSON.parse(line);
  lastError = null;
  try {
    html.convert(span.tex, { display: span.display, end: STATE.COMPILED }); // parse only
  } catch (error) {
    lastError = String(error && error.message ? error.message : error);
  }
  process.stdout.write(JSON.stringify({ ok: lastError === null, error: lastError }) + "\n");
});
