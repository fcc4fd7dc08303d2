/* The search page's ranking and excerpts (tools/sphinx_ext/search_excerpts.py). Loaded
 * before Sphinx's searchtools.js, which keeps the Scorer defined here.
 *
 * - Ranking: Sphinx's scores, then a page of the book gains by how often its prose uses the
 *   query's words (SEARCH_WEIGHTS, from _static/search_weights.js), and an entry of the API
 *   reference comes after the book's pages unless its name is the query ("fit" finds the
 *   function first; "HiPPO" finds chapter 2 before the module annotated_ssm.hippo).
 * - Excerpts: Sphinx fetches docName + FILE_SUFFIX for each result; here that is the page's
 *   text alone (NAME.search.js), loaded as a script (so it works from file:// as well as from
 *   a server; fetch does not), and the excerpt is the sentence that holds the query, in the
 *   prose if it is there, else in the code. */
"use strict";

// Sphinx's searchtools.js reads this global (a `var`: it checks `typeof Scorer`).
// eslint-disable-next-line no-var
var Scorer = {
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
  // Below every page of the book: an API entry whose name is not the query.
  apiPenalty: 60,
  // Per doubling of how often a page's prose uses the query's words.
  teaches: 4,
  score: (result) => {
    const [docName, title, , , score] = result;
    const words = searchQueryWords();
    if (docName === "genindex" || docName === "py-modindex" ||
        docName.startsWith("book/reference/") || docName === "book/reference") {
      const name = String(title || "").split(/[.\s>]+/).filter(Boolean).pop() || "";
      // Named: the whole query is the entry's name ("fit", "parallel scan" for parallel_scan).
      const named = [words.join(" "), words.join("_"), words.join("")]
        .includes(name.toLowerCase());
      return named ? score : score - Scorer.apiPenalty;
    }
    const weights = typeof SEARCH_WEIGHTS === "undefined" ? {} : SEARCH_WEIGHTS;
    let uses = 0;
    for (const stem of searchQueryStems()) uses += (weights[stem] || {})[docName] || 0;
    return score + Math.round(Scorer.teaches * Math.log2(1 + uses));
  },
};

// The query's words as typed (lower case), and their stems as the index stores them.
function searchQueryWords() {
  const query = new URLSearchParams(window.location.search).get("q") || "";
  return query.toLowerCase().split(/[^\p{L}\p{N}_]+/u).filter((w) => w.length > 1);
}

function searchQueryStems() {
  const stop = typeof stopwords === "undefined" ? [] : stopwords;
  const stemmer = typeof Stemmer === "undefined" ? null : new Stemmer();
  return searchQueryWords().filter((w) => !stop.includes(w))
    .map((w) => (stemmer ? stemmer.stemWord(w) : w));
}

// A page's text, loaded by its script (NAME.search.js sets SEARCH_TEXTS[NAME]).
const SEARCH_TEXT_SUFFIX = ".search.js";
window.SEARCH_TEXTS = window.SEARCH_TEXTS || {};

// Sphinx asks for contentRoot + docName + FILE_SUFFIX.
function loadSearchText(url) {
  const root = document.documentElement.dataset.content_root || "";
  const docName = url.slice(url.startsWith(root) ? root.length : 0, -SEARCH_TEXT_SUFFIX.length);
  if (docName in window.SEARCH_TEXTS) return Promise.resolve(window.SEARCH_TEXTS[docName]);
  return new Promise((resolve) => {
    const script = document.createElement("script");
    script.src = url;
    script.onload = () => resolve(window.SEARCH_TEXTS[docName] || "");
    script.onerror = () => resolve("");
    document.head.appendChild(script);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  // Both are top-level constants of Sphinx's scripts (not properties of window).
  if (typeof Search === "undefined" || typeof DOCUMENTATION_OPTIONS === "undefined") return;
  DOCUMENTATION_OPTIONS.FILE_SUFFIX = SEARCH_TEXT_SUFFIX;
  const LENGTH = 240; // characters shown, as Sphinx's own excerpt

  // Sphinx asks fetch() for each result's text: a page's text comes from its script.
  const originalFetch = window.fetch.bind(window);
  window.fetch = (resource, options) => {
    const url = typeof resource === "string" ? resource : resource.url;
    if (!url.endsWith(SEARCH_TEXT_SUFFIX)) return originalFetch(resource, options);
    return loadSearchText(url).then((text) => ({ ok: true, text: () => Promise.resolve(text) }));
  };

  const query = () =>
    (new URLSearchParams(window.location.search).get("q") || "").toLowerCase().trim();

  // Where the query is in `lower`: the phrase, else the longest word as typed, else a stem.
  const position = (lower, stems) => {
    const phrase = query().replace(/\s+/g, " ");
    if (phrase && lower.includes(phrase)) return [lower.indexOf(phrase), phrase.length];
    const words = phrase.split(" ").filter((w) => w.length > 1 && !w.startsWith("-"));
    words.sort((a, b) => b.length - a.length);
    for (const word of [...words, ...stems]) {
      const at = lower.indexOf(word.toLowerCase());
      if (at > -1) return [at, word.length];
    }
    return [-1, 0];
  };

  // The text of the result's section (or page): its prose (code left out), and all of it.
  const texts = (htmlText, anchor) => {
    const doc = new DOMParser().parseFromString(htmlText, "text/html");
    let root = doc.querySelector('[role="main"]') || doc.body;
    if (anchor && anchor.length > 1) {
      const section = doc.getElementById(anchor.slice(1));
      if (section) root = section;
    }
    const all = root.textContent.replace(/\s+/g, " ").trim();
    const prose = root.cloneNode(true);
    prose.querySelectorAll("pre").forEach((pre) => pre.remove());
    return [prose.textContent.replace(/\s+/g, " ").trim(), all];
  };

  Search.makeSearchSummary = (htmlText, keywords, anchor) => {
    const [prose, all] = texts(htmlText, anchor);
    if (!all) return null;
    let text = prose;
    let [at, length] = position(prose.toLowerCase(), [...keywords]);
    if (at < 0) {
      text = all;
      [at, length] = position(all.toLowerCase(), [...keywords]);
    }
    let start = 0;
    let end = Math.min(text.length, LENGTH);
    if (at > -1) {
      // The sentence around the match, at most LENGTH characters with the match inside.
      // A sentence ends at ". " (or ! ?) before a capital, not after a number ("3. Discr…").
      const ends = [...text.matchAll(/[^\d\s][.!?]\s+(?=[A-Z(“"])/g)].map((m) => m.index + 2);
      start = Math.max(0, ...ends.filter((e) => e <= at));
      end = Math.min(text.length, ...ends.filter((e) => e > at + length));
      if (end - start > LENGTH) {
        start = Math.max(start, at - Math.floor((LENGTH - length) / 2));
        end = Math.min(end, start + LENGTH);
      }
    }
    const summary = document.createElement("p");
    summary.classList.add("context");
    summary.textContent = (start > 0 ? "…" : "") + text.slice(start, end).trim() +
      (end < text.length ? "…" : "");
    return summary;
  };
});
