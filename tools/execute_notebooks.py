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
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = merged_streams(cell.outputs)
    nbformat.write(notebook, path)
    return elapsed


def merged_streams(outputs: list) -> list:
    """Consecutive prints to the same stream as one output: how the kernel split them into
    messages depends on timing, so unmerged they change from one run to the next."""
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (output.output_type == "stream" and previous is not None
                and previous.output_type == "stream" and previous.name == output.name):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


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
