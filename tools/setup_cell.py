"""The first cell of every chapter, kept identical everywhere.

The cell is generated, so the facts it needs live in one place each: the repository
address in ``_config.yml`` (shared with the website's launch buttons), the package version
in ``pyproject.toml`` (the cell installs the release ``v<version>``, the code the stored
outputs were made with, if that tag exists, and otherwise the branch named in
``_config.yml``) and the version floors in ``pyproject.toml`` (tools/floors.py; the
cell compares them with what is installed, upgrades flax, optax, ... in Colab, and stops
with the fix where an upgrade is not safe: jax, whose CUDA build Colab provides; pip runs
with jax, jaxlib and their CUDA plugins pinned to the installed versions, and the cell prints
a one-line summary of what pip changed instead of pip's log; a local path is given to pip as
``file://localhost/…``, which the pip of Python 3.11's venv reads). Every failure
ends in one sentence with the fix: ``SetupError._render_traceback_`` makes IPython and
Colab show its message instead of a traceback.

    python tools/setup_cell.py book/*.ipynb          # write the cell into each chapter
    python tools/setup_cell.py --check book/*.ipynb  # exit 1 if a chapter's cell differs
    python tools/setup_cell.py --print               # show the cell
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import tomllib

import nbformat

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from floors import floors  # noqa: E402  (tools/ is not a package)

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The floors the cell checks: what a chapter imports. The rest come with the package.
CHECKED = ("jax", "flax", "optax", "orbax-checkpoint", "numpy", "matplotlib", "ipywidgets")

# The cell, with @NAME@ placeholders for the facts read from _config.yml and pyproject.toml.
TEMPLATE = r'''
#@title Setup: run this cell first (in Colab it installs the package) { display-mode: "form" }
# It checks the installed versions against the oldest ones the book is tested with. In Colab
# it installs annotated_ssm (the release these outputs were made with, or the branch while
# that release is not tagged) and upgrades what is too old, but never changes jax or jaxlib
# (Colab's are built for its GPU); it prints one line of what pip changed (pip's own output
# only if it fails). To install from another repository (a fork, a clone), set
# ANNOTATED_SSM_REPOSITORY to its git URL or local path first, e.g.
# %env ANNOTATED_SSM_REPOSITORY=https://github.com/you/annotated-ssm
import importlib.metadata
import os
import pathlib
import re
import subprocess
import sys
import tempfile

VERSION = "@VERSION@"
REPOSITORY = os.environ.get("ANNOTATED_SSM_REPOSITORY") or (
    "@REPOSITORY@")
BRANCH = "@BRANCH@"
ISSUES = "@ISSUES@"
FLOORS = @FLOORS@
IN_COLAB = "google.colab" in sys.modules
RESTART = "Runtime > Restart session" if IN_COLAB else "restart the kernel"


class SetupError(Exception):
    """Jupyter and Colab show only its message, no traceback: what went wrong and the fix."""

    def _render_traceback_(self):
        return [str(self)]


def installed(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def older(found, floor):
    return [int(n) for n in re.findall(r"\d+", found)[:3]] < [int(n) for n in floor.split(".")]


def run(command):
    """git or pip, and their output (stdout and stderr together); git never asks for a
    password."""
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except OSError as error:
        raise SetupError(f"Cannot run {command[0]} ({error}): install it, then run this cell "
                         "again.") from None
    said = list(process.stdout)
    return subprocess.CompletedProcess(command, process.wait(), "".join(said))


def versions():
    """Every installed distribution's version, by lower-case name (the first on the path,
    which is the one imported)."""
    importlib.invalidate_caches()
    found = {}
    for d in importlib.metadata.distributions():
        found.setdefault((d.metadata["Name"] or "").lower(), d.version)
    return found


def pip_url(repository):
    """The repository as pip's git URL needs it: a local path becomes file://localhost/…
    (the pip of Python 3.11's venv, 23.2, refuses file:/// with an empty host)."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", repository) or not os.path.exists(repository):
        return repository
    return "file://localhost" + pathlib.Path(repository).resolve().as_uri()[len("file://"):]


def install():
    """pip install the release (or the branch if it is not tagged), keeping jax as it is."""
    tag = f"v{VERSION}"
    found = run(["git", "ls-remote", "--tags", REPOSITORY, f"refs/tags/{tag}"])
    if found.returncode != 0:
        said = found.stdout.strip().splitlines() or ["no answer"]
        reason = next((line for line in said if line.startswith("fatal:")), said[0])
        raise SetupError(f"Cannot read {REPOSITORY} ({reason}): check the internet connection "
                         "(or ANNOTATED_SSM_REPOSITORY), then run this cell again.")
    if f"refs/tags/{tag}" in found.stdout:
        ref = tag
        print(f"installing annotated-ssm {tag}, the release these outputs were made with")
    else:
        ref = BRANCH
        print(f"installing annotated-ssm from branch {BRANCH} (no tag {tag}: "
              "the code may be newer than these outputs)")
    # pip may not change jax, jaxlib or jax's CUDA plugins: it picks flax, optax, ... to fit.
    names = {d.metadata["Name"] or "" for d in importlib.metadata.distributions()}
    keep = sorted(f"{name}=={installed(name)}" for name in names
                  if re.fullmatch(r"jax(lib|[-_.]cuda\d+[-_.](plugin|pjrt))?", name.lower()))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as constraints:
        constraints.write("".join(line + "\n" for line in keep))
    before = versions()
    pip = run([sys.executable, "-m", "pip", "install", "-c", constraints.name,
               f"annotated-ssm[book] @ git+{pip_url(REPOSITORY)}@{ref}"])
    if pip.returncode == 0:  # a summary, not pip's log (mostly "Requirement already satisfied")
        after = versions()
        changed = sorted(f"{name} {before[name]} -> {after[name]}" for name in after
                         if name in before and before[name] != after[name])
        added = sorted(f"{name} {after[name]}" for name in after if name not in before)
        print(f"pip installed annotated-ssm {after.get('annotated-ssm', '?')}; upgraded: "
              + (", ".join(changed) or "nothing") + f"; added {len(added)} package(s)"
              + (": " + ", ".join(added[:12]) + (", …" if len(added) > 12 else "")
                 if added else ""))
    else:  # pip's reason: the end of its output, without what was already in place
        said = [line for line in pip.stdout.splitlines()
                if not line.startswith("Requirement already satisfied")]
        print("\n".join(said[-40:]))
        raise SetupError(f"pip could not install annotated-ssm {ref} next to jax "
                         f"{installed('jax')} (pip's reason is above): after a network error "
                         f"run this cell again, otherwise report the reason at {ISSUES}.")


too_old = {p: installed(p) for p in FLOORS if installed(p) and older(installed(p), FLOORS[p])}
if "jax" in too_old:  # replacing it would drop Colab's CUDA build: the reader decides
    raise SetupError(
        f"jax {too_old['jax']} is older than {FLOORS['jax']}, the oldest this book runs with, "
        f"and this cell never replaces jax: run %pip install -U \"jax[cuda12]>={FLOORS['jax']}\""
        f" (NVIDIA GPU) or %pip install -U \"jax>={FLOORS['jax']}\" (CPU) in a new cell, then "
        f"{RESTART} and run this cell again.")
if IN_COLAB and (too_old or installed("annotated-ssm") != VERSION):
    install()  # pip keeps what satisfies the floors and upgrades what is too old
    imported = [p for p in too_old if p.split("-")[0] in sys.modules]
    if imported:
        raise SetupError(f"Upgraded {', '.join(imported)}, which this session had already "
                         f"imported: {RESTART} and run this cell again.")
elif installed("annotated-ssm") is None:
    raise SetupError(f"annotated_ssm is not installed: run %pip install \"annotated-ssm[book] "
                     f"@ git+{REPOSITORY}\" (or pip install -e \".[book]\" in a clone of it), "
                     "then run this cell again.")
elif too_old:
    raise SetupError(
        "Too old for this book: " + ", ".join(f"{p} {v}" for p, v in too_old.items())
        + ": run %pip install -U " + " ".join(f'"{p}>={FLOORS[p]}"' for p in too_old)
        + f", then {RESTART} and run this cell again.")
if IN_COLAB:  # every time: widgets need Colab's custom widget manager
    from google.colab import output

    output.enable_custom_widget_manager()

import jax

import annotated_ssm

print(f"annotated_ssm {annotated_ssm.__version__} | JAX {jax.__version__} | "
      f"backend: {jax.default_backend()} | devices: {jax.devices()}")'''.lstrip()

TAG = "hide-input"
# The website shows the cell's input collapsed and not its output (versions and devices,
# nothing the reader needs on a chapter's first screen).
OUTPUT_TAG = "remove-output"
# Colab collapses the cell to its #@title line when it is a form.
CELL_VIEW = "form"
# nbval does not compare this cell's output: versions and devices differ between machines.
NBVAL_TAG = "nbval-ignore-output"
NBVAL_REASON = "versions and devices differ from machine to machine."


def repository_setting(key: str) -> str:
    """``repository: <key>:`` in _config.yml (``url`` or ``branch``; no YAML dependency)."""
    text = (ROOT / "_config.yml").read_text()
    block = re.search(r"^repository:[ \t]*\n((?:[ \t]+.*\n?)+)", text, flags=re.MULTILINE)
    match = block and re.search(rf"^\s+{key}:\s*(\S+)", block.group(1), flags=re.MULTILINE)
    if not match:
        raise SystemExit(f"_config.yml has no `repository: {key}:` entry")
    return match.group(1)


def issues_url() -> str:
    """Where readers report problems (``repository: issues:``; not derived from the
    repository's address, which may be a fork, a path or end in .git)."""
    return repository_setting("issues")


def repository_url() -> str:
    """The repository's address, shared with the website's launch buttons."""
    return repository_setting("url")


def branch() -> str:
    """The branch the cell installs while the release ``v<version>`` is not tagged."""
    return repository_setting("branch")


def version() -> str:
    """The package version in pyproject.toml; its release is tagged ``v<version>``."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def setup_cell_source() -> str:
    table = floors()
    checked = {name: table[name] for name in CHECKED}
    facts = {"VERSION": version(), "REPOSITORY": repository_url(), "BRANCH": branch(),
             "ISSUES": issues_url(),
             "FLOORS": wrapped_dict(checked, indent=len("FLOORS = {"))}
    source = TEMPLATE
    for name, value in facts.items():
        source = source.replace(f"@{name}@", value)
    return source


def wrapped_dict(table: dict[str, str], indent: int, width: int = 92) -> str:
    """``{"a": "1", ...}`` as Python source, broken into lines of at most ``width``."""
    items = [f"{json.dumps(key)}: {json.dumps(value)}" for key, value in table.items()]
    lines, line = [], ""
    for item in items:
        if line and indent + len(line) + len(item) + 2 > width:
            lines.append(line + ",")
            line = ""
        line = f"{line}, {item}" if line else item
    lines.append(line)
    return "{" + ("\n" + " " * indent).join(lines) + "}"


def is_current(cell: dict, source: str) -> bool:
    """The cell holds ``source``, is collapsed on the website (its output hidden), a form in
    Colab, and skipped by nbval's check."""
    tags = cell["metadata"].get("tags", [])
    return ("".join(cell["source"]) == source
            and all(tag in tags for tag in (TAG, OUTPUT_TAG, NBVAL_TAG))
            and cell["metadata"].get("cellView") == CELL_VIEW)


def is_setup_cell(cell: dict) -> bool:
    """The first code cell is a setup cell (this one, or one written before it was a form)."""
    return "".join(cell["source"]).startswith(("#@title Setup", "# Setup:"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--check", action="store_true",
                        help="only report chapters whose first cell differs")
    parser.add_argument("--print", action="store_true", help="print the cell and exit")
    args = parser.parse_args(argv)
    source = setup_cell_source()
    if args.print:
        print(source)
        return 0
    stale = []
    for path in args.notebooks:
        notebook = nbformat.read(path, as_version=4)
        first = next((c for c in notebook.cells if c.cell_type == "code"), None)
        if first is not None and is_current(first, source):
            continue
        stale.append(path)
        if args.check:
            continue
        if first is None or not is_setup_cell(first):
            raise SystemExit(f"{path}: the first code cell is not a setup cell; "
                             "add one starting with '#@title Setup'")
        first["source"] = source
        # Collapsed on the website (the reader wants the chapter, not the install logic), its
        # output hidden there, and collapsed to its title in Colab.
        tags = set(first["metadata"].get("tags", [])) | {TAG, OUTPUT_TAG, NBVAL_TAG}
        first["metadata"]["tags"] = sorted(tags)
        first["metadata"]["cellView"] = CELL_VIEW
        first["metadata"]["nbval_reason"] = NBVAL_REASON
        nbformat.write(notebook, path)
        print(f"updated {path}")
    if args.check and stale:
        print("first cell differs from tools/setup_cell.py in: " + ", ".join(map(str, stale)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
