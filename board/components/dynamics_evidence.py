"""The evidence box of the Dynamics page for an alert with no series of its own: a nonfinite alert's op and module."""
from __future__ import annotations

from typing import Any

from dash import html

from board.data.alerts import RunAlert
from instrumentation.format import alert_names as keys


def _counts(stats: dict[str, Any]) -> str:
    shape = "×".join(str(size) for size in stats.get("shape", [])) or "scalar"
    counts = (f"{stats.get('nan_count', 0)} NaN, {stats.get('posinf_count', 0)} +Inf, "
              f"{stats.get('neginf_count', 0)} −Inf")
    finite = f"finite min {_number(stats.get('min'))}, max {_number(stats.get('max'))}"
    return f"{stats.get('dtype', '?')} [{shape}]: {counts}; {finite}"


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else str(value)


def nonfinite_evidence(item: RunAlert) -> html.Div:
    """Where NaN/Inf first appeared: op, module, phase and step, then each output's and input's counts."""
    evidence = item.alert.evidence
    op, module = evidence.get(keys.OP, "?"), evidence.get(keys.MODULE) or "(no module)"
    rows = [html.Li(f"output {index}: {_counts(stats)}") for index, stats in enumerate(evidence.get(keys.OUTPUTS, []))]
    rows += [html.Li(f"input {index}: {_counts(stats)}") for index, stats in enumerate(evidence.get(keys.INPUTS, []))]
    return html.Div(className="fs-section fs-evidence", id="dynamics-evidence", children=[
        html.Strong(f"First NaN/Inf: op {op} in module {module}"),
        html.Span(f" · {evidence.get(keys.PHASE, '?')} · step {item.alert.step}", className="fs-muted"),
        html.Ul(rows)])
