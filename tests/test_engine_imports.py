"""No import circle inside ``engine/``: the graph of its module-level imports, read with ``ast``, has no cycle.

An edge ``a -> b`` is an import that runs when ``a`` is imported: a statement in the module body, wherever it sits
(the bottom of the file included), inside a module-level ``if``/``try``/``with`` or a class body. Imports inside a
function run later and are not edges; neither are those under ``if TYPE_CHECKING:``. ``from p import n`` is an edge
to ``p.n`` where that is a module of the engine, else to ``p``; ``import p.q`` is an edge to ``p.q``. A package's
``__init__`` is the module named by the package (``engine.ops``). On failure each circle is printed as a chain of
module names, each arrow with the line of the import.

The issue's two circles (the op core and the tracer; the allocator chokepoint and the CUDA pool) are also checked
with the imports inside functions counted: a deferred import hides a circle from Python, not from a reader.
"""
from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

from test_layering import _write  # writes a small tree of files under tmp_path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "engine"

Graph = dict[str, dict[str, int]]  # module -> {imported module: line of the first such import}


def _module_name(relative: Path) -> str:
    parts = relative.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _all_imports(body: list[ast.stmt]):
    """Every import statement, those inside functions included."""
    for statement in body:
        yield from (node for node in ast.walk(statement) if isinstance(node, (ast.Import, ast.ImportFrom)))


def _module_level_imports(body: list[ast.stmt]):
    """The import statements that run when the module runs: not those in function bodies or TYPE_CHECKING blocks."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, (ast.Try, ast.TryStar)):
            for block in (node.body, *(handler.body for handler in node.handlers), node.orelse, node.finalbody):
                yield from _module_level_imports(block)
        elif isinstance(node, (ast.With, ast.For, ast.While, ast.ClassDef)):
            yield from _module_level_imports(node.body)
            yield from _module_level_imports(getattr(node, "orelse", []))


def import_graph(root: Path, package: str = PACKAGE, deferred: bool = False) -> Graph:
    """Module-level import edges between the modules of ``root/package`` (``deferred``: imports in functions too)."""
    imports = _all_imports if deferred else _module_level_imports
    paths = {_module_name(path.relative_to(root)): path for path in sorted((root / package).rglob("*.py"))}
    graph: Graph = {}
    for name, path in paths.items():
        is_package = path.name == "__init__.py"
        edges: dict[str, int] = {}
        for node in imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parent = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join(parent + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base for alias in node.names]
            for target in targets:
                if target in paths and target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module, each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found, key=lambda component: (-len(component), component))


def shortest_cycle(graph: Graph, start: str, within: set[str]) -> list[str]:
    """The shortest chain start -> ... -> start through modules of ``within`` (breadth first)."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph[node]):
            if target not in within:
                continue
            if target == start:
                chain = [node]
                while chain[-1] != start:
                    chain.append(came_from[chain[-1]])
                return [start, *reversed(chain[:-1]), start]
            if target not in came_from:
                came_from[target] = node
                queue.append(target)
    return []


def _rotated(chain: list[str]) -> tuple[str, ...]:
    """The same circle started at its smallest name, so that one circle found from two members is printed once."""
    ring = chain[:-1]
    first = ring.index(min(ring))
    ring = ring[first:] + ring[:first]
    return (*ring, ring[0])


def describe_cycles(graph: Graph, components: list[list[str]] | None = None) -> list[str]:
    """Per circle (strongly connected set of modules, all of them by default): its size, and a chain through each
    member, shortest first."""
    lines = []
    for component in strongly_connected(graph) if components is None else components:
        members = set(component)
        chains = {_rotated(shortest_cycle(graph, member, members)) for member in component}
        lines.append(f"circle of {len(component)} modules: {', '.join(component)}")
        for chain in sorted(chains, key=lambda chain: (len(chain), chain)):
            arrows = [f"{a} -(line {graph[a][b]})-> " for a, b in zip(chain, chain[1:])]
            lines.append("  " + "".join(arrows) + chain[-1])
    return lines


def test_engine_has_no_import_circle():
    cycles = describe_cycles(import_graph(ROOT))
    assert not cycles, "import circles inside engine/ (module-level imports):\n" + "\n".join(cycles)


# Pairs the issue requires apart, even through deferred imports: the op core and the tracer, the allocator
# chokepoint and the CUDA pool.
APART = (("engine.op", "engine.graph.trace"), ("engine.memory", "engine.backend.cuda.memory"))


