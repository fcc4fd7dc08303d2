"""The website's Sphinx extensions (tools/sphinx_ext/) on small inputs: the docstring
rewriting of the API reference, the search's text-only pages, the explorer frames written to
files. The whole site is checked in a browser by tools/check_site.py (`make check-site`)."""

import base64
import html
import importlib.util
import json
import pathlib

from docutils import nodes

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load(name):
    path = ROOT / "tools" / "sphinx_ext" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


api_docstrings, search_excerpts, site_weight = (
    _load(name) for name in ("api_docstrings", "search_excerpts", "site_weight"))


def test_an_indented_table_becomes_a_literal_block_and_bars_are_escaped():
    lines = ["Modules, in order:",
             "    ssm      continuous time",
             "             (two lines)",
             "    hippo    |x| stays as written here",
             "",
             "The error is |z| and ``|z|`` stays literal."]
    assert api_docstrings.rewrite(lines) == [
        "Modules, in order:", "", "::", "",
        "    ssm      continuous time",
        "             (two lines)",
        "    hippo    |x| stays as written here",
        "",
        r"The error is \|z\| and ``|z|`` stays literal."]


def test_google_sections_and_list_continuations_are_left_to_napoleon():
    lines = ["Summary.", "", "- an item that goes on", "  on its next line", "",
             "Args:", "    x: the input,", "        shape (L,)", "    eps: |x| below it"]
    out = api_docstrings.rewrite(lines)
    assert "::" not in out
    assert out[-1] == r"    eps: \|x\| below it" and out[:8] == lines[:8]


def test_search_text_keeps_sections_and_drops_hidden_code_raw_html_and_images():
    document = nodes.document(None, None)
    section = nodes.section(ids=["woodbury"])
    section += nodes.title(text="Woodbury")
    section += nodes.paragraph(text="The identity <inverts> it.")
    hidden = nodes.container(classes=["cell", "tag_hide-input"])
    hidden += nodes.container("", nodes.literal_block(text="pip install secret"),
                              classes=["cell_input"])
    shown = nodes.container(classes=["cell"])
    shown += nodes.container("", nodes.literal_block(text="kernel = f()"), classes=["cell_input"])
    section += [hidden, shown, nodes.raw(text="<img src='data:...'>", format="html"),
                nodes.image(uri="x.png")]
    document += section
    text = search_excerpts._html(document)
    assert text.startswith('<section id="woodbury">')
    assert "The identity &lt;inverts&gt; it." in text and "kernel = f()" in text
    assert "secret" not in text and "data:" not in text and "x.png" not in text


def test_explorer_frames_become_files_named_by_content(tmp_path):
    png = b"\x89PNG fake frame"
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    data = {"sizes": [2], "frames": [0, 1], "images": [url, url]}
    body = (f'<div class="annotated-ssm-explorer" data-explorer="{html.escape(json.dumps(data))}">'
            f'<img src="{url}"></div>')
    out = site_weight.frames_to_files(body, tmp_path, lambda path: "../" + path)
    files = list((tmp_path / "_images" / "explorer").iterdir())
    assert len(files) == 1 and files[0].read_bytes() == png  # one file per distinct image
    assert "data:" not in out
    stored = json.loads(html.unescape(out.split('data-explorer="')[1].split('"')[0]))
    assert stored["images"] == [f"../_images/explorer/{files[0].name}"] * 2
    assert f'<img src="../_images/explorer/{files[0].name}">' in out
