"""The package's two wings: the library (everything in annotated_ssm/ but annotated_ssm/book/)
never imports the book wing or the book's plotting and widget libraries, trains without them,
and its import graph has no cycle.

Run as a script to print the import graph's numbers (modules, imports, levels, cycles, the
largest module)::

    python tests/test_package_layout.py
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "annotated_ssm"
BOOK_WING = "annotated_ssm.book"
#: What only the book installs (the ``[book]`` extra): the library must not need them.
BOOK_LIBRARIES = ("matplotlib", "ipywidgets", "PIL")


def module_name(path: pathlib.Path) -> str:
    """``annotated_ssm/layers/s4.py`` -> ``annotated_ssm.layers.s4`` (a package's
    ``__init__.py`` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, pathlib.Path]:
    """Every module of the package, book wing included: name -> file."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def in_book_wing(name: str) -> bool:
    return name == BOOK_WING or name.startswith(BOOK_WING + ".")


def library_modules() -> dict[str, pathlib.Path]:
    return {name: path for name, path in package_modules().items() if not in_book_wing(name)}


def imported_names(name: str, path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of everything a module imports, at module level or inside
    functions: ``import a.b`` gives ``a.b``; ``from .x import y`` gives ``package.x.y`` (the
    caller decides whether that is a module or a name in ``package.x``). String arguments of
    ``importlib.import_module`` / ``__import__`` count too."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) == "import_module"
                   or getattr(node.func, "id", None) in ("import_module", "__import__"))):
            found.append((node.lineno, node.args[0].value))
    return found


def import_graph(modules: dict[str, pathlib.Path]) -> dict[str, set[str]]:
    """module -> the modules of ``modules`` it imports (each pair once). ``from p import x``
    is an edge to ``p.x`` when that is a module, else to ``p``."""
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        for _, target in imported_names(name, path):
            while target and target not in modules:  # a name inside a module: its module
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(components)


def levels(graph: dict[str, set[str]]) -> dict[str, int]:
    """Level 0: imports no module of the graph; otherwise 1 + the highest level it imports
    (the modules of a cycle share one level)."""
    component_of = {v: frozenset([v]) for v in graph}
    for component in cycles(graph):
        for v in component:
            component_of[v] = frozenset(component)
    level: dict[frozenset, int] = {}

    def level_of(component):
        if component not in level:
            below = {component_of[w] for v in component for w in graph[v]} - {component}
            level[component] = 1 + max(map(level_of, below), default=-1)
        return level[component]

    return {v: level_of(component_of[v]) for v in graph}


def report(modules: dict[str, pathlib.Path]) -> dict:
    graph = import_graph(modules)
    lines = {name: len(path.read_text(encoding="utf-8").splitlines())
             for name, path in modules.items()}
    largest = max(lines, key=lines.get)
    return {"modules": len(graph), "imports": sum(map(len, graph.values())),
            "levels": 1 + max(levels(graph).values()), "cycles": cycles(graph),
            "largest": (largest, lines[largest]), "lines": sum(lines.values())}


# --- the tests ----------------------------------------------------------------------------


def test_the_library_imports_neither_the_book_wing_nor_its_libraries():
    """Every import of every library module, at module level or inside a function."""
    offending = []
    for name, path in library_modules().items():
        for line, target in imported_names(name, path):
            if in_book_wing(target) or target.split(".")[0] in BOOK_LIBRARIES:
                offending.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not offending, "\n".join(offending)


def test_the_check_sees_an_offending_import(tmp_path):
    """The parser resolves relative imports, imports inside functions and import_module."""
    path = tmp_path / "module.py"
    path.write_text(textwrap.dedent("""
        from .book import widgets
        def f():
            from ..annotated_ssm.book.plotting import figure3
            import matplotlib.pyplot as plt
            return importlib.import_module("PIL.Image")
    """))
    assert [target for _, target in imported_names("annotated_ssm.x", path)] == [
        "annotated_ssm.book.widgets", "annotated_ssm.book.plotting.figure3",
        "matplotlib.pyplot", "PIL.Image"]


def test_the_book_wing_exists_and_imports_the_library():
    """The direction the other way is allowed and used: the explorers compute with the
    library (a wing that imported nothing from it would be a second copy)."""
    graph = import_graph(package_modules())
    book = {name for name in graph if in_book_wing(name)}
    assert {"annotated_ssm.book.plotting", "annotated_ssm.book.widgets",
            "annotated_ssm.book.compiled_memory"} <= book
    assert any(not in_book_wing(target) for name in book for target in graph[name])


# A core install has neither the book's libraries nor the book wing's dependencies: block
# them, import every library module, and train a small model for a few steps.
# BLOCK_IMPORTS (a str.format template: blocked=) makes the modules named in BLOCKED, and
# their submodules, fail to import, as if they were not installed.
BLOCK_IMPORTS = textwrap.dedent("""
    import sys

    BLOCKED = {blocked!r}

    class NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
""")
CORE_INSTALL = BLOCK_IMPORTS + textwrap.dedent("""
    import importlib

    for name in {modules!r}:
        importlib.import_module(name)

    import numpy as np
    from annotated_ssm.config import TrainConfig
    from annotated_ssm.data import Dataset
    from annotated_ssm.train import build_model, fit

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 16, 1)).astype(np.float32)
    y = (x[:, :8, 0].sum(axis=1) > 0).astype(np.int32)  # a label the sequence determines
    data = Dataset("sign", x[:48], y[:48], x[48:], y[48:], "classification", 2)
    model = build_model("s4d", data, d_model=8, n_layers=1, state_size=4)
    history = fit(model, data, TrainConfig(epochs=1, batch_size=8, max_steps=4, progress=False))
    assert history.steps[-1] == 4, history.steps
    assert np.isfinite(history.train_loss[-1]) and np.isfinite(history.test_loss)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED or m.startswith("{book}"))
    assert not loaded, loaded
    print("trained", history.steps[-1], "steps without", ", ".join(BLOCKED))
""")


def test_the_library_imports_and_trains_without_the_book():
    code = CORE_INSTALL.format(blocked=BOOK_LIBRARIES, modules=sorted(library_modules()),
                               book=BOOK_WING)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "trained 4 steps" in result.stdout


def test_the_library_import_graph_has_no_cycle():
    found = cycles(import_graph(library_modules()))
    assert not found, f"import cycles in the library: {found}"


def test_cycles_and_levels_of_a_known_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"b", "d"}, "d": set(), "e": {"a", "d"}}
    assert cycles(graph) == [["b", "c"]]
    assert levels(graph) == {"d": 0, "b": 1, "c": 1, "a": 2, "e": 3}


if __name__ == "__main__":
    for title, modules in (("library", library_modules()), ("package", package_modules())):
        numbers = report(modules)
        print(f"{title}: {numbers['modules']} modules, {numbers['imports']} imports, "
              f"{numbers['levels']} levels, cycles {numbers['cycles'] or 'none'}, "
              f"largest {numbers['largest'][0]} ({numbers['largest'][1]} lines), "
              f"{numbers['lines']} lines in all")
