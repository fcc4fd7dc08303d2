"""Sphinx extension: the book's own stylesheet, ``static/site_layout.css``.

It widens the article column where the theme would make the chapters' code scroll sideways
(their code and printed lines are up to 100 characters; see the stylesheet for the widths)
and keeps wide display equations and tables inside their own scroll boxes on phones (with
shadows at the edges that hide more), keeps the page's table of contents on screen at every
desktop width, sizes headings and explorer controls for phones, and lets a reader tap a
figure shrunk to a phone's width to see it at its own size (``static/site_layout.js``).

It also fills the book's desktop header (``templates/book-header-nav.html``, named in
``_config.yml``'s ``article_header_start``): every page of the table of contents as a compact
link (a chapter by its number, the others by the label ``book_header_labels`` gives them,
the full title on hover) and a search box, on screen at every desktop width without a click.
``tools/check_site.py`` measures all of it.
"""

from __future__ import annotations

import hashlib
import pathlib
import re

STATIC = pathlib.Path(__file__).resolve().parent / "static"
CSS = STATIC / "site_layout.css"
JS = STATIC / "site_layout.js"


def _add_static_path(app):
    # Copied into _build/html/_static/ next to the theme's files.
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


NUMBERED = re.compile(r"(\d+)\.\s")  # a chapter's title: "4. S4: the convolution kernel …"


def toc_order(env) -> list[str]:
    """The pages of the table of contents in reading order, the root page first."""
    order: list[str] = []

    def visit(docname: str) -> None:
        if docname in order:
            return
        order.append(docname)
        for child in env.toctree_includes.get(docname, []):
            visit(child)

    visit(env.config.root_doc)
    return order


def header_links(app, pagename: str) -> list[tuple[str, str, str, bool]]:
    """(label, title, href, current) for each page the header names: the chapters by their
    number, the pages ``book_header_labels`` names by their label; in reading order."""
    env = app.builder.env
    labels = app.config.book_header_labels
    links = []
    for docname in toc_order(env):
        title = env.titles[docname].astext() if docname in env.titles else docname
        number = NUMBERED.match(title)
        label = number.group(1) if number else labels.get(docname)
        if label is None:
            continue
        links.append((label, title, app.builder.get_relative_uri(pagename, docname),
                      docname == pagename))
    return links


def _header_context(app, pagename, templatename, context, doctree):
    if app.builder.format == "html":
        context["book_header_nav"] = header_links(app, pagename)


def setup(app):
    app.connect("builder-inited", _add_static_path)
    # After the themes' stylesheets (which Sphinx writes first), so these rules win ties.
    app.add_css_file(CSS.name)
    app.add_js_file(JS.name, loading_method="defer")
    # Sphinx copies static files only when some page is rewritten: a changed stylesheet
    # changes this value, which makes Sphinx rewrite every page (and so copy it).
    digest = hashlib.sha256(CSS.read_bytes() + JS.read_bytes()).hexdigest()
    app.add_config_value("site_layout_css_digest", digest, "html")
    # The header's labels of pages that are not numbered chapters (docname -> label).
    app.add_config_value("book_header_labels", {}, "html")
    app.connect("html-page-context", _header_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
