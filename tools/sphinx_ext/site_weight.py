"""Sphinx extension: what a page downloads before the reader scrolls, kept small.

- The static explorers' frames (``annotated_ssm/static_explorer.py`` stores them in the
  notebook as ``data:`` URLs, so that a notebook shows its explorers without a server) are
  written to files, ``_images/explorer/<hash>.<ext>``, one per distinct image, and the page
  names them instead: a frame downloads when it is shown, not with the page (chapter 6's
  HTML held 1.75 MB of them).
- Every image in the article loads lazily (``loading="lazy"``): only those near the screen
  download with the page.
- The theme's Font Awesome script (1.5 MB, which swaps about ten icons for SVG) is not
  loaded: the theme's stylesheet already draws the same icons from its web fonts, and those
  fonts are cut down to the icons the site uses (the solid and brands fonts were 156 and
  118 kB for about twenty icons; now a few kB, as WOFF).
- Sphinx's search scripts and index (190 kB) load on the search page only: the theme loads
  them on every page for its search-as-you-type, which this book does not turn on.
- The download button's source-file link (the sources are not copied to the site,
  ``html_copy_source: False``) points at the file in the repository.

``tools/check_site.py`` measures every page's weight before scrolling.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import pathlib
import re

EXPLORER = re.compile(r'(<div class="annotated-ssm-explorer" data-explorer=")([^"]*)(")')
DATA_URL = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,([A-Za-z0-9+/=]+)")
IMG = re.compile(r"<img(?![^>]*\sloading=)")
FONTAWESOME = re.compile(
    r'\s*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>')
SEARCH_SCRIPTS = re.compile(r'\s*<script src="[^"]*(?:_static/searchtools\.js|'
                            r'_static/language_data\.js|searchindex\.js)"></script>')
# The theme's icon fonts as its stylesheet declares them (WOFF2, then TrueType).
FONT_FACE = re.compile(r'src:url\((\.\./vendor/fontawesome/webfonts/)(fa-[a-z]+-\d+)\.woff2\) '
                       r'format\("woff2"\),url\(\.\./vendor/fontawesome/webfonts/\2\.ttf\) '
                       r'format\("truetype"\)')
ICON_CLASS = re.compile(r'((?:\.fa-[a-z0-9-]+:before,?)+)\{content:"(\\[0-9a-f]+ ?|.)"\}')
FOLDER = "_images/explorer"


def _frame_file(outdir: pathlib.Path, kind: str, payload: str) -> str:
    """Writes one frame (once per distinct image); its path from the site's root."""
    data = base64.b64decode(payload)
    extension = {"jpeg": "jpg", "svg+xml": "svg"}.get(kind, kind)
    name = f"{FOLDER}/{hashlib.sha256(data).hexdigest()[:20]}.{extension}"
    path = outdir / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return name


def frames_to_files(body: str, outdir: pathlib.Path, relative) -> str:
    """``body`` with every explorer's ``data:`` frames replaced by files in ``outdir``;
    ``relative(path)`` is a path from the site's root as seen from the page."""

    def url(match: re.Match) -> str:
        return relative(_frame_file(outdir, match.group(1), match.group(2)))

    def explorer(match: re.Match) -> str:
        data = json.loads(html.unescape(match.group(2)))
        data["images"] = [DATA_URL.sub(url, image) for image in data["images"]]
        attribute = html.escape(json.dumps(data, separators=(",", ":")), quote=True)
        return match.group(1) + attribute + match.group(3)

    if "annotated-ssm-explorer" not in body:
        return body
    body = EXPLORER.sub(explorer, body)
    # The frame each explorer shows first, in its <img src>.
    return DATA_URL.sub(url, body)


