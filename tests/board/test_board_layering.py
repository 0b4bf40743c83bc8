"""The board imports only `instrumentation.format` from the project, and `board/data` imports no web stack."""
from __future__ import annotations

import ast
from pathlib import Path

BOARD = Path(__file__).resolve().parents[2] / "board"
WEB = ("dash", "plotly", "flask", "werkzeug")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_board_reaches_the_project_only_through_instrumentation_format() -> None:
    for path in BOARD.rglob("*.py"):
        for name in imported_modules(path):
            root = name.split(".")[0]
            if root == "engine" or (root == "instrumentation" and not name.startswith("instrumentation.format")):
                raise AssertionError(f"{path.relative_to(BOARD.parent)} imports {name}")


def test_board_data_imports_no_web_framework() -> None:
    for path in (BOARD / "data").rglob("*.py"):
        for name in imported_modules(path):
            assert name.split(".")[0] not in WEB, f"{path.relative_to(BOARD.parent)} imports {name}"
