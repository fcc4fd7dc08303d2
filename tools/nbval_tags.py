"""Turn nbval comment markers in code cells into cell tags, so readers never see them.

nbval reads ``# NBVAL_IGNORE_OUTPUT`` (and ``NBVAL_SKIP``, ...) from a cell's source, or the
equivalent tags ``nbval-ignore-output`` (``nbval-skip``, ...) from its metadata. The book uses
the tags. The reason an output is not compared belongs to maintainers: it lives in the cell's
metadata as ``nbval_reason`` (the website and Colab do not show it), and a comment line
``# (nbval: reason)`` right after the marker is moved there.

    python tools/nbval_tags.py book/*.ipynb   # rewrite in place; stored outputs are kept

The setup cell (the first code cell) is left alone: tools/setup_cell.py writes it.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

import nbformat

MARKER = re.compile(r"^\s*#\s*NBVAL_([A-Z_]+)\s*$")
REASON = re.compile(r"^\s*#\s*\(nbval:\s*(.*?)\)\s*$")


def convert_cell(cell: dict) -> bool:
    """Move markers and reasons out of ``cell['source']`` into its metadata; True if changed."""
    lines = "".join(cell["source"]).splitlines(keepends=True)
    kept, tags, reasons = [], [], []
    for line in lines:
        if (marker := MARKER.match(line)) is not None:
            tags.append("nbval-" + marker.group(1).lower().replace("_", "-"))
        elif tags and (reason := REASON.match(line)) is not None:
            reasons.append(reason.group(1))
        else:
            kept.append(line)
    if not tags:
        return False
    if kept:
        kept[-1] = kept[-1].rstrip("\n")
    cell["source"] = "".join(kept)
    metadata = cell["metadata"]
    metadata["tags"] = sorted(set(metadata.get("tags", [])) | set(tags))
    if reasons:
        metadata["nbval_reason"] = " ".join(reasons)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    args = parser.parse_args(argv)
    for path in args.notebooks:
        notebook = nbformat.read(path, as_version=4)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        changed = [convert_cell(cell) for cell in code[1:]]  # code[0]: the setup cell
        if any(changed):
            nbformat.write(notebook, path)
            print(f"{path}: {sum(changed)} cells now tagged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