def circles_joining(graph: Graph, pairs: tuple[tuple[str, str], ...] = APART) -> list[str]:
    """The circles, described as ``describe_cycles`` does, that hold both modules of one of ``pairs``."""
    return describe_cycles(graph, [component for component in strongly_connected(graph)
                                   if any(a in component and b in component for a, b in pairs)])


def test_op_core_and_tracer_allocator_and_pool_are_apart_even_through_deferred_imports():
    joined = circles_joining(import_graph(ROOT, deferred=True))
    assert not joined, "circles through imports inside functions:\n" + "\n".join(joined)


def test_checker_finds_circles_closed_at_the_bottom_of_a_file(tmp_path):
    _write(tmp_path, {
        "engine/__init__.py": "from engine.tensor import Tensor\n",
        "engine/tensor.py": "import numpy\nclass Tensor:\n    pass\nfrom engine import ops as _ops  # bottom\n",
        "engine/ops/__init__.py": "from .add import add\n",
        "engine/ops/add.py": "from ..op import Function\n",
        "engine/op.py": "from engine.tensor import Tensor\n",
        "engine/memory.py": "def f():\n    from engine.backend import pool\n",  # in a function: no edge
        "engine/backend/__init__.py": "from . import pool\n",
        "engine/backend/pool.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine import memory\n"
                                  "try:\n    import engine.config\nexcept ImportError:\n    pass\n",
        "engine/config.py": "class C:\n    from engine.backend import pool\n",  # class bodies run at import
    })
    graph = import_graph(tmp_path)
    assert graph["engine.tensor"] == {"engine.ops": 4}
    assert graph["engine.ops"] == {"engine.ops.add": 1} and graph["engine.ops.add"] == {"engine.op": 1}
    assert graph["engine.memory"] == {} and graph["engine.backend.pool"] == {"engine.config": 5}
    assert strongly_connected(graph) == [["engine.op", "engine.ops", "engine.ops.add", "engine.tensor"],
                                         ["engine.backend.pool", "engine.config"]]
    cycles = describe_cycles(graph)
    assert cycles[0] == "circle of 4 modules: engine.op, engine.ops, engine.ops.add, engine.tensor"
    assert cycles[1] == ("  engine.op -(line 1)-> engine.tensor -(line 4)-> engine.ops -(line 1)-> engine.ops.add "
                         "-(line 1)-> engine.op")
    assert cycles[2:] == ["circle of 2 modules: engine.backend.pool, engine.config",
                          "  engine.backend.pool -(line 5)-> engine.config -(line 2)-> engine.backend.pool"]


def test_deferred_imports_count_only_when_asked(tmp_path):
    _write(tmp_path, {"engine/memory.py": "from engine.backend import pool\n",
                      "engine/backend/__init__.py": "",
                      "engine/backend/pool.py": "def f():\n    from engine import memory\n",
                      "engine/op.py": "from engine.graph import trace\n", "engine/graph/__init__.py": "",
                      "engine/graph/trace.py": "def g():\n    import engine.op\n"})
    assert describe_cycles(import_graph(tmp_path)) == []
    pairs = (("engine.memory", "engine.backend.pool"), ("engine.op", "engine.graph.trace"))
    assert circles_joining(import_graph(tmp_path), pairs) == []
    assert circles_joining(import_graph(tmp_path, deferred=True), pairs) == [
        "circle of 2 modules: engine.backend.pool, engine.memory",
        "  engine.backend.pool -(line 2)-> engine.memory -(line 1)-> engine.backend.pool",
        "circle of 2 modules: engine.graph.trace, engine.op",
        "  engine.graph.trace -(line 2)-> engine.op -(line 1)-> engine.graph.trace"]
    assert circles_joining(import_graph(tmp_path, deferred=True), pairs[:1]) == [
        "circle of 2 modules: engine.backend.pool, engine.memory",
        "  engine.backend.pool -(line 2)-> engine.memory -(line 1)-> engine.backend.pool"]


def test_checker_passes_a_graph_without_circles(tmp_path):
    _write(tmp_path, {"engine/__init__.py": "from engine import a, b\n", "engine/a.py": "from engine import b\n",
                      "engine/b.py": "import numpy\ndef late():\n    from engine import a\n"})
    graph = import_graph(tmp_path)
    assert graph == {"engine": {"engine.a": 1, "engine.b": 1}, "engine.a": {"engine.b": 1}, "engine.b": {}}
    assert describe_cycles(graph) == []
