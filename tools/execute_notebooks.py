"""Re-execute chapters in place so the outputs stored in them are fresh (``make execute``).

Each chapter's wall time is printed, so the "under 2 minutes on CI" budget can be checked.
No widget state is stored: nothing reads it (the website shows the PNG each explorer puts
in its display bundle; Jupyter and Colab rebuild the widgets when the cells run), and it
added 90-190 KB to every page with an explorer.

    python tools/execute_notebooks.py book/*.ipynb
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient


def execute(path: pathlib.Path, timeout: int) -> float:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    notebook.metadata.pop("widgets", None)  # state stored by an earlier run or by Jupyter
    nbformat.write(notebook, path)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    parser.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell")
    args = parser.parse_args(argv)
    for path in args.notebooks:
        elapsed = execute(path, args.timeout)
        print(f"{path}: executed in {elapsed:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
