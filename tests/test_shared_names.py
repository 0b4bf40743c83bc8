"""Names both sides of the log contract share (tag prefixes, alert kinds, evidence keys, memory categories) are
defined once in instrumentation/format/ and never typed again as literals in board/ or instrumentation/."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from board.data.system import GPU_CHARTS
from engine import memory
from instrumentation.format import alert_names, memory_categories, tags

ROOT = Path(__file__).resolve().parents[1]
FORMAT_DIR = ROOT / "instrumentation" / "format"
EVIDENCE_KEYS = {value for name, value in vars(alert_names).items()
                 if name.isupper() and isinstance(value, str) and value not in alert_names.KINDS}
ALLOCATING_CALLS = {"register", "_wrap_array"}  # engine calls whose second argument is a memory category


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _evidence_lookups(tree: ast.AST) -> set[int]:
    """Constants used as a key into evidence: ``<...evidence...>[key]`` and ``<...evidence...>.get(key)``."""
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and "evidence" in ast.unparse(node.value):
            keys.add(id(node.slice))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and "evidence" in ast.unparse(node.func.value)):
            keys.add(id(node.args[0]))
    return keys


def _dict_keys(tree: ast.AST) -> set[int]:
    return {id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys if key is not None}


def shared_literals(source: str, board: bool) -> list[tuple[int, str]]:
    """(line, literal) of every string that retypes a shared name: one starting with a tag prefix, a memory category,
    an alert kind (but as an evidence key: oom evidence has a "fragmentation" figure) and, in the board, an evidence key
    looked up in an alert's evidence. Docstrings are prose and not checked."""
    tree = ast.parse(source)
    docstrings, dict_keys = _docstrings(tree), _dict_keys(tree)
    lookups = _evidence_lookups(tree) if board else set()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in docstrings:
            continue
        text = node.value
        if (text.startswith(tags.PREFIXES) or text in memory_categories.CATEGORIES
                or (text in alert_names.KINDS and id(node) not in dict_keys)
                or (id(node) in lookups and text in EVIDENCE_KEYS)):
            found.append((node.lineno, text))
    return found


def _sources() -> list[Path]:
    paths = sorted((ROOT / "board").rglob("*.py")) + sorted((ROOT / "instrumentation").rglob("*.py"))
    return [path for path in paths if FORMAT_DIR not in path.parents]


def test_board_and_instrumentation_import_the_shared_names() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in _sources() for line, text in
                 shared_literals(path.read_text(encoding="utf-8"), board=ROOT / "board" in path.parents)]
    assert not offenders, "define these in instrumentation/format/ and import them:\n" + "\n".join(offenders)


@pytest.mark.parametrize("source, board", [
    ('add("perf/step_time_ms", 1.0)', False),
    ('tag = f"sys/gpu{index}/util_percent"', False),
    ('if alert.kind == "leak": pass', False),
    ('colors = {"optimizer_state": "#fff"}', False),
    ('shown = alert.evidence.get("snapshot")', True),
    ('rate = alert.evidence["groups"][0]', True),
    ('reason = "oom"', False),
])
def test_the_check_finds_a_retyped_name(source: str, board: bool) -> None:
    assert shared_literals(source, board)


@pytest.mark.parametrize("source, board", [
    ('"""Writes ``grad_norm/<param>`` scalars."""', False),  # prose
    ('x = tags.GRAD_NORM + name', False),
    ('label = "open the snapshot"', True),
    ('value = alert.evidence["snapshot"]', False),  # evidence keys are only looked for on the board side
    ('query["snapshot"] = capture_id', True),  # not an alert's evidence
    ('evidence = {"fragmentation": 0.5}', False),
])
def test_the_check_leaves_prose_and_imported_names_alone(source: str, board: bool) -> None:
    assert not shared_literals(source, board)


def test_the_engine_categories_are_the_logged_ones() -> None:
    assert memory.CATEGORIES == memory_categories.CATEGORIES


def test_every_category_the_engine_allocates_with_is_declared() -> None:
    used = set()
    for path in (ROOT / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            arguments = (node.args[1:2] if name in ALLOCATING_CALLS else []) + [
                k.value for k in node.keywords if k.arg in ("category", "_category")]
            used |= {a.value for a in arguments if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    assert used and used <= set(memory.CATEGORIES), used - set(memory.CATEGORIES)
    assert {"parameter", "gradient", "optimizer_state", "temporary", "input"} <= used


def test_the_system_page_draws_every_gpu_metric() -> None:
    assert sorted(m for _, metrics in GPU_CHARTS for m in metrics) == sorted(tags.GPU_METRICS)
