"""Memory: the allocator timeline per device with category bands, memory alerts (OOM, leaks), snapshots."""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

import dash
from dash import MATCH, Dash, Input, Output, State, dcc, html, no_update

from board.components.empty_state import empty_state
from board.components.memory_figures import PHASE_WORDS, leak_evidence_figure, timeline_figure, treemap_figure
from board.components.memory_table import allocator_summary, live_tensors_table
from board.context import board_context
from board.data.memory import (SnapshotCache, alert_marks, device_title, devices, highest_peaks, memory_alerts,
                               memory_runs, module_treemap, snapshot_headers, snapshot_marks, timeline)
from board.data.store import LogdirStore
from instrumentation.format import alert_names as names
from instrumentation.format.alerts import Alert
from instrumentation.format.units import format_bytes

dash.register_page(__name__, path="/memory", name="Memory", order=5, title="flowscope · memory")

_SNAPSHOTS = SnapshotCache()


def _empty() -> html.Div:
    """What to log to fill the page, with the line of code."""
    return html.Div([
        html.Div("No memory data yet. Track a run's allocator:"),
        html.Code("tracker = instrumentation.MemoryTracker(writer)  # or watch(model, writer), which starts one"),
        html.Div("It logs mem/<device>/* scalars each step, snapshots at peaks, OOM reports and leak alerts "
                 "(see docs/memory.md).")], className="fs-empty", id="empty-memory")


def href(run: str, snapshot: str | None = None, step: int | None = None) -> str:
    return (f"/memory?run={quote(run, safe='')}" + (f"&snapshot={quote(snapshot, safe='')}" if snapshot else "")
            + (f"&step={step}" if step is not None else ""))


def _step(value: Any) -> int | None:
    """A step from the query string (None when absent or not a whole number)."""
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _figure(store: LogdirStore, run: str, device: str, focus: str | None, focus_step: int | None) -> dict[str, Any]:
    """A device's timeline with its snapshots and memory alerts marked (``focus``: the snapshot opened)."""
    return timeline_figure(timeline(store, run, device), device_title(run, device), snapshot_marks(store, run, device),
                           alert_marks(memory_alerts(store, run), device), focus, focus_step)


def _sampling_note(store: LogdirStore, run: str) -> list[str]:
    """How each device's figures were logged when not every step (one line per device)."""
    notes = []
    for device in devices(store, run):
        sampled = timeline(store, run, device).sampling
        if sampled is not None:
            notes.append(f"{device}: {sampled.describe()}")
    return notes


def layout(run: str | None = None, snapshot: str | None = None, step: str | None = None, **_query: str) -> html.Div:
    return html.Div(id="memory-page", children=_content(run, snapshot, step))


def _content(run: str | None, snapshot: str | None, step: str | None) -> list[Any]:
    """The page: its runs, charts, alerts and snapshots; with no memory data yet, what to log and a poll that
    draws the page once some appears."""
    context = board_context()
    store = context.store
    runs = memory_runs(store)
    if not runs:
        note = empty_state(store, "memory") or _empty()
        return [html.H2("Memory"), note, dcc.Interval(id="memory-empty-poll", interval=context.config.browser_poll_ms)]
    run = run if run in runs else runs[0]
    focus_step = _step(step)
    return [
        html.H2("Memory"),
        html.Div(className="fs-controls", id="memory-runs", children=[
            dcc.Link(name, href=href(name), className="memory-run-link" + (" memory-run-active" if name == run else ""))
            for name in runs]),
        html.Div(id="memory-timelines", className="fs-grid2", children=[  # host and devices side by side
            dcc.Graph(id={"type": "memory-timeline", "device": device}, config={"displaylogo": False},
                      figure=_figure(store, run, device, snapshot, focus_step))
            for device in devices(store, run)]),
        html.Div([html.Div(line) for line in _sampling_note(store, run)], className="fs-note", id="memory-sampling"),
        _alerts_section(run, memory_alerts(store, run)),
        _snapshot_section(run, snapshot),
        dcc.Store(id="memory-run", data=run),
        dcc.Store(id="memory-focus", data={"snapshot": snapshot, "step": focus_step}),
        dcc.Store(id="memory-seen", data=_seen(store, run)),
        dcc.Interval(id="memory-poll", interval=context.config.browser_poll_ms),
    ]


