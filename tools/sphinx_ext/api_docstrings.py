"""Sphinx extension: the package's docstrings as the API reference renders them.

The docstrings are written for a reader of the source first: aligned tables and diagrams
indented under a line (module overviews, an initialisation's ablations), and absolute values
written ``|x|``. reStructuredText reads the first as block quotes and definition lists (and
collapses their spaces) and the second as substitutions. Before napoleon turns the Google
sections (``Args:``, ``Returns:``, …) into fields, this

- makes every indented block that is not the continuation of a list item, a paragraph or a
  Google section a literal block (shown as written, in monospace, less the ````…````
  marks of inline literals, which a literal block would show), and
- escapes ``|`` outside literals, so ``|z|`` is the text |z|;
- keeps the first sentence of a constant's or property's docstring as text (napoleon would
  read "Fields a resumed run may change: …" as a type and a description).

A cross-reference by a short name (:class:`ModelConfig` in ``annotated_ssm.model``) links to
the one object of the package with that name, wherever it is documented, so the references
survive a module's move.

The pages autosummary generated in an earlier build (``api_reference_dir``) are removed
before it generates them again: a module that moved or was renamed leaves no stale page.
The API reference's landing page (book/reference.md) lists the modules in groups; a public
module it does not list is a warning (an error under ``-W``: it would have no page). Its
``api-classes`` directive is the index of classes: an autosummary table of every public
class of the package, by module, found by importing the package (never out of date).

Nothing in the package is changed; a docstring that renders well already is left as is.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import pkgutil
import re
import shutil

from docutils.statemachine import StringList
from sphinx.ext.autosummary import Autosummary
from sphinx.util import logging

PACKAGE = "annotated_ssm"
LANDING = "book/reference.md"
logger = logging.getLogger(__name__)

# Google-style section headers napoleon reads (their bodies are indented by design).
SECTION = re.compile(r"\s*(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|"
                     r"Other Parameters|"
                     r"Returns?|Yields?|Raises|Warns|Attributes|Methods|Examples?|Notes?|"
                     r"References|See Also|Todo|Warning|Warnings)\s*:\s*$")
# Where the text of a list item starts: "- item", "* item", "1. item", "(a) item".
ITEM = re.compile(r"\s*(?:[-*+•]|\d+[.)]|\(\w+\)|\w[.)])\s+")
LITERAL = re.compile(r"(``.*?``)")
INLINE_LITERAL = re.compile(r"``(.+?)``")


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def content_indent(line: str) -> int:
    """The column where the text of ``line`` starts (after a list item's marker)."""
    match = ITEM.match(line)
    return match.end() if match else indent(line)


def escape_bars(line: str) -> str:
    """``line`` with each ``|`` outside inline literals escaped."""
    parts = LITERAL.split(line)
    return "".join(part if index % 2 else re.sub(r"(?<!\\)\|", r"\\|", part)
                   for index, part in enumerate(parts))


def rewrite(lines: list[str]) -> list[str]:
    """The docstring's lines with layout blocks made literal and bars escaped."""
    out: list[str] = []
    previous = None  # the last non-blank line outside a literal block or section body
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            out.append(line)
            i += 1
            continue
        if SECTION.fullmatch(line):
            # A Google section: copied with its body (bars escaped); napoleon reads it.
            base = indent(line)
            out.append(line)
            i += 1
            while i < len(lines) and (not lines[i].strip() or indent(lines[i]) > base):
                out.append(escape_bars(lines[i]))
                i += 1
            previous = None
            continue
        if previous is not None and indent(line) > content_indent(previous) \
                and not previous.rstrip().endswith("::"):
            # An indented layout block: literal, up to the first line back at the margin.
            base = indent(previous)
            while out and not out[-1].strip():
                out.pop()
            out += ["", " " * base + "::", ""]
            while i < len(lines) and (not lines[i].strip() or indent(lines[i]) > base):
                # Shown as written, but without reST's inline-literal marks (``LAYERS``).
                out.append(INLINE_LITERAL.sub(r"\1", lines[i]))
                i += 1
            while out and not out[-1].strip():
                out.pop()
            out.append("")
            previous = None
            continue
        if previous is not None and previous.rstrip().endswith("::"):
            # An explicit literal block: copied as written.
            base = indent(previous)
            while i < len(lines) and (not lines[i].strip() or indent(lines[i]) > base):
                out.append(lines[i])
                i += 1
            previous = None
            continue
        out.append(escape_bars(line))
        previous = line
        i += 1
    return out


def _process(app, what, name, obj, options, lines):
    lines[:] = rewrite(lines)


def _undo_sentence_as_type(app, what, name, obj, options, lines):
    """After napoleon: a ``:type:`` it took from a first sentence (words, not a type) goes
    back to the start of the text."""
    if what not in ("attribute", "data", "property"):
        return
    typed = [i for i, line in enumerate(lines) if line.startswith(":type: ")]
    if len(typed) == 1 and " " in lines[typed[0]][len(":type: "):].strip():
        sentence = lines.pop(typed[0])[len(":type: "):].strip()
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        if first is None:
            lines.append(sentence)
        else:
            lines[first] = f"{sentence}: {lines[first].lstrip()}"


def _resolve_short_name(app, env, node, contnode):
    """A py reference that found nothing: the package's one object of that name, if one."""
    if node.get("refdomain") != "py" or "." in node.get("reftarget", ""):
        return None
    domain = env.get_domain("py")
    target = node["reftarget"]
    matches = [name for name in domain.objects
               if name.startswith("annotated_ssm.") and name.rsplit(".", 1)[-1] == target]
    if len(matches) != 1:
        return None
    return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], matches[0],
                               node, contnode)


