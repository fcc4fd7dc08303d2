"""Sphinx extension: write each page's scripts once.

sphinx-thebe and sphinx-togglebutton (which Jupyter Book 1 always loads) put their inline
configuration twice into every page of this book; the second ``const THEBE_JS_URL = …`` is
a SyntaxError that every page logged in the browser's console. This drops repeated scripts
(same file, or same inline body) from every page, keeping the first.
"""

from __future__ import annotations


def _key(script) -> tuple:
    # An inline script is registered with filename None once and with "" the second time.
    return (script.filename or "", tuple(sorted((k, str(v)) for k, v in script.attributes.items())))


def _unique_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app):
    # After the other extensions' handlers, which may still add scripts to a page.
    app.connect("html-page-context", _unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
