"""The website's Sphinx extensions (tools/sphinx_ext/) on small inputs: the docstring
rewriting of the API reference, the search's text-only pages, the explorer frames written to
files. The whole site is checked in a browser by tools/check_site.py (`make check-site`)."""

import base64
import html
import importlib.util
import json
import pathlib
import unicodedata

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
             "    hippo    |x| stays as written here (``LAYERS``)",
             "",
             "The error is |z| and ``|z|`` stays literal."]
    assert api_docstrings.rewrite(lines) == [
        "Modules, in order:", "", "::", "",
        "    ssm      continuous time",
        "             (two lines)",
        "    hippo    |x| stays as written here (LAYERS)",
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
    assert "<pre>kernel = f()</pre>" in text  # code apart: an excerpt prefers the prose


def test_search_text_shows_formulas_as_their_plain_form_not_tex():
    def tex(source):  # compared in composed form (Ā is one character, C̃ two)
        return unicodedata.normalize("NFD", search_excerpts.tex_to_text(source))

    assert tex(r"\bar{\mathbf{A}}_n^{\,\ell}") == unicodedata.normalize("NFD", "Ā_n^ℓ")
    assert tex(r"\Delta t \cdot \lambda") == unicodedata.normalize("NFD", "Δt · λ")
    assert tex(r"\mathbf{A} = \Lambda - \mathbf{P}\mathbf{Q}^*") == unicodedata.normalize("NFD", "A = Λ - PQ^*")
    assert tex(r"2(\mathbf{I} - \tfrac\Delta2\mathbf{A})^{-1}") == unicodedata.normalize("NFD", "2(I - Δ/2A)^-1")
    assert tex(r"\frac{1}{N+1}\left(x\right)") == unicodedata.normalize("NFD", "1/(N+1)(x)")
    assert tex(r"\tilde{\mathbf{C}} \in \mathbb{C}^{N}") == unicodedata.normalize("NFD", "C̃ ∈ C^N")
    paragraph = nodes.paragraph()
    paragraph += [nodes.Text("the step "), nodes.math(text=r"\Delta"), nodes.Text(" is small")]
    document = nodes.document(None, None)
    document += paragraph
    assert search_excerpts._html(document).strip() == "the step Δ is small"
    block = nodes.math_block(text=r"\overline{\mathbf{A}} = e^{\Delta \mathbf{A}}")
    assert search_excerpts._html(block).strip() == "<p>Ā = e^ΔA</p>"


def test_search_weights_count_prose_words_not_code_or_formulas():
    document = nodes.document(None, None)
    document += nodes.paragraph(text="The bilinear rule. Bilinear again, and Cauchy once.")
    document += nodes.literal_block(text="bilinear(x); bilinear(y); woodbury()")
    paragraph = nodes.paragraph()
    paragraph += nodes.math(text=r"\mathbf{woodbury} \mathbf{woodbury}")
    document += paragraph
    lang = search_excerpts._language()
    words = [lang.stem(w.lower()) for text in search_excerpts._prose(document)
             for w in lang.split(text)]
    assert words.count(lang.stem("bilinear")) == 2
    assert lang.stem("woodbury") not in words and lang.stem("cauchy") in words


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


def test_the_header_lists_chapters_by_number_and_named_pages_by_label():
    from types import SimpleNamespace

    site_layout = _load("site_layout")
    titles = {"intro": "The book", "book/01_a": "1. Continuous time", "book/02_b": "2. HiPPO",
              "package": "Use the package", "bibliography": "Bibliography"}
    env = SimpleNamespace(
        config=SimpleNamespace(root_doc="intro"),
        toctree_includes={"intro": ["book/01_a", "book/02_b", "package", "bibliography"]},
        titles={name: nodes.title(text=title) for name, title in titles.items()})
    builder = SimpleNamespace(env=env, get_relative_uri=lambda page, doc: f"{doc}.html")
    app = SimpleNamespace(builder=builder, config=SimpleNamespace(
        book_header_labels={"intro": "Home", "package": "Package"}))
    assert site_layout.header_links(app, "book/02_b") == [
        ("Home", "The book", "intro.html", False),
        ("1", "1. Continuous time", "book/01_a.html", False),
        ("2", "2. HiPPO", "book/02_b.html", True),
        ("Package", "Use the package", "package.html", False)]  # no label: not listed