def _remove_generated_pages(app):
    folder = pathlib.Path(app.srcdir) / app.config.api_reference_dir
    if folder.is_dir() and folder.resolve().is_relative_to(pathlib.Path(app.srcdir).resolve()):
        shutil.rmtree(folder)


def public_modules(package: str = PACKAGE) -> list[str]:
    """Every public module of ``package`` (no part of its name starts with "_"), the package
    first."""
    root = importlib.import_module(package)
    names = [package] + [info.name for info in pkgutil.walk_packages(root.__path__, package + ".")]
    return [name for name in names if not any(part.startswith("_") for part in name.split("."))]


def public_classes(package: str = PACKAGE) -> list[str]:
    """Every public class defined in a public module of ``package``, module by module, in
    the order of the source."""
    found = []
    for name in public_modules(package):
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        classes = [(getattr(obj, "__firstlineno__", None) or _line(obj), attr)
                   for attr, obj in vars(module).items()
                   if inspect.isclass(obj) and obj.__module__ == name and not attr.startswith("_")
                   and (exported is None or attr in exported)]
        found += [f"{name}.{attr}" for _, attr in sorted(classes)]
    return found


def _line(cls) -> int:
    try:
        return inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return 0


class ApiClasses(Autosummary):
    """``.. api-classes::``: an autosummary table of every public class of the package."""

    required_arguments = 0
    has_content = False

    def run(self):
        self.content = StringList(public_classes(), source="api-classes")
        self.options["nosignatures"] = True
        return super().run()


def _check_landing(app):
    """Every public module is listed on the landing page (else it would have no page)."""
    landing = pathlib.Path(app.srcdir) / LANDING
    if not landing.exists():
        return
    listed = set(re.findall(r"^\s+(annotated_ssm[\w.]*)\s*$", landing.read_text(), re.MULTILINE))
    for name in public_modules():
        if name not in listed:
            logger.warning(f"{LANDING} does not list the public module {name}: add it to a "
                           "group (or it has no page in the API reference)")


def setup(app):
    app.add_directive("api-classes", ApiClasses)
    app.connect("builder-inited", _check_landing, priority=450)
    # Where autosummary writes the API reference's pages (book/reference.md's toctree).
    app.add_config_value("api_reference_dir", "book/reference", "env")
    # Before autosummary generates them (its handler has the default priority, 500).
    app.connect("builder-inited", _remove_generated_pages, priority=400)
    # Before napoleon (priority 500), which reads the sections this leaves in place.
    app.connect("autodoc-process-docstring", _process, priority=400)
    app.connect("autodoc-process-docstring", _undo_sentence_as_type, priority=600)
    app.connect("missing-reference", _resolve_short_name)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
