"""Sphinx extension: a search that shows the sentence a word was found in, ranks the pages
that teach a word first, and works from file:// too.

Sphinx's search page shows an excerpt under each result by downloading the whole page it
links to (a chapter's HTML is 1–2 MB: its figures and explorer frames are inline) and taking
text from the top of the page's main element, which in this theme starts with the header's
buttons — so every excerpt read "…Colab", and a search for "kernel" downloaded 10 MB. It
looks for the stemmed word ("woodburi"), which the text does not contain; it downloads with
``fetch``, which a browser refuses for a page opened as a file (file://: three CORS errors
per search and no excerpts); and it ranks an API entry whose name holds the word above the
chapter that teaches it ("HiPPO" led with the module ``annotated_ssm.hippo``).

This writes

- beside each page, ``NAME.search.js``: the article's text alone, as a script that hands it
  to the search page (``<script>``, not ``fetch``: it loads from file:// as from a server).
  Its sections keep their ids (a result that points into a section shows that section); no
  images, no explorer frames, no navigation; code in ``<pre>`` (an excerpt prefers prose);
  formulas as their plain form (``\\bar{\\mathbf{A}}`` is "Ā", ``\\Delta`` "Δ": :func:`tex_to_text`);
- ``_static/search_weights.js``: for each word (stemmed as the search stems it) the pages
  other than the API reference that use it in their prose, with how often (twice at least);

and on the search page ``static/search_excerpts.js`` loads a result's text by that script,
shows the sentence holding the query (the phrase, else a word as typed, else its stem; prose
before code), and scores the results (Sphinx's ``Scorer``): a page that teaches the word
gains by how often its prose uses it, and an API entry comes after the book's pages unless
its name is the query.
"""

from __future__ import annotations

import collections
import html
import json
import pathlib
import re
import unicodedata

from docutils import nodes

STATIC = pathlib.Path(__file__).resolve().parent / "static"
SUFFIX = ".search.js"  # also in static/search_excerpts.js
WEIGHTS = "search_weights.js"
API = "book/reference"  # the API reference's pages (docnames under it): not weighted
MIN_COUNT = 2  # a page enters a word's weights when its prose uses the word this often
SKIPPED = (nodes.raw, nodes.image, nodes.comment, nodes.system_message,
           nodes.substitution_definition, nodes.target)

# TeX as plain text, for excerpts: the commands the book's formulas use.
GREEK = {name: chr(code) for name, code in (
    ("alpha", 0x3B1), ("beta", 0x3B2), ("gamma", 0x3B3), ("delta", 0x3B4), ("epsilon", 0x3B5),
    ("varepsilon", 0x3B5), ("zeta", 0x3B6), ("eta", 0x3B7), ("theta", 0x3B8),
    ("vartheta", 0x3D1), ("iota", 0x3B9), ("kappa", 0x3BA), ("lambda", 0x3BB), ("mu", 0x3BC),
    ("nu", 0x3BD), ("xi", 0x3BE), ("pi", 0x3C0), ("rho", 0x3C1), ("sigma", 0x3C3),
    ("tau", 0x3C4), ("upsilon", 0x3C5), ("phi", 0x3C6), ("varphi", 0x3C6), ("chi", 0x3C7),
    ("psi", 0x3C8), ("omega", 0x3C9), ("Gamma", 0x393), ("Delta", 0x394), ("Theta", 0x398),
    ("Lambda", 0x39B), ("Xi", 0x39E), ("Pi", 0x3A0), ("Sigma", 0x3A3), ("Phi", 0x3A6),
    ("Psi", 0x3A8), ("Omega", 0x3A9))}
SYMBOLS = {"cdot": "·", "times": "×", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥",
           "neq": "≠", "ne": "≠", "approx": "≈", "sim": "∼", "in": "∈", "sum": "∑",
           "prod": "∏", "int": "∫", "infty": "∞", "to": "→", "rightarrow": "→",
           "mapsto": "↦", "ldots": "…", "cdots": "⋯", "dots": "…", "partial": "∂",
           "nabla": "∇", "odot": "⊙", "otimes": "⊗", "circ": "∘", "pm": "±", "star": "⋆",
           "ell": "ℓ", "Re": "Re", "Im": "Im", "top": "ᵀ", "mid": "|", "lvert": "|",
           "rvert": "|", "lVert": "‖", "rVert": "‖", "langle": "⟨", "rangle": "⟩",
           "quad": " ", "qquad": " ", "{": "{", "}": "}", "%": "%", "&": "&", "_": "_"}