def _alerts_section(run: str, alerts: list[Alert]) -> html.Div:
    items: list[Any] = []
    for index, alert in enumerate(alerts):
        snapshot = alert.evidence.get(names.SNAPSHOT)
        body: list[Any] = [html.Strong(f"{alert.kind} · step {alert.step} · {alert.subject}"), html.Div(alert.message)]
        if snapshot:
            label = "open the OOM report (snapshot)" if alert.kind == names.OOM else "open the snapshot"
            body.append(dcc.Link(label, href=href(run, snapshot, alert.step),
                                 id={"type": "memory-alert-link", "index": index},
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


def _seen(store: LogdirStore, run: str) -> list[int]:
    """How many snapshots and memory alerts the run has (the page redraws its lists when this changes)."""
    return [len(snapshot_headers(store, run)), len(memory_alerts(store, run))]


def _phase(phase: str) -> str:
    """A snapshot's phase in words for the list and its title ("" when unknown)."""
    return PHASE_WORDS.get(phase, "")


def _leak_group(g: dict[str, Any]) -> str:
    """One leak group of an alert's evidence, as a line."""
    return (f"{format_bytes(g[names.BYTES_PER_STEP])}/step · {g[names.COUNT_PER_STEP]:.3g} × {g[names.CATEGORY]} "
            f"{g[names.SHAPE]} {g[names.DTYPE]} · op {g[names.OP]} · module {g[names.MODULE] or '-'} · "
            f"{g[names.SITE]}")


def _snapshot_items(store: LogdirStore, run: str) -> list[html.Li]:
    """The run's snapshots, oldest first: id (a link), reason, step, device, allocated bytes and phase."""
    files = snapshot_headers(store, run)
    highest = highest_peaks([header for _, header in files])
    return [
        html.Li([dcc.Link(f.capture_id, href=href(run, f.capture_id), className="memory-snapshot-link"),
                 html.Span("" if header is None else f" · {header.reason}"
                           f"{' (highest)' if header is highest.get(header.device) else ''} · step {header.step} · "
                           f"{header.device} {format_bytes(header.allocated_bytes)} allocated"
                           + (f" · {_phase(header.phase)}" if _phase(header.phase) else ""), className="fs-note")],
                id={"type": "memory-snapshot-item", "index": f.capture_id})
        for f, header in files]


def _snapshot_section(run: str, capture_id: str | None) -> html.Div:
    store = board_context().store
    items = _snapshot_items(store, run)
    children: list[Any] = [html.Summary(f"snapshots ({len(items)})", id="memory-snapshot-count"),
                           html.Ul(id="memory-snapshots", children=items)]
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
            phase = _phase(snap.phase)
            children += [html.H3(f"snapshot {capture_id}" + (f" ({phase})" if phase else ""),
                                 id="memory-snapshot-title"), allocator_summary(snap),
                         dcc.Graph(id="memory-treemap", config={"displaylogo": False},
                                   figure=treemap_figure(module_treemap(snap), "live bytes by module and category")),
                         live_tensors_table(snap)]
    return html.Details(open=True, className="fs-section", id="memory-snapshot-section", children=children)


def register_callbacks(app: Dash) -> None:
    @app.callback(Output({"type": "memory-timeline", "device": MATCH}, "figure"),
                  Input("memory-poll", "n_intervals"), State({"type": "memory-timeline", "device": MATCH}, "id"),
                  State("memory-run", "data"), State("memory-focus", "data"), prevent_initial_call=True)
    def _refresh(_ticks: int, graph_id: dict[str, str], run: str, focus: dict | None):
        store = board_context().store
        if run not in memory_runs(store):
            return no_update
        focus = focus if isinstance(focus, dict) else {}
        return _figure(store, run, graph_id["device"], focus.get("snapshot"), _step(focus.get("step")))

    @app.callback(Output("memory-snapshots", "children"), Output("memory-snapshot-count", "children"),
                  Output("memory-alerts", "children"), Output("memory-seen", "data"),
                  Input("memory-poll", "n_intervals"), State("memory-run", "data"), State("memory-seen", "data"),
                  prevent_initial_call=True)
    def _listings(_ticks: int, run: str, seen: Any):
        """The snapshot list and the alerts again when the run has new ones (a live run)."""
        store = board_context().store
        if run not in memory_runs(store):
            return no_update, no_update, no_update, no_update
        now = _seen(store, run)
        if now == seen:
            return no_update, no_update, no_update, no_update
        items = _snapshot_items(store, run)
        return (items, f"snapshots ({len(items)})", _alerts_section(run, memory_alerts(store, run)).children, now)

    @app.callback(Output("memory-sampling", "children"), Input("memory-poll", "n_intervals"),
                  State("memory-run", "data"), prevent_initial_call=True)
    def _sampling(_ticks: int, run: str):
        store = board_context().store
        if run not in memory_runs(store):
            return no_update
        return [html.Div(line) for line in _sampling_note(store, run)]

    @app.callback(Output("memory-page", "children"), Input("memory-empty-poll", "n_intervals"),
                  prevent_initial_call=True)
    def _first_data(_ticks: int):
        """The empty page draws itself once a run has memory data."""
        return _content(None, None, None) if memory_runs(board_context().store) else no_update
