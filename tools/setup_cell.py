"""The first cell of every chapter, kept identical everywhere.

The cell is generated, so the facts it needs live in one place each: the repository
address in ``_config.yml`` (shared with the website's launch buttons), the package version
in ``pyproject.toml`` (the cell installs the release ``v<version>``, the code the stored
outputs were made with) and the version floors in ``pyproject.toml`` (tools/floors.py; the
cell compares them with what is installed, upgrades flax, optax, ... in Colab, and stops
with the fix where an upgrade is not safe: jax, whose CUDA build Colab provides).

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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from floors import floors  # noqa: E402  (tools/ is not a package)

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The floors the cell checks: what a chapter imports. The rest come with the package.
CHECKED = ("jax", "flax", "optax", "orbax-checkpoint", "numpy", "matplotlib", "ipywidgets")

TEMPLATE = '''\
# Setup: makes this chapter run anywhere. It checks the installed versions against the
# oldest ones the book is tested with. In Colab it installs annotated_ssm (the release these
# outputs were made with) and upgrades what is too old, but never Colab's CUDA jax.
import importlib.metadata
import re
import subprocess
import sys

RELEASE = "{release}"
FLOORS = {floors}
IN_COLAB = "google.colab" in sys.modules


def installed(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def older(found, floor):
    return [int(n) for n in re.findall(r"\\d+", found)[:3]] < [int(n) for n in floor.split(".")]


too_old = {{p: installed(p) for p in FLOORS if installed(p) and older(installed(p), FLOORS[p])}}
if "jax" in too_old:  # replacing it would drop Colab's CUDA build: the reader decides
    raise RuntimeError(
        f"jax {{too_old['jax']}} is older than {{FLOORS['jax']}}. Upgrade it: "
        f"pip install -U 'jax[cuda12]>={{FLOORS['jax']}}' (NVIDIA GPU) or "
        f"'jax>={{FLOORS['jax']}}' (CPU), restart the kernel and run this cell again.")
if IN_COLAB and (too_old or installed("annotated-ssm") != RELEASE.rsplit("@v", 1)[1]):
    # pip keeps what satisfies the floors (Colab's jax) and upgrades what is too old.
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q",
                           f"annotated-ssm[book] @ {{RELEASE}}"])
    if any(p.replace("-", "_") in sys.modules for p in too_old):
        raise RuntimeError(f"Upgraded {{sorted(too_old)}}: Runtime > Restart session, run again.")
elif installed("annotated-ssm") is None:
    raise ModuleNotFoundError(f"annotated_ssm is not installed: pip install "
                              f"'annotated-ssm[book] @ {{RELEASE}}' (or `make` in a clone)")
elif too_old:
    raise RuntimeError("Too old for this book: " + ", ".join(
        f"{{p}} {{v}} (pip install -U '{{p}}>={{FLOORS[p]}}')" for p, v in too_old.items()))
if IN_COLAB:  # every time: widgets need Colab's custom widget manager
    from google.colab import output

    output.enable_custom_widget_manager()

import jax

import annotated_ssm

print(f"annotated_ssm {{annotated_ssm.__version__}} | JAX {{jax.__version__}} | "
      f"backend: {{jax.default_backend()}} | devices: {{jax.devices()}}")'''

TAG = "hide-input"
# nbval does not compare this cell's output: versions and devices differ between machines.
NBVAL_TAG = "nbval-ignore-output"
NBVAL_REASON = "versions and devices differ from machine to machine."


def repository_url() -> str:
    """Read ``repository: url:`` from _config.yml (no YAML dependency needed)."""
    text = (ROOT / "_config.yml").read_text()
    match = re.search(r"^repository:\s*\n\s+url:\s*(\S+)", text, flags=re.MULTILINE)
    if match is None:
        raise SystemExit("_config.yml has no `repository: url:` entry")
    return match.group(1)


def version() -> str:
    """The package version in pyproject.toml; its release is tagged ``v<version>``."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def setup_cell_source() -> str:
    table = floors()
    checked = {name: table[name] for name in CHECKED}
    return TEMPLATE.format(release=f"git+{repository_url()}@v{version()}",
                           floors=wrapped_dict(checked, indent=len("FLOORS = {")))


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
    """The cell holds ``source``, is collapsed on the website and skipped by nbval's check."""
    tags = cell["metadata"].get("tags", [])
    return "".join(cell["source"]) == source and TAG in tags and NBVAL_TAG in tags


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
        notebook = json.loads(path.read_text())
        first = next((c for c in notebook["cells"] if c["cell_type"] == "code"), None)
        if first is not None and is_current(first, source):
            continue
        stale.append(path)
        if args.check:
            continue
        if first is None or not "".join(first["source"]).startswith("# Setup:"):
            raise SystemExit(f"{path}: the first code cell is not a setup cell; "
                             "add one starting with '# Setup:'")
        first["source"] = source.splitlines(keepends=True)
        # Collapsed on the website (the reader wants the chapter, not the install logic).
        tags = set(first["metadata"].get("tags", [])) | {TAG, NBVAL_TAG}
        first["metadata"]["tags"] = sorted(tags)
        first["metadata"]["nbval_reason"] = NBVAL_REASON
        text = json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False)
        path.write_text(text + "\n")
        print(f"updated {path}")
    if args.check and stale:
        print("first cell differs from tools/setup_cell.py in: " + ", ".join(map(str, stale)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
