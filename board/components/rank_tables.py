"""Ranks tables: per-rank medians, the alerts naming ranks with their evidence, replica agreement."""
from __future__ import annotations

import json
from typing import Any

from dash import html

from board.components.dynamics_alerts_table import SEVERITY_BADGES
from board.components.rank_figures import rank_color
from board.data.alerts import RunAlert
from board.data.ranks import RankBreakdown, ReplicaAgreement
from instrumentation.format.units import format_bytes

RECENT_CHECKS = 20  # replica checks listed (the first differing one is always listed too)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g} ms"


def ranks_table(breakdown: tuple[RankBreakdown, ...], warnings: dict[str, tuple[str, ...]]) -> html.Table:
    headers = ("rank", "steps", "step", "compute", "wait", "data", "CPU wait", "AllReduce in flight", "bytes / step",
               "warnings")
    rows = [html.Tr([
        html.Td([html.Span("●", style={"color": rank_color(item.rank)}), f" rank{item.rank}"], title=item.run),
        html.Td(str(item.steps)), html.Td(_ms(item.step_ms)), html.Td(_ms(item.compute_ms)), html.Td(_ms(item.wait_ms)),
        html.Td(_ms(item.data_ms)), html.Td(_ms(item.cpu_wait_ms)), html.Td(_ms(item.allreduce_ms)),
        html.Td("—" if item.comm_bytes is None else format_bytes(item.comm_bytes)),
        html.Td([html.Span(f"⚠ {line}", className="fs-badge fs-badge-warn") for line in warnings.get(item.run, ())]),
    ], id={"type": "ranks-row", "rank": item.rank}) for item in breakdown]
    return html.Table([html.Thead(html.Tr([html.Th(h) for h in headers])), html.Tbody(rows)], className="fs-table",
                      id="ranks-table")


def _rounded(value: Any) -> Any:
    """Floats at 6 significant digits (30.843335500000002 → 30.8433), at any depth of lists and dicts."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def _evidence(evidence: dict[str, Any]) -> html.Td:
    items = [html.Li([html.Code(key), ": ", value if isinstance(value, str) else json.dumps(_rounded(value))])
             for key, value in evidence.items()]
    return html.Td(html.Ul(items, className="fs-evidence") if items else "—", className="ranks-evidence")


def rank_alerts_table(items: tuple[RunAlert, ...]) -> html.Div | html.Table:
    """Step, rank (the alert's subject), kind, severity, message and every evidence entry."""
    if not items:
        return html.Div("No straggler or replica_divergence alert in this group.", className="fs-muted",
                        id="ranks-no-alerts")
    rows = [html.Tr([
        html.Td(str(item.alert.step)), html.Td(item.alert.subject or item.run, className="ranks-alert-subject"),
        html.Td(item.alert.kind), html.Td(html.Span(item.alert.severity,
                                                    className=SEVERITY_BADGES.get(item.alert.severity, "fs-badge"))),
        html.Td(item.alert.message), _evidence(item.alert.evidence)]) for item in items]
    return html.Table(className="fs-table", id="ranks-alerts-table", children=[
        html.Thead(html.Tr([html.Th(c) for c in ("step", "rank", "kind", "severity", "message", "evidence")])),
        html.Tbody(rows)])


def replica_indicator(replicas: ReplicaAgreement) -> html.Div:
    """One line: agree at every checked step, differ from step S, or why nothing was checked."""
    checked = len(replicas.checks)
    pending = f" ({replicas.pending_steps} step(s) not yet logged by every rank)" if replicas.pending_steps else ""
    if replicas.first_divergent_step is not None:
        differing = sum(not check.agree for check in replicas.checks)
        text, style = (f"✗ replicas differ from step {replicas.first_divergent_step} on "
                       f"({differing} of {checked} checked steps){pending}", "fs-badge fs-badge-error")
    elif checked == 1:
        text, style = f"✓ replicas agree at the one checked step (step {replicas.checks[0].step}){pending}", \
            "fs-badge fs-badge-ok"
    elif checked:
        text, style = (f"✓ replicas agree at all {checked} checked steps (last: step {replicas.checks[-1].step})"
                       f"{pending}", "fs-badge fs-badge-ok")
    elif len(replicas.ranks) >= 2:
        text, style = f"no step that every rank logged a checksum for yet{pending}", "fs-badge"
    else:
        text, style = "replica agreement not checked (see the notes above)", "fs-badge"
    return html.Div(html.Span(text, className=style), id="ranks-replica-indicator")


def replica_table(replicas: ReplicaAgreement) -> html.Table | html.Div:
    """The most recent checks, and the first one where the checksums differ."""
    if not replicas.checks:
        return html.Div()
    listed = list(replicas.checks[-RECENT_CHECKS:])
    first = next((check for check in replicas.checks if not check.agree), None)
    if first is not None and first not in listed:
        listed.insert(0, first)
    rows = [html.Tr([html.Td(str(check.step)), *(html.Td(f"{value:.0f}") for value in check.checksums),
                     html.Td("✓" if check.agree else "✗ differ")],
                    className="" if check.agree else "ranks-check-differs") for check in listed]
    headers = ("step", *(f"rank{rank}" for rank in replicas.ranks), "agree")
    return html.Table([html.Thead(html.Tr([html.Th(h) for h in headers])), html.Tbody(rows)], className="fs-table",
                      id="ranks-replica-table")
