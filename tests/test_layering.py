"""Import direction (DESIGN.md): engine ← instrumentation ← files → board, checked by parsing every import.

The rules, on the imports of every .py file under ``engine/``, ``instrumentation/`` and ``board/``
(``import x``, ``from x import y`` and relative imports, wherever they appear in the file):

1. ``engine`` imports neither ``instrumentation`` nor ``board``.
2. ``instrumentation`` never imports ``board``. From the engine it imports only the public API: ``engine``
   itself (``import engine``, ``from engine import Tensor``) and ``engine.<x>`` where ``<x>`` is a module
   that ``engine/__init__.py`` re-exports (``from engine import hooks, memory, ...``) or ``hooks``.
   Deeper paths (``engine.nn.module``) and private modules (``engine.tensor``) are not public.
3. ``board`` imports nothing of ``engine``, and of ``instrumentation`` only ``instrumentation.format``
   (and modules inside it).
4. ``board/data`` imports neither ``dash`` nor ``plotly``.

Imports built from strings (``importlib.import_module``) are not seen.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("engine", "instrumentation", "board")


def public_engine_modules(root: Path) -> set[str]:
    """Modules of the engine package that ``engine/__init__.py`` re-exports, plus ``hooks``."""
    public = {"hooks"}
    init = root / "engine" / "__init__.py"
    if not init.exists():
        return public
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module == "engine" or (node.level == 1 and not node.module)):
            for alias in node.names:
                if (root / "engine" / f"{alias.name}.py").exists() or (root / "engine" / alias.name).is_dir():
                    public.add(alias.name)
    return public


def _imports(path: Path, package: str) -> list[tuple[int, str, list[str]]]:
    """(line, absolute module, imported names) for every import statement in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            found.append((node.lineno, module, [alias.name for alias in node.names]))
    return found


def _violation(layer: str, in_board_data: bool, module: str, names: list[str], public: set[str]) -> str | None:
    parts = module.split(".")
    top = parts[0]
    if layer == "engine" and top in ("instrumentation", "board"):
        return "engine must not import instrumentation or board"
    if layer == "instrumentation":
        if top == "board":
            return "instrumentation must not import board"
        if top == "engine" and not (len(parts) == 1 or (len(parts) == 2 and parts[1] in public)):
            return f"instrumentation may import only the public engine API (engine, engine.{{{', '.join(sorted(public))}}})"
    if layer == "board":
        if top == "engine":
            return "board must not import the engine (it reads files only)"
        if top == "instrumentation":
            format_only = parts[1] == "format" if len(parts) > 1 else bool(names) and set(names) == {"format"}
            if not format_only:
                return "board may import only instrumentation.format from instrumentation"
        if in_board_data and top in ("dash", "plotly"):
            return "board/data must not import dash or plotly"
    return None


def layering_violations(root: Path) -> list[str]:
    """Every wrong import arrow under ``root`` as 'path:line imports module: rule'."""
    public = public_engine_modules(root)
    violations = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            relative = path.relative_to(root)
            package = ".".join(relative.parent.parts)
            in_board_data = relative.parts[:2] == ("board", "data")
            for line, module, names in _imports(path, package):
                rule = _violation(layer, in_board_data, module, names, public)
                if rule:
                    shown = f"{module} ({', '.join(names)})" if names else module
                    violations.append(f"{relative.as_posix()}:{line} imports {shown}: {rule}")
    return violations


def test_project_imports_point_one_way():
    violations = layering_violations(ROOT)
    assert not violations, "wrong import arrows:\n" + "\n".join(violations)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_checker_catches_every_kind_of_wrong_arrow(tmp_path):
    _write(tmp_path, {
        "engine/__init__.py": "from engine import hooks, memory\nfrom engine.tensor import Tensor\n",
        "engine/hooks.py": "", "engine/memory.py": "", "engine/tensor.py": "", "engine/nn/__init__.py": "",
        "engine/ok.py": "from engine.tensor import Tensor\nfrom . import memory\n",
        "engine/bad.py": "import numpy\ndef f():\n    from instrumentation.profiler import profile\n",
        "engine/nn/bad.py": "from .. import memory\nimport board\n",
        "instrumentation/__init__.py": "",
        "instrumentation/ok.py": "import engine\nfrom engine import Tensor, hooks\nimport engine.hooks\n"
                                 "from engine.memory import stats\nfrom .format import records\n",
        "instrumentation/bad.py": "from engine.tensor import Tensor\nimport engine.nn\nfrom engine.hooks.x import y\n",
        "instrumentation/format/bad.py": "import board.app\n",
        "board/ok.py": "from instrumentation.format import records\nfrom instrumentation import format\n"
                       "import instrumentation.format.values\nfrom .data import reader\nimport dash\n",
        "board/bad.py": "import engine\nfrom instrumentation.summary import Writer\n"
                        "from instrumentation import format, summary\nimport instrumentation\n",
        "board/data/ok.py": "import numpy\nfrom ..components import colors\n",
        "board/data/bad.py": "import plotly.graph_objects as go\nfrom dash import html\n",
    })
    found = layering_violations(tmp_path)
    where = sorted(v.split(" imports ")[0] for v in found)
    assert where == ["board/bad.py:1", "board/bad.py:2", "board/bad.py:3", "board/bad.py:4", "board/data/bad.py:1",
                     "board/data/bad.py:2", "engine/bad.py:3", "engine/nn/bad.py:2", "instrumentation/bad.py:1",
                     "instrumentation/bad.py:2", "instrumentation/bad.py:3", "instrumentation/format/bad.py:1"], found
    assert any("board/bad.py:3 imports instrumentation (format, summary)" in v for v in found)
    assert any("engine.tensor (Tensor): instrumentation may import only the public engine API" in v for v in found)


def test_public_engine_modules_follow_the_reexports(tmp_path):
    _write(tmp_path, {"engine/__init__.py": "from engine import config, memory\nfrom engine.tensor import tensor\n",
                      "engine/config.py": "", "engine/memory.py": "", "engine/tensor.py": ""})
    assert public_engine_modules(tmp_path) == {"config", "hooks", "memory"}


def test_relative_imports_resolve_against_the_package(tmp_path):
    _write(tmp_path, {"board/data/x.py": "from . import a\nfrom ..components.colors import c\nfrom .. import pages\n",
                      "engine/__init__.py": "from . import hooks\n"})
    assert _imports(tmp_path / "board/data/x.py", "board.data") == [
        (1, "board.data", ["a"]), (2, "board.components.colors", ["c"]), (3, "board", ["pages"])]
    assert _imports(tmp_path / "engine/__init__.py", "engine") == [(1, "engine", ["hooks"])]
