"""Sphinx extension: search results that show the sentence a word was found in, cheaply.

Sphinx's search page shows an excerpt under each result by downloading the whole page it
links to (a chapter's HTML is 1–2 MB: its figures and explorer frames are inline) and taking
text from the top of the page's main element, which in this theme starts with the header's
buttons — so every excerpt read "…Colab", and a search for "kernel" downloaded 10 MB. And it
looks for the stemmed word ("woodburi"), which the text does not contain.

This writes, beside each page, ``NAME.search.txt``: the article's text alone (its sections
with their ids, so a result that points into a section shows that section; no images, no
explorer frames, no navigation), and on the search page ``static/search_excerpts.js`` makes
the search fetch that file instead of the page and show the sentence holding the query (the
phrase, else a word as typed, else its stem).
"""

from __future__ import annotations

import html
import pathlib

from docutils import nodes

STATIC = pathlib.Path(__file__).resolve().parent / "static"
SUFFIX = ".search.txt"  # also in static/search_excerpts.js
SKIPPED = (nodes.raw, nodes.image, nodes.comment, nodes.system_message,
           nodes.substitution_definition, nodes.target)


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


def _html(node) -> str:
    """The text of ``node`` as minimal HTML: sections (with their first id) and text only."""
    if isinstance(node, SKIPPED) or (isinstance(node, nodes.Element) and _hidden_code(node)):
        return ""
    if isinstance(node, nodes.section):
        ident = node["ids"][0] if node["ids"] else ""
        inner = "".join(_html(child) for child in node.children)
        return f'<section id="{html.escape(ident)}">\n{inner}</section>\n'
    if isinstance(node, nodes.TextElement) and next(node.findall(nodes.raw), None) is None:
        return html.escape(node.astext()) + "\n"
    if isinstance(node, nodes.Text):
        return html.escape(node.astext())
    return "".join(_html(child) for child in node.children)


def _write_text(app, pagename, templatename, context, doctree):
    if pagename == "search":
        app.add_js_file("search_excerpts.js")
    if doctree is None or app.builder.format != "html":
        return
    path = pathlib.Path(app.outdir) / (pagename + SUFFIX)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'<div role="main">\n{_html(doctree)}</div>\n', encoding="utf-8")


def _add_static_path(app):
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("builder-inited", _add_static_path)
    app.connect("html-page-context", _write_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
