"""The first cell of every chapter, kept identical everywhere.

The cell is generated from the repository address in ``_config.yml`` (the one place it
lives), so the website's launch buttons and the Colab install can never disagree.

    python tools/setup_cell.py book/*.ipynb          # write the cell into each chapter
    python tools/setup_cell.py --check book/*.ipynb  # exit 1 if a chapter's cell differs
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

TEMPLATE = '''\
# Setup: makes this chapter run anywhere. In Colab it installs annotated_ssm and only the
# requirements Colab lacks, so Colab's CUDA-enabled jax/jaxlib stay in place (a plain
# `pip install -r requirements.txt` would swap them for the CPU build). Elsewhere it
# installs nothing and only reports the JAX backend.
# NBVAL_IGNORE_OUTPUT
# (nbval: versions and devices differ from machine to machine.)
import importlib.util
import subprocess
import sys

REPOSITORY = "{repository}"
if importlib.util.find_spec("annotated_ssm") is None:
    if importlib.util.find_spec("google") is None or importlib.util.find_spec("google.colab") is None:
        raise ModuleNotFoundError(
            f"annotated_ssm is not installed. Clone {{REPOSITORY}} and run `make book` or "
            "`pip install -e .` in the clone, then start this notebook from that environment."
        )
    needed = {{"flax": "flax", "optax": "optax", "orbax.checkpoint": "orbax-checkpoint",
              "ipywidgets": "ipywidgets", "tqdm": "tqdm", "sklearn": "scikit-learn",
              "mnist1d": "mnist1d"}}
    missing = [package for module, package in needed.items() if importlib.util.find_spec(module) is None]
    if missing:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *missing])
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--no-deps", f"git+{{REPOSITORY}}"])
    importlib.invalidate_caches()
    from google.colab import output

    output.enable_custom_widget_manager()

import jax

print(f"JAX {{jax.__version__}} | backend: {{jax.default_backend()}} | devices: {{jax.devices()}}")'''


TAG = "hide-input"


def repository_url() -> str:
    """Read ``repository: url:`` from _config.yml (no YAML dependency needed)."""
    text = (ROOT / "_config.yml").read_text()
    match = re.search(r"^repository:\s*\n\s+url:\s*(\S+)", text, flags=re.MULTILINE)
    if match is None:
        raise SystemExit("_config.yml has no `repository: url:` entry")
    return match.group(1)


def setup_cell_source() -> str:
    return TEMPLATE.format(repository=repository_url())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    parser.add_argument("--check", action="store_true", help="only report chapters whose first cell differs")
    args = parser.parse_args(argv)
    source = setup_cell_source()
    stale = []
    for path in args.notebooks:
        notebook = json.loads(path.read_text())
        first = next((c for c in notebook["cells"] if c["cell_type"] == "code"), None)
        if first is not None and "".join(first["source"]) == source and TAG in first["metadata"].get("tags", []):
            continue
        stale.append(path)
        if args.check:
            continue
        if first is None or not "".join(first["source"]).startswith("# Setup:"):
            raise SystemExit(f"{path}: the first code cell is not a setup cell; add one starting with '# Setup:'")
        first["source"] = source.splitlines(keepends=True)
        # Collapsed on the website (the reader wants the chapter, not the install logic).
        first["metadata"]["tags"] = sorted(set(first["metadata"].get("tags", [])) | {TAG})
        path.write_text(json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n")
        print(f"updated {path}")
    if args.check and stale:
        print("first cell differs from tools/setup_cell.py in: " + ", ".join(map(str, stale)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
