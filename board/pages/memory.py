"""Memory: the allocator timeline per device with category bands, memory alerts (OOM, leaks), snapshots."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

import dash
from dash import MATCH, Dash, Input, Output, State, dcc, html, no_update

from board.components.empty_state import empty_state
from board.components.memory_figures import leak_evidence_figure, timeline_figure, treemap_figure
from board.components.memory_table import allocator_summary, live_tensors_table
from board.context import board_context
from board.data.memory import (SnapshotCache, device_title, devices, highest_peaks, memory_alerts, memory_runs,
                               module_treemap, snapshot_headers, timeline)
from instrumentation.format import alert_names as names
from instrumentation.format.alerts import Alert
from instrumentation.format.units import format_bytes

dash.register_page(__name__, path="/memory", name="Memory", order=5, title="flowscope · memory")

_SNAPSHOTS = SnapshotCache()


def href(run: str, snapshot: str | None = None) -> str:
    return f"/memory?run={quote(run, safe='')}" + (f"&snapshot={quote(snapshot, safe='')}" if snapshot else "")


def layout(run: str | None = None, snapshot: str | None = None, **_query: str) -> html.Div:
    context = board_context()
    store = context.store
    runs = memory_runs(store)
    if not runs:
        note = empty_state(store, "memory") or html.Div(
            "No memory data yet: attach instrumentation.MemoryTracker(writer) to a training run.", className="fs-empty",
            id="empty-memory")
        return html.Div([html.H2("Memory"), note])
    run = run if run in runs else runs[0]
    return html.Div([
        html.H2("Memory"),
        html.Div(className="fs-controls", id="memory-runs", children=[
            dcc.Link(name, href=href(name), className="memory-run-link" + (" memory-run-active" if name == run else ""))
            for name in runs]),
        html.Div(id="memory-timelines", className="fs-grid2", children=[  # host and devices side by side
            dcc.Graph(id={"type": "memory-timeline", "device": device}, config={"displaylogo": False},
                      figure=timeline_figure(timeline(store, run, device), device_title(run, device)))
            for device in devices(store, run)]),
        _alerts_section(run, memory_alerts(store, run)),
        _snapshot_section(run, snapshot),
        dcc.Store(id="memory-run", data=run),
        dcc.Interval(id="memory-poll", interval=context.config.browser_poll_ms),
    ])


def _alerts_section(run: str, alerts: list[Alert]) -> html.Div:
    items: list[Any] = []
    for index, alert in enumerate(alerts):
        snapshot = alert.evidence.get(names.SNAPSHOT)
        body: list[Any] = [html.Strong(f"{alert.kind} · step {alert.step} · {alert.subject}"), html.Div(alert.message)]
        if snapshot:
            label = "open the OOM report (snapshot)" if alert.kind == names.OOM else "open the snapshot"
            body.append(dcc.Link(label, href=href(run, snapshot), id={"type": "memory-alert-link", "index": index},
                                 className=f"fs-alert-link memory-{alert.kind}-link"))
        if alert.kind == names.FRAGMENTATION:
            evidence = alert.evidence
            body.append(html.Div(
                f"{format_bytes(evidence.get(names.FRAGMENTATION_BYTES, 0))} unusable of "
                f"{format_bytes(evidence.get(names.RESERVED_BYTES, 0))} reserved · "
                f"{format_bytes(evidence.get(names.ALLOCATED_BYTES, 0))} allocated · request "
                f"{format_bytes(evidence.get(names.REQUEST_BYTES, 0))} · largest free chunk "
                f"{format_bytes(evidence.get(names.LARGEST_FREE_BLOCK) or 0)}",
                className="fs-note memory-fragmentation"))
        if alert.kind == names.LEAK and alert.evidence.get(names.STEPS):
            groups = alert.evidence.get(names.GROUPS) or []
            if groups:
                body.append(html.Ul([html.Li(_leak_group(g)) for g in groups]))
            body.append(dcc.Graph(id={"type": "memory-leak-evidence", "index": index}, config={"displaylogo": False},
                                  figure=leak_evidence_figure(alert.evidence, f"leak evidence · {alert.subject}")))
        items.append(html.Div(body, className=f"fs-alert fs-alert-{alert.severity}", id=f"memory-alert-{index}"))
    return html.Details(open=True, className="fs-section", id="memory-alerts", children=[
        html.Summary(f"memory alerts ({len(alerts)})"), *(items or [html.Div("none", className="fs-note")])])


def _leak_group(g: dict[str, Any]) -> str:
    """One leak group of an alert's evidence, as a line."""
    return (f"{format_bytes(g[names.BYTES_PER_STEP])}/step · {g[names.COUNT_PER_STEP]:.3g} × {g[names.CATEGORY]} "
            f"{g[names.SHAPE]} {g[names.DTYPE]} · op {g[names.OP]} · module {g[names.MODULE] or '-'} · "
            f"{g[names.SITE]}")


def _snapshot_section(run: str, capture_id: str | None) -> html.Div:
    store = board_context().store
    files = snapshot_headers(store, run)
    highest = highest_peaks([header for _, header in files])
    listing = html.Ul(id="memory-snapshots", children=[
        html.Li([dcc.Link(f.capture_id, href=href(run, f.capture_id), className="memory-snapshot-link"),
                 html.Span("" if header is None else f" · {header.reason}"
                           f"{' (highest)' if header is highest.get(header.device) else ''} · step {header.step} · "
                           f"{header.device} {format_bytes(header.allocated_bytes)} allocated", className="fs-note")],
                id={"type": "memory-snapshot-item", "index": f.capture_id})
        for f, header in files])
    children: list[Any] = [html.Summary(f"snapshots ({len(files)})"), listing]
    if capture_id:
        try:
            found = _SNAPSHOTS.load(store, run, capture_id)
        except ValueError as error:
            found, children = None, children + [html.Div(str(error), className="fs-empty", id="memory-snapshot-error")]
        if found is None and not any(isinstance(c, html.Div) for c in children[2:]):
            children.append(html.Div(f"run {run} has no snapshot {capture_id}", className="fs-empty",
                                     id="memory-snapshot-error"))
        elif found is not None:
            _, snap = found
            children += [html.H3(f"snapshot {capture_id}", id="memory-snapshot-title"), allocator_summary(snap),
                         dcc.Graph(id="memory-treemap", config={"displaylogo": False},
                                   figure=treemap_figure(module_treemap(snap), "live bytes by module and category")),
                         live_tensors_table(snap)]
    return html.Details(open=True, className="fs-section", id="memory-snapshot-section", children=children)


def register_callbacks(app: Dash) -> None:
    @app.callback(Output({"type": "memory-timeline", "device": MATCH}, "figure"),
                  Input("memory-poll", "n_intervals"), State({"type": "memory-timeline", "device": MATCH}, "id"),
                  State("memory-run", "data"), prevent_initial_call=True)
    def _refresh(_ticks: int, graph_id: dict[str, str], run: str):
        store = board_context().store
        if run not in memory_runs(store):
            return no_update
        device = graph_id["device"]
        return timeline_figure(timeline(store, run, device), device_title(run, device))
