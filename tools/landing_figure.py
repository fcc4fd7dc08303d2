"""Draw the landing page's figure, book/figures/landing.png (committed; shown by book/intro.md).

It is Figure 3 of the S4D paper as chapter 6 (book/06_s4d.ipynb) computes it, with the same
functions, ``annotated_ssm.book.explorer_numerics.figure3_data`` and
``annotated_ssm.book.plotting.figure3``: the first four basis functions of S4-LegS in closed
form, and those of S4D-LegS (its diagonal, no low-rank term) at two state sizes and with two
discretisations. Run it again after changing either function:

    .venv/bin/python tools/landing_figure.py            # writes book/figures/landing.png
    .venv/bin/python tools/landing_figure.py --check    # exit 1 if the stored PNG differs

The PNG is written without a timestamp or software version, so the same code gives the same
bytes on the same matplotlib and fonts.
"""

from __future__ import annotations

import argparse
import io
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET = ROOT / "book" / "figures" / "landing.png"
MAX_BYTES = 150_000  # the landing page loads it first: keep it small


def render() -> bytes:
    """The figure as PNG bytes (the chapter's figure, cropped the way the notebook stores it)."""
    import matplotlib.pyplot as plt

    from annotated_ssm.book import plotting
    from annotated_ssm.book.explorer_numerics import figure3_data

    figure = plotting.figure3(*figure3_data())
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", pad_inches=0.1,
                   metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="compare with the stored PNG instead of writing it")
    args = parser.parse_args(argv)
    png = render()
    if len(png) > MAX_BYTES:
        raise SystemExit(f"the figure is {len(png)} bytes, more than {MAX_BYTES}")
    if args.check:
        same = TARGET.exists() and TARGET.read_bytes() == png
        print(f"{TARGET.relative_to(ROOT)}: " + ("up to date" if same else "differs from the code"))
        return 0 if same else 1
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_bytes(png)
    print(f"wrote {TARGET.relative_to(ROOT)} ({len(png) // 1000} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
