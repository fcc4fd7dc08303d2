/* The search page's excerpts (tools/sphinx_ext/search_excerpts.py): Sphinx's search fetches
 * docName + FILE_SUFFIX for each result's excerpt; here that is the page's text alone
 * (NAME.search.txt), and the excerpt is the sentence that holds the query. Runs before
 * Sphinx's Search.init (both wait for DOMContentLoaded; this script is registered first). */
document.addEventListener("DOMContentLoaded", () => {
  // Both are top-level constants of Sphinx's scripts (not properties of window).
  if (typeof Search === "undefined" || typeof DOCUMENTATION_OPTIONS === "undefined") return;
  DOCUMENTATION_OPTIONS.FILE_SUFFIX = ".search.txt";
  const LENGTH = 240; // characters shown, as Sphinx's own excerpt

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

  Search.makeSearchSummary = (htmlText, keywords, anchor) => {
    const text = Search.htmlToText(htmlText, anchor).replace(/\s+/g, " ").trim();
    if (!text) return null;
    const [at, length] = position(text.toLowerCase(), [...keywords]);
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