def _lighten_page(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if body:
        body = frames_to_files(body, pathlib.Path(app.outdir),
                               lambda path: context["pathto"](path, 1))
        context["body"] = IMG.sub('<img loading="lazy"', body)
    _source_links_to_repository(app, pagename, context)


def _source_links_to_repository(app, pagename, context):
    """The download button's source links (``_sources``, not copied) -> the repository."""
    options = app.config.html_theme_options
    url = options.get("repository_url", "").rstrip("/")
    branch = options.get("repository_branch", "main")
    folder = options.get("path_to_docs", ".").strip("/.")
    suffix = context.get("page_source_suffix")
    for group in context.get("header_buttons", []):
        buttons = group.get("buttons") if isinstance(group, dict) else None
        if not buttons:
            continue
        kept = []
        for button in buttons:
            label = button.get("label")
            if label == "download-notebook-button":
                continue  # the same file as the source link below, for a notebook
            if label == "download-source-button":
                if not (url and suffix):
                    continue
                path = "/".join(p for p in (folder, pagename + suffix) if p)
                button = dict(button, url=f"{url}/blob/{branch}/{path}",
                              tooltip="The source file, in the repository")
            kept.append(button)
        group["buttons"] = kept


def _codepoint(content: str) -> int:
    """A CSS ``content`` value ("\\f0c9" or the character itself) as a code point."""
    return int(content.strip()[1:], 16) if content.startswith("\\") else ord(content)


def _subset_icon_fonts(outdir: pathlib.Path) -> None:
    """The theme's Font Awesome fonts cut down to the icons the site's pages, scripts and
    stylesheets name, and the stylesheet pointed at the cut fonts."""
    from fontTools import subset  # matplotlib's dependency, installed with the book

    styles = outdir / "_static" / "styles" / "pydata-sphinx-theme.css"
    css = styles.read_text(encoding="utf-8")
    if not FONT_FACE.search(css):
        return  # already done (an incremental build), or another theme version: left alone
    by_class = {}
    for selectors, content in ICON_CLASS.findall(css):
        for name in re.findall(r"\.(fa-[a-z0-9-]+):before", selectors):
            by_class[name] = _codepoint(content)
    text = "".join(path.read_text(encoding="utf-8", errors="replace")
                   for pattern in ("**/*.html", "_static/**/*.js")
                   for path in outdir.glob(pattern))
    named = set(re.findall(r"\bfa-[a-z0-9-]+", text))
    used = {by_class[name] for name in named if name in by_class}
    # Icons the stylesheets draw themselves (admonitions, toggles): private-use characters.
    # (Font Awesome's own rule for each of its 1,870 classes is left out: a class counts when
    # a page or script names it.)
    for sheet in (outdir / "_static").rglob("*.css"):
        rules = ICON_CLASS.sub("", sheet.read_text(encoding="utf-8", errors="replace"))
        for content in re.findall(r'content:\s*"(\\f[0-9a-f]{3} ?|[\ue000-\uf8ff])"', rules):
            used.add(_codepoint(content))
    fonts = outdir / "_static" / "vendor" / "fontawesome" / "webfonts"
    for source in fonts.glob("fa-*.ttf"):
        options = subset.Options()
        options.flavor = "woff"
        font = subset.load_font(str(source), options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=sorted(used & set(font.getBestCmap())))
        subsetter.subset(font)
        subset.save_font(font, str(fonts / f"{source.stem}.icons.woff"), options)
    styles.write_text(FONT_FACE.sub(r'src:url(\1\2.icons.woff) format("woff")', css),
                      encoding="utf-8")


def _lighten_site(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    outdir = pathlib.Path(app.outdir)
    for page in outdir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        lighter = FONTAWESOME.sub("", text)
        if page != outdir / "search.html":
            lighter = SEARCH_SCRIPTS.sub("", lighter)
        if lighter != text:
            page.write_text(lighter, encoding="utf-8")
    for path in (outdir / "_static" / "scripts").glob("fontawesome.js*"):
        path.unlink()
    _subset_icon_fonts(outdir)


def setup(app):
    # After sphinx-book-theme's handlers (which fill header_buttons).
    app.connect("html-page-context", _lighten_page, priority=800)
    app.connect("build-finished", _lighten_site)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
