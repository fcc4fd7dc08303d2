"""Explorers that move on a static web page: precomputed frames and a few lines of JavaScript.

On the book's website there is no kernel, so an explorer's live widget cannot redraw. When a
chapter is executed, each explorer therefore also renders its figure for every point of a
small grid of its main controls (with the same drawing function as the live widget) and
stores the images, together with HTML sliders and drop-down lists that swap them, as the
``text/html`` form of its output. The page needs no server, no network and no library: the
images are ``data:`` URLs and the script is inline.

A control that changes nothing for some setting (θ for HiPPO-LegS, which has no window) is
shown disabled there, as the live widget disables it: the page's data lists, for every grid
point, which controls are disabled, and the script enables and disables them as the
reader moves the others.

This module only writes that HTML; :mod:`annotated_ssm.book.widgets` renders the frames. The
output is deterministic (same images, same bytes), and every image is a
``data:image/...;base64,`` string, which a test comparing outputs can mask with one regular
expression.
"""

from __future__ import annotations

import base64
import html
import json
import math
from typing import NamedTuple, Sequence

__all__ = ["StaticControl", "StaticFrames", "frame_index", "static_html"]


class StaticControl(NamedTuple):
    """One control of the static explorer.

    name: the keyword of the drawing function; label: what the reader sees; labels: the
    grid's values as text; default: index of the value shown first; slider: a range slider
    (numbers) rather than a drop-down list (names)."""

    name: str
    label: str
    labels: tuple[str, ...]
    default: int
    slider: bool


class StaticFrames(NamedTuple):
    """Everything a static explorer shows, for G grid points (``itertools.product`` order
    over the controls' values, see :func:`frame_index`).

    controls: the grid's controls; images: the distinct encoded images (identical frames
    stored once); frames: (G,) for every grid point, the index of its image in ``images``;
    disabled: (G,) for every grid point, the indices of the controls that change nothing
    there (shown disabled, e.g. θ for HiPPO-LegS)."""

    controls: list[StaticControl]
    images: list[bytes]
    frames: list[int]
    disabled: list[tuple[int, ...]]


def frame_index(controls: Sequence[StaticControl], indices: Sequence[int]) -> int:
    """Position of a grid point in the frame list: mixed radix, first control most significant
    (the order of ``itertools.product`` over the controls' values)."""
    index = 0
    for control, i in zip(controls, indices, strict=True):
        index = index * len(control.labels) + i
    return index


_SCRIPT = """(function () {
  var root = document.currentScript.previousElementSibling;
  var data = JSON.parse(root.getAttribute("data-explorer"));
  var img = root.querySelector("img");
  var inputs = root.querySelectorAll("[data-control]");
  function update() {
    var index = 0;
    for (var k = 0; k < inputs.length; k++) {
      var i = parseInt(inputs[k].value, 10);
      index = index * data.sizes[k] + i;
      var shown = root.querySelector("[data-value='" + k + "']");
      if (shown) { shown.textContent = data.labels[k][i]; }
    }
    img.src = data.images[data.frames[index]];
    img.setAttribute("data-frame", String(index));
    var idle = data.disabled ? data.disabled[index] : [];
    for (var k = 0; k < inputs.length; k++) {
      var off = idle.indexOf(k) >= 0;
      inputs[k].disabled = off;
      var label = inputs[k].closest("label");
      label.style.opacity = off ? "0.45" : "";
      label.title = off ? "%s" : "";
    }
  }
  for (var k = 0; k < inputs.length; k++) {
    inputs[k].addEventListener("input", update);
    inputs[k].addEventListener("change", update);
  }
})();"""
#: The tooltip of a disabled control.
IDLE_NOTE = "changes nothing for this setting"
_SCRIPT = _SCRIPT.replace("%s", IDLE_NOTE)