ACCENTS = {"bar": "\u0304", "overline": "\u0304", "tilde": "\u0303", "widetilde": "\u0303",
           "hat": "\u0302", "widehat": "\u0302", "dot": "\u0307", "vec": "\u20D7"}
FONTS = ("mathbf", "mathrm", "mathit", "mathcal", "mathbb", "mathsf", "mathtt", "boldsymbol",
         "bm", "text", "textrm", "textbf", "textit", "operatorname", "mbox")
DROPPED = ("left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr",
           "displaystyle", "tfrac", "dfrac", "frac", "sqrt", "limits", "nolimits", "!", ",",
           ";", ":", " ")


def _group(tex: str, start: int) -> tuple[str, int]:
    """The argument that starts at ``tex[start]`` (a ``{…}`` group or one character) and
    where it ends."""
    while start < len(tex) and tex[start] == " ":
        start += 1
    if start >= len(tex):
        return "", start
    if tex[start] != "{":
        if tex[start] == "\\":
            match = re.match(r"\\([A-Za-z]+|.)", tex[start:])
            return match.group(0), start + match.end()
        return tex[start], start + 1
    depth = 0
    for end in range(start, len(tex)):
        depth += {"{": 1, "}": -1}.get(tex[end], 0)
        if depth == 0:
            return tex[start + 1:end], end + 1
    return tex[start + 1:], len(tex)


def tex_to_text(tex: str) -> str:
    """A formula's plain form for a search excerpt: ``\\bar{\\mathbf{A}}_n^{\\,\\ell}`` -> "Ā_n^ℓ",
    ``\\frac{1}{2}`` -> "(1)/(2)"; symbols as Unicode, fonts and spacing dropped."""
    out = []
    i = 0
    while i < len(tex):
        char = tex[i]
        if char == "\\":
            match = re.match(r"\\([A-Za-z]+|.)", tex[i:])
            name = match.group(1)
            i += match.end()
            if name in GREEK or name == "ell":  # a space after a letter's name ends the name:
                rest = tex[i:].lstrip(" ")  # "\\Delta A" is ΔA, "\\Lambda - P" Λ - P
                if rest[:1].isalnum() or re.match(r"\\[A-Za-z]", rest):
                    i = len(tex) - len(rest)
            if name in ("frac", "tfrac", "dfrac"):
                top, i = _group(tex, i)
                bottom, i = _group(tex, i)
                top, bottom = tex_to_text(top), tex_to_text(bottom)
                wrap = (lambda s: s if len(s) <= 1 else f"({s})")
                out.append(f"{wrap(top)}/{wrap(bottom)}")
            elif name == "sqrt":
                inner, i = _group(tex, i)
                out.append(f"√({tex_to_text(inner)})")
            elif name in ACCENTS:
                inner, i = _group(tex, i)
                text = tex_to_text(inner)
                out.append(text + ACCENTS[name] if len(text) == 1 else f"{text}{ACCENTS[name]}")
            elif name in FONTS:
                inner, i = _group(tex, i)
                out.append(tex_to_text(inner))
            elif name in GREEK:
                out.append(GREEK[name])
            elif name in SYMBOLS:
                out.append(SYMBOLS[name])
            elif name in DROPPED or name in ("\\",):
                out.append(" " if name in (" ", "\\") else "")
            else:
                out.append(name)
            continue
        if char in "{}":
            i += 1
            continue
        if char == "~":
            out.append(" ")
            i += 1
            continue
        out.append(char)
        i += 1
    return unicodedata.normalize("NFC", re.sub(r"\s+", " ", "".join(out)).strip())


def _hidden_code(node) -> bool:
    """A code cell's input that the page keeps collapsed (the setup cell's, plotting code):
    not what a reader searches for."""
    if "cell_input" not in node.get("classes", ()):
        return False
    parent = node.parent  # the cell, or the collapsible box myst-nb puts around the input
    while parent is not None and "cell" not in parent.get("classes", ()):
        parent = parent.parent
    return parent is not None and any(tag in parent.get("classes", ())
                                      for tag in ("tag_hide-input", "tag_remove-input"))


