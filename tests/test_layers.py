"""The package's stages import only themselves, earlier stages and the base.

measure -> network -> model -> solve -> apply, then the CLI and the testbed.
Every import of a ``rankopt`` module is read from the source (top-level and
lazy imports inside functions alike; ``if TYPE_CHECKING:`` blocks are not run
and are skipped), each module is given its stage, and an import of a later
stage is a violation. A violation fails unless it is listed in ``KNOWN``
with its reason, and a listed one that is gone fails too (remove it from the
list); import circles between modules are checked the same way
(``KNOWN_CYCLES``). Both lists are empty: no stage imports a later one and no
two modules import each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "rankopt"

#: The order of the stages; a module may import its own stage and earlier ones.
ORDER = ("base", "measure", "network", "model", "solve", "apply", "entry")

#: Stage of a module, by the longest matching prefix of its dotted name.
STAGE_OF = {
    # the base every stage may import
    "rankopt.errors": "base",
    "rankopt._validation": "base",
    "rankopt._files": "base",
    "rankopt._limits": "base",
    "rankopt._rng": "base",
    "rankopt.order": "base",
    "rankopt._build_check": "base",
    "rankopt.units": "base",
    "rankopt._progress": "base",
    "rankopt._linkage": "base",
    # measure
    "rankopt.probe": "measure",
    # network
    "rankopt.network": "network",
    # model: the cost models and the engines whose algorithm choice they price
    "rankopt.models": "model",
    "rankopt.engines": "model",
    # solve
    "rankopt.solvers": "solve",
    # apply; the model and solver options shared by the launchers and the CLI
    "rankopt.adapters": "apply",
    "rankopt._model_args": "apply",
    # entry points and consumers of every stage: the facade, the ``python -m``
    # modules, the CLI, the testbed and the plots
    "rankopt.cli": "entry",
    "rankopt.testbed": "entry",
    "rankopt.plot": "entry",
    "rankopt": "entry",
    "rankopt.__main__": "entry",
    "rankopt.mpi": "entry",
    "rankopt.run": "entry",
}

#: (importer, imported) pairs allowed to cross the order, with the reason (none).
KNOWN: dict[tuple[str, str], str] = {}

#: Import circles between modules allowed, with the reason (none).
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST, module: str, is_pkg: bool) -> list[str]:
    """Every dotted name the module imports, lazy imports included."""
    names: list[str] = []
    package = module if is_pkg else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # ``from pkg import name``: the submodule pkg.name if there is one, else pkg
            names.extend(f"{source}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, (path, is_pkg) in modules.items():
        edges = set()
        for name in _imported(ast.parse(path.read_text()), module, is_pkg):
            if name != "rankopt" and not name.startswith("rankopt."):
                continue
            # the module itself, or the package it names a member of
            while name not in modules:
                name = name.rpartition(".")[0]
            edges.add(name)
        edges.discard(module)
        graph[module] = edges
    return graph


def _stage(module: str) -> str:
    name = module
    while name not in STAGE_OF:
        name = name.rpartition(".")[0]
        assert name, f"{module} has no stage in STAGE_OF"
    return STAGE_OF[name]


def test_every_module_has_a_stage():
    for module in _modules():
        assert _stage(module) in ORDER


def test_stages_import_only_earlier_stages():
    graph = _graph()
    found = {
        (a, b)
        for a, targets in graph.items()
        for b in targets
        if ORDER.index(_stage(b)) > ORDER.index(_stage(a))
    }
    new = sorted(found - KNOWN.keys())
    fixed = sorted(KNOWN.keys() - found)
    assert not new, f"imports of a later stage: {new}"
    assert not fixed, f"fixed, remove from KNOWN: {fixed}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_between_modules():
    found = {tuple(c) for c in _cycles(_graph())}
    new = sorted(found - KNOWN_CYCLES.keys())
    fixed = sorted(KNOWN_CYCLES.keys() - found)
    assert not new, f"import circles: {new}"
    assert not fixed, f"fixed, remove from KNOWN_CYCLES: {fixed}"


def test_no_import_circles_between_stages():
    graph = _graph()
    stage_graph: dict[str, set[str]] = {}
    for a, targets in graph.items():
        for b in targets:
            if (a, b) not in KNOWN and _stage(a) != _stage(b):
                stage_graph.setdefault(_stage(a), set()).add(_stage(b))
    assert _cycles(stage_graph) == []


#: Library modules allowed to print, with the reason.
PRINTS: dict[str, str] = {}


def _prints(tree: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
        for node in ast.walk(tree)
    )


def test_only_entry_points_print():
    """The stages report through return values and ``logging``; printing is the CLI's."""
    found = {
        module
        for module, (path, _) in _modules().items()
        if _stage(module) != "entry" and _prints(ast.parse(path.read_text()))
    }
    assert found == PRINTS.keys(), sorted(found ^ PRINTS.keys())


def test_print_finder_finds_a_print():
    assert _prints(ast.parse("def f():\n    print('x')\n"))
    assert not _prints(ast.parse("def f():\n    logger.info('print')\n"))
