"""Sphinx extension: the book's own stylesheet, ``static/site_layout.css``.

It widens the article column where the theme would make the chapters' code scroll sideways
(their code and printed lines are up to 100 characters; see the stylesheet for the widths)
and keeps wide display equations and tables inside their own scroll boxes on phones (with
shadows at the edges that hide more), keeps the page's table of contents on screen at every
desktop width, sizes headings and explorer controls for phones, and lets a reader tap a
figure shrunk to a phone's width to see it at its own size (``static/site_layout.js``).
``tools/check_site.py`` measures both.
"""

from __future__ import annotations

import hashlib
import pathlib

STATIC = pathlib.Path(__file__).resolve().parent / "static"
CSS = STATIC / "site_layout.css"
JS = STATIC / "site_layout.js"


def _add_static_path(app):
    # Copied into _build/html/_static/ next to the theme's files.
    if str(STATIC) not in app.config.html_static_path:
        app.config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("builder-inited", _add_static_path)
    # After the themes' stylesheets (which Sphinx writes first), so these rules win ties.
    app.add_css_file(CSS.name)
    app.add_js_file(JS.name, loading_method="defer")
    # Sphinx copies static files only when some page is rewritten: a changed stylesheet
    # changes this value, which makes Sphinx rewrite every page (and so copy it).
    digest = hashlib.sha256(CSS.read_bytes() + JS.read_bytes()).hexdigest()
    app.add_config_value("site_layout_css_digest", digest, "html")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
