"""The oldest versions the package declares it works with, read from pyproject.toml.

pyproject.toml is the one place the floors live. ``make floors`` installs every one of them
at once into a second environment, .venv-floors (uv's ``--resolution lowest-direct``), and
``make test`` runs the chapters and the package tests there, so a floor is a version that
was tested. uv quietly installs a newer version where a floor cannot be installed with the
others (numpy 1.26 next to jax 0.8.0, which needs numpy>=2.0), so ``--check`` then reads
what went in and fails on any package above its floor: the floor is not true, raise it.
tools/setup_cell.py writes the floors into every chapter's setup cell, which compares them
with what Colab has installed.

    python tools/floors.py           # name and floor, one a line
    .venv-floors/bin/python tools/floors.py --check   # exit 1 unless installed == floors
"""

from __future__ import annotations

import argparse
import importlib.metadata
import pathlib
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def untrue_floors() -> list[str]:
    """One line per declared package whose installed version is not its floor."""
    problems = []
    for name, floor in floors().items():
        try:
            found = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{name}: not installed (floor {floor})")
            continue
        if Version(found) != Version(floor):
            problems.append(f"{name}: {found} installed, pyproject.toml declares >={floor}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless this environment holds every floor exactly")
    args = parser.parse_args(argv)
    if not args.check:
        print("\n".join(f"{name} {version}" for name, version in floors().items()))
        return 0
    problems = untrue_floors()
    if problems:
        print("Not at the floors pyproject.toml declares (a floor that cannot be installed "
              "with the others: raise it to the version installed, in requirements.txt too, "
              "and run tools/setup_cell.py on the chapters):\n  " + "\n  ".join(problems))
        return 1
    print(f"at the declared floors: {len(floors())} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
