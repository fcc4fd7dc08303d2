"""The oldest versions the package declares it works with, read from pyproject.toml.

pyproject.toml is the one place the floors live. ``make test`` installs exactly these
(``--pins``) into a second environment, .venv-floors, and runs the package tests there, so
a floor is a version that was tested. tools/setup_cell.py writes them into every chapter's
setup cell, which compares them with what Colab has installed.

    python tools/floors.py           # name and floor, one a line
    python tools/floors.py --pins    # requirement specifiers for the floors environment
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Pinned to their floor in .venv-floors; everything else gets the newest allowed version.
PINNED = ("jax", "flax", "optax", "ipywidgets")


def requirements() -> list[str]:
    """The core dependencies and the `book` extra, as written in pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["book"]]


def floors() -> dict[str, str]:
    """Distribution name -> lowest allowed version, for every requirement with a ``>=``."""
    found = {}
    for text in requirements():
        requirement = Requirement(text)
        lowest = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if len(lowest) != 1:
            raise ValueError(f"pyproject.toml: requirement {text!r} has no single `>=` floor")
        found[canonicalize_name(requirement.name)] = lowest[0]
    return found


def pins() -> list[str]:
    """What .venv-floors installs: the PINNED packages at their floor, the rest as declared."""
    table = floors()
    missing = [name for name in PINNED if name not in table]
    if missing:
        raise ValueError(f"pyproject.toml declares no floor for {missing}")
    pinned = [f"{name}=={table[name]}" for name in PINNED]
    # jaxlib moves in lockstep with jax; pin it too, or pip picks the newest compatible one.
    pinned.append(f"jaxlib=={table['jax']}")
    rest = [r for r in requirements() if canonicalize_name(Requirement(r).name) not in PINNED]
    return pinned + rest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pins", action="store_true", help="requirements for .venv-floors")
    args = parser.parse_args(argv)
    if args.pins:
        print("\n".join(pins()))
    else:
        print("\n".join(f"{name} {version}" for name, version in floors().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
