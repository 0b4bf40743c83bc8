"""Alert tables: a run's alerts with a button that selects the step, and every run's alerts with links."""
from __future__ import annotations

from urllib.parse import urlencode

from dash import dcc, html

from board.data.alerts import RunAlert
from board.data.discovery import run_group
from board.data.ranks import RANK_ALERT_KINDS
from instrumentation.format.alert_names import (FIRST_STEP, INPUT_BOUND, LAST_STEP, MEMORY_KINDS, RANK, SNAPSHOT,
                                               WINDOW_STEPS)

SEVERITY_BADGES = {"error": "fs-badge fs-badge-error", "warning": "fs-badge fs-badge-warn", "info": "fs-badge"}


def _severity(severity: str) -> html.Span:
    return html.Span(severity, className=SEVERITY_BADGES.get(severity, "fs-badge"))


def dynamics_link(run: str, step: int, kind: str = "", subject: str = "") -> str:
    """The run's Dynamics page with ``step`` marked on every chart; with the alert's ``kind`` and ``subject``, the
    chart of its evidence (the loss, the layer's update ratio or dead fraction) marks the value too."""
    query: dict[str, object] = {"run": run, "step": step}
    if kind:
        query["kind"] = kind
    if subject:
        query["subject"] = subject
    return "/dynamics?" + urlencode(query)


def profile_link(run: str, step: int, kind: str = "", first: object = None, last: object = None) -> str:
    """The run's newest capture on the Profile page with ``step`` outlined (``first``..``last`` shaded)."""
    query: dict[str, object] = {"run": run, "step": step}
    if kind:
        query["kind"] = kind
    if isinstance(first, int) and isinstance(last, int):
        query.update(first=first, last=last)
    return "/profile?" + urlencode(query)


def ranks_link(group: str, rank: object = None, window: object = None) -> str:
    """The Ranks page of `group`; with a rank alert's `rank` (highlighted) and `window` of steps ([first, last],
    shaded on the busy-time chart)."""
    query: dict[str, object] = {"group": group}
    if isinstance(rank, int) and not isinstance(rank, bool):
        query["rank"] = rank
    if isinstance(window, (list, tuple)) and len(window) == 2 and all(isinstance(v, (int, float)) for v in window):
        query["window"] = f"{int(window[0])}-{int(window[1])}"
    return "/ranks?" + urlencode(query)


def alert_link(item: RunAlert) -> str:
    """Where an alert's evidence is shown: the Memory page (with its snapshot), the step on the Profile page (where
    the time waiting for data is split out) for an input-bound run, the Ranks page of the run's group for a rank
    alert, else the step on the Dynamics page."""
    if item.alert.kind in RANK_ALERT_KINDS:
        return ranks_link(run_group(item.run), item.alert.evidence.get(RANK), item.alert.evidence.get(WINDOW_STEPS))
    if item.alert.kind == INPUT_BOUND:
        evidence = item.alert.evidence
        return profile_link(item.run, item.alert.step, INPUT_BOUND, evidence.get(FIRST_STEP), evidence.get(LAST_STEP))
    if item.alert.kind in MEMORY_KINDS:
        query = {"run": item.run}
        snapshot = item.alert.evidence.get(SNAPSHOT)
        if snapshot:
            query["snapshot"] = str(snapshot)
        query["step"] = str(item.alert.step)  # marked on the chart (a leak's window too, from its evidence)
        return "/memory?" + urlencode(query)
    return dynamics_link(item.run, item.alert.step, item.alert.kind, item.alert.subject)


def run_alerts_table(items: list[RunAlert], button_type: str) -> html.Div | html.Table:
    """Step, kind, severity, subject, message; the step is a button with id ``{"type": button_type, "step": n,
    "row": i, "kind": kind, "subject": subject}``."""
    if not items:
        return html.Div("No alerts in this run.", className="fs-muted", id="dynamics-no-alerts")
    rows = [html.Tr([
        html.Td(html.Button(f"step {item.alert.step}", id={"type": button_type, "step": item.alert.step, "row": i,
                                                             "kind": item.alert.kind, "subject": item.alert.subject},
                            className="fs-step-button", title="mark this step on the charts")),
        html.Td(item.alert.kind), html.Td(_severity(item.alert.severity)), html.Td(item.alert.subject),
        html.Td(item.alert.message)]) for i, item in enumerate(items)]
    return html.Table(className="fs-table", children=[
        html.Thead(html.Tr([html.Th(c) for c in ("step", "kind", "severity", "subject", "message")])),
        html.Tbody(rows)])


def all_alerts_table(items: list[RunAlert]) -> html.Div | html.Table:
    """Run, step (a link to the alert's evidence: the Memory page for memory alerts, else the step on the run's
    Dynamics page), kind, severity, subject, message."""
    if not items:
        return html.Div("No alerts match.", className="fs-empty", id="alerts-none")
    rows = [html.Tr([
        html.Td(item.run), html.Td(dcc.Link(str(item.alert.step), href=alert_link(item))),
        html.Td(item.alert.kind), html.Td(_severity(item.alert.severity)), html.Td(item.alert.subject),
        html.Td(item.alert.message)]) for item in items]
    return html.Table(className="fs-table", id="alerts-table", children=[
        html.Thead(html.Tr([html.Th(c) for c in ("run", "step", "kind", "severity", "subject", "message")])),
        html.Tbody(rows)])
