"""Sphinx extension: write each page's scripts once.

sphinx-thebe (which Jupyter Book 1 always loads) puts its inline configuration,
``const THEBE_JS_URL = …``, twice into every page of this book; the second ``const`` of
the same name is a SyntaxError that every page logged in the browser's console. This drops
repeated scripts (same file, or same inline body) from every page, keeping the first.
"""

from __future__ import annotations


def _key(script) -> tuple:
    return (script.filename, tuple(sorted((k, str(v)) for k, v in script.attributes.items())))


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
    # After every other handler (sphinx-thebe adds its scripts at priority 500).
    app.connect("html-page-context", _unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