def _text(node) -> str:
    """A text node's words, its formulas as plain text."""
    if isinstance(node, (nodes.math, nodes.math_block)):
        return tex_to_text(node.astext())
    if isinstance(node, nodes.Text):
        return node.astext()
    if isinstance(node, SKIPPED):
        return ""
    return "".join(_text(child) for child in node.children)


def _html(node) -> str:
    """The text of ``node`` as minimal HTML: sections (with their first id), text, and code
    in ``<pre>``."""
    if isinstance(node, SKIPPED) or (isinstance(node, nodes.Element) and _hidden_code(node)):
        return ""
    if isinstance(node, nodes.section):
        ident = node["ids"][0] if node["ids"] else ""
        inner = "".join(_html(child) for child in node.children)
        return f'<section id="{html.escape(ident)}">\n{inner}</section>\n'
    if isinstance(node, nodes.literal_block):
        return f"<pre>{html.escape(node.astext())}</pre>\n"
    if isinstance(node, nodes.math_block):
        return f"<p>{html.escape(tex_to_text(node.astext()))}</p>\n"
    if isinstance(node, nodes.TextElement) and next(node.findall(nodes.raw), None) is None:
        return html.escape(_text(node)) + "\n"
    if isinstance(node, nodes.Text):
        return html.escape(node.astext())
    return "".join(_html(child) for child in node.children)


def _prose(node) -> list[str]:
    """The prose of ``node``: its text outside code, hidden cells and formulas."""
    if isinstance(node, (*SKIPPED, nodes.literal_block, nodes.math, nodes.math_block)) or (
            isinstance(node, nodes.Element) and _hidden_code(node)):
        return []
    if isinstance(node, nodes.Text):
        return [node.astext()]
    return [text for child in node.children for text in _prose(child)]


def _write_text(app, pagename, templatename, context, doctree):
    if pagename == "search":
        # Before Sphinx's own search script: it reads the Scorer this defines.
        app.add_js_file(WEIGHTS, priority=200)
        app.add_js_file("search_excerpts.js", priority=201)
    if doctree is None or app.builder.format != "html":
        return
    path = pathlib.Path(app.outdir) / (pagename + SUFFIX)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f'<div role="main">\n{_html(doctree)}</div>\n'
    path.write_text("(window.SEARCH_TEXTS = window.SEARCH_TEXTS || {})"
                    f"[{json.dumps(pagename)}] = {json.dumps(text, ensure_ascii=False)};\n",
                    encoding="utf-8")


def _count_words(app, doctree):
    """How often the page's prose uses each word (stemmed as the search stems it), kept in
    the environment: a page not read again keeps its counts."""
    docname = app.env.docname
    if not hasattr(app.env, "search_weights"):
        app.env.search_weights = {}
    if docname == API or docname.startswith(API + "/"):
        app.env.search_weights.pop(docname, None)
        return
    lang = _language()
    counts = collections.Counter(
        lang.stem(word.lower()) for text in _prose(doctree) for word in lang.split(text)
        if len(word) > 1 and word.lower() not in lang.stopwords)
    app.env.search_weights[docname] = {stem: n for stem, n in counts.items() if n >= MIN_COUNT}


def _language():
    from sphinx.search.en import SearchEnglish

    return SearchEnglish({})


def _purge(app, env, docname):
    getattr(env, "search_weights", {}).pop(docname, None)


def _merge(app, env, docnames, other):
    env.search_weights = getattr(env, "search_weights", {})
    for docname in docnames:
        if docname in getattr(other, "search_weights", {}):
            env.search_weights[docname] = other.search_weights[docname]


def _write_weights(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    by_stem: dict[str, dict[str, int]] = collections.defaultdict(dict)
    pages = getattr(app.env, "search_weights", {})
    for page in sorted(pages):
        if page not in app.env.all_docs:
            continue
        for stem, n in pages[page].items():
            by_stem[stem][page] = n
    path = pathlib.Path(app.outdir) / "_static" / WEIGHTS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("// Pages that teach a word: its stem -> {page: how often its prose uses it}"
                    " (tools/sphinx_ext/search_excerpts.py).\nvar SEARCH_WEIGHTS = "
                    + json.dumps(dict(sorted(by_stem.items())), separators=(",", ":"),
                                 ensure_ascii=False) + ";\n", encoding="utf-8")


def _add_static_path(app):
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("builder-inited", _add_static_path)
    app.connect("html-page-context", _write_text)
    app.connect("doctree-read", _count_words)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("build-finished", _write_weights)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