def static_html(title: str, controls: Sequence[StaticControl], images: Sequence[bytes],
                frames: Sequence[int], disabled: Sequence[Sequence[int]] | None = None, *,
                mime: str, fixed: Sequence[str] = (), alt: str = "") -> str:
    """The self-contained HTML of a static explorer.

    Args:
        title: shown above the controls.
        controls: the grid's controls, in the order of the frames (see :func:`frame_index`).
        images: the distinct encoded images (identical frames are stored once).
        frames: for every grid point, the index of its image in ``images``.
        disabled: for every grid point, the indices of the controls shown disabled there
            (they change nothing); None: every control is always enabled.
        mime: the images' type, e.g. "image/png".
        fixed: one line per control that the static page cannot move ("θ = 2"); the note
            under the figure then names the controls that move and those that stay fixed.
        alt: the image's alternative text.

    Returns:
        An HTML fragment: a ``div`` holding the controls, the default frame and the data,
        followed by the ``script`` that swaps frames.
    """
    sizes = [len(c.labels) for c in controls]
    expected = math.prod(sizes)
    if len(frames) != expected:
        raise ValueError(f"frames must hold one entry per grid point ({expected}); "
                         f"got {len(frames)}.")
    if any(not 0 <= f < len(images) for f in frames):
        raise ValueError(f"frames must index images (0 … {len(images) - 1}); "
                         f"got {sorted(set(frames))}.")
    disabled = [tuple(d) for d in disabled] if disabled is not None else [()] * expected
    if len(disabled) != expected or any(not 0 <= k < len(controls) for d in disabled for k in d):
        raise ValueError(f"disabled must hold, for each of the {expected} grid points, indices "
                         f"of controls (0 … {len(controls) - 1}); got {disabled!r:.200}.")
    encoded = [f"data:{mime};base64," + base64.b64encode(image).decode("ascii")
               for image in images]
    data = {"sizes": sizes, "labels": [list(c.labels) for c in controls],
            "frames": list(frames), "images": encoded}
    if any(disabled):  # explorers whose controls always act carry no list of empty lists
        data["disabled"] = [list(d) for d in disabled]
    default = frame_index(controls, [c.default for c in controls])
    rows = []
    for k, control in enumerate(controls):
        label = html.escape(control.label)
        # The default frame's disabled controls are written disabled: the page is right
        # before its script runs (the script sets the state again at every move).
        off = k in disabled[default]
        state = " disabled" if off else ""
        # Touch targets of at least 32 px: the label, the slider (also wide enough to hit
        # each of its stops) and the drop-down list.
        style = ("white-space:nowrap;display:inline-flex;align-items:center;gap:0.4em;"
                 "min-height:32px" + (";opacity:0.45" if off else ""))
        tip = f' title="{IDLE_NOTE}"' if off else ""
        if control.slider:
            value = html.escape(control.labels[control.default])
            rows.append(
                f'<label style="{style}"{tip}>{label} <input type="range" data-control="{k}" '
                f'min="0" max="{len(control.labels) - 1}" step="1" value="{control.default}" '
                f'aria-label="{label}" style="width:12em;height:32px;vertical-align:middle"{state}> '
                f'<span data-value="{k}">{value}</span></label>')
        else:
            options = "".join(
                f'<option value="{i}"{" selected" if i == control.default else ""}>'
                f"{html.escape(text)}</option>" for i, text in enumerate(control.labels))
            rows.append(f'<label style="{style}"{tip}>{label} '
                        f'<select data-control="{k}" style="min-height:32px"{state}>{options}</select></label>')
    note = "Precomputed on a grid of values; run the notebook to move every control freely."
    if fixed:
        # Say what this page cannot do: the text around an explorer may invite moves of the
        # live widget's controls that the static page leaves out.
        def listed(items):
            items = list(items)
            return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]

        note = (f"On this page only {listed(c.label for c in controls)} move, over frames "
                f"precomputed on a grid; {listed(fixed)} stay fixed. Run the notebook to "
                "change those and to move every control freely.")
    attribute = html.escape(json.dumps(data, separators=(",", ":")), quote=True)
    return (
        f'<div class="annotated-ssm-explorer" data-explorer="{attribute}" '
        'style="max-width:100%;font-family:sans-serif;font-size:14px;line-height:1.6">'
        f"<div><strong>{html.escape(title)}</strong></div>"
        '<div style="display:flex;flex-wrap:wrap;gap:2px 18px;align-items:center">'
        + "".join(rows) + "</div>"
        f'<img src="{encoded[frames[default]]}" data-frame="{default}" alt="{html.escape(alt)}" '
        'style="max-width:100%;height:auto;display:block">'
        f'<div style="font-size:12px;color:#666">{html.escape(note)}</div>'
        f"</div><script>{_SCRIPT}</script>"
    )
