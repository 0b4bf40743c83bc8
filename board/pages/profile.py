"""Profile: captures of a run, step-time breakdown, top ops, one step's timeline, raw trace download, Capture."""
from __future__ import annotations

import dash
from dash import Dash, Input, Output, State, dcc, html, no_update

from board.components.overhead_figure import overhead_figure, overhead_rows, overhead_table
from board.components.profile_figures import breakdown_figure, memory_figure, timeline_figure
from board.components.profile_table import COLUMNS, columns_for, op_rows, ops_table
from board.context import board_context
from board.data.discovery import discover_runs
from board.data.overhead import observer_costs, overhead_runs
from board.data.profile import StepBreakdown, Timeline, memory_curve, step_breakdown, step_timeline, top_ops
from board.data.profile_captures import (Capture, CaptureRequestsDisabled, NotListening, TraceCache, find_captures,
                                         not_listening_reason, request_capture)
from instrumentation.format import trace as fmt
from instrumentation.format.trace_columns import TraceColumns
from instrumentation.format.units import format_bytes

dash.register_page(__name__, path="/profile", name="Profile", order=5, title="flowscope · profile")

_traces = TraceCache()
DEFAULT_REQUEST_STEPS = 5


def _captures() -> dict[str, Capture]:
    return find_captures(board_context().store.logdir)


def _load(key: str | None) -> tuple[Capture | None, TraceColumns | None, str]:
    capture = _captures().get(key or "")
    if capture is None:
        return None, None, "no capture selected" if not key else "that capture is gone"
    try:
        return capture, _traces.load(capture), ""
    except (OSError, ValueError) as error:
        return capture, None, f"cannot read {capture.path.name}: {error}"


def _run_dirs() -> dict:
    return {name: location.path for name, location in discover_runs(board_context().store.logdir).items()
            if location.event_files}  # NOTE: not a directory listed only because it could not be read


def _default_capture(captures: list[Capture], run: str | None) -> Capture | None:
    """The newest capture of ``run`` (a link from an alert), else the newest of all."""
    return next((c for c in captures if c.run == run), captures[0] if captures else None)


def _int(text: str | None) -> int | None:
    return int(text) if text and text.lstrip("-").isdigit() else None


def layout(run: str | None = None, step: str | None = None, first: str | None = None, last: str | None = None,
           kind: str | None = None, **_query: str) -> html.Div:
    """``run``/``step`` (an alert's link): that run's newest capture with the step marked and its timeline shown;
    ``first``/``last``: the alert's window of steps, shaded; ``kind``: the alert's kind, named above the chart."""
    context = board_context()
    captures = list(_captures().values())
    options = [{"label": c.label, "value": c.key} for c in captures]
    allowed = context.config.allows_capture_requests
    runs = sorted(_run_dirs())
    default = _default_capture(captures, run)
    # the run to capture is the shown capture's run, so that the two defaults name the same run
    request_run = default.run if default is not None and default.run in runs else (runs[0] if runs else None)
    marked = {"step": _int(step), "first": _int(first), "last": _int(last), "kind": kind or "", "run": run or ""}
    paced = overhead_runs(context.store)
    return html.Div([
        html.H2("Profile"),
        dcc.Store(id="profile-mark", data=marked if marked["step"] is not None else None),
        html.Div(id="profile-capture-controls", className="fs-controls", style=_shown(bool(captures)), children=[
            html.Label("capture", htmlFor="profile-capture"),
            dcc.Dropdown(id="profile-capture", options=options, value=default.key if default else None,
                         clearable=False, placeholder="no capture yet", style={"minWidth": "30em"}),
            html.Label("group by"),
            dcc.RadioItems(id="profile-group-by", options=["op", "module", "shape"], value="op", inline=True),
            html.Button("Download trace", id="profile-download-button"),
            dcc.Download(id="profile-download"),
        ]),
        html.Div(className="fs-controls", children=[
            html.Label("capture run", htmlFor="profile-request-run"),
            dcc.Dropdown(id="profile-request-run", options=runs, value=request_run, clearable=False,
                         style={"minWidth": "16em"}, disabled=not allowed),
            dcc.Input(id="profile-request-steps", type="number", min=1, max=fmt.MAX_REQUEST_STEPS, step=1,
                      value=DEFAULT_REQUEST_STEPS, style={"width": "5em"}, disabled=not allowed),
            html.Label("steps"),
            html.Button("Capture", id="profile-capture-button", disabled=not allowed,
                        title="" if allowed else "disabled: the board is read-only (--read-only, or no --token on "
                                                 "a non-loopback host)"),
            # says something once Capture is pressed (or while a request of the chosen run is pending or running)
            html.Span(id="profile-capture-status", className="fs-muted",
                      children="" if allowed else "Capture is disabled: this board is read-only."),
            dcc.Store(id="profile-request-id"),
        ]),
        html.Div(id="profile-summary", className="fs-muted"),
        html.Div(id="profile-no-capture", className="fs-empty", style=_shown(not captures), children=[
            html.P("No profile capture in this log directory yet. Profile a few training steps of a run:"),
            html.Pre(html.Code("with instrumentation.profile(writer.log_dir):\n    train()  # its steps: breakdown, "
                               "top ops, timeline")),
            html.P(["or press Capture above while a run with ", html.Code("profile(..., on_demand=True)"), " or ",
                    html.Code("watch(...)"), " is training. A torch.profiler trace (",
                    html.Code("tensorboard_trace_handler"), " or ", html.Code("export_chrome_trace"),
                    ", *.pt.trace.json) in a run's directory is read too."]),
        ]),
        html.Div(id="profile-capture-views", style=_shown(bool(captures)), children=[
            html.Div(id="profile-mark-note", className="fs-muted"),
            dcc.Graph(id="profile-breakdown", config={"displaylogo": False}),
            html.Div(id="profile-memory-panel", children=[
                dcc.Graph(id="profile-memory", config={"displaylogo": False}),
            ]),
            html.Div(id="profile-memory-note", className="fs-muted"),
            html.H3("Top ops"),
            html.Div(id="profile-ops-note", className="fs-muted"),
            ops_table("profile-ops", []),
            html.Div(className="fs-controls", children=[
                html.Label("step", htmlFor="profile-step"),
                dcc.Dropdown(id="profile-step", options=[], value=None, clearable=False, style={"minWidth": "8em"}),
                dcc.Store(id="profile-query-step", data=marked["step"]),
                html.Span("click a bar above to pick its step; drag on the timeline to zoom", className="fs-muted"),
            ]),
            dcc.Graph(id="profile-timeline", config={"displaylogo": False}),
        ]),
        html.H3("Instrumentation"),
        html.P(id="profile-overhead-none", className="fs-muted", style=_shown(not paced), children=[
            "No run with paced observers: ", html.Code("watch(model, writer)"), " writes each observer's own cost "
            "and the interval its overhead budget chose (perf/instrumentation_ms, perf/interval/<observer>)."]),
        html.Div(id="profile-overhead-panel", style=_shown(bool(paced)), children=[
            html.Div(className="fs-controls", children=[
                html.Label("run", htmlFor="profile-overhead-run"),
                dcc.Dropdown(id="profile-overhead-run", options=paced, clearable=False, style={"minWidth": "16em"}),
                html.Span("each observer's own measured cost per step and the interval its overhead budget chose "
                          "(perf/instrumentation_ms|instrumentation_share|interval/<observer>)", className="fs-muted"),
            ]),
            dcc.Graph(id="profile-overhead", config={"displaylogo": False}),
            overhead_table("profile-overhead-table", []),
        ]),
        dcc.Interval(id="profile-poll", interval=context.config.browser_poll_ms),
    ])


def _shown(visible: bool) -> dict:
    return {} if visible else {"display": "none"}


def _header(columns: tuple[tuple[str, str, str], ...], group_by: str) -> list[dict]:
    return [{"id": k, "name": group_by if k == "key" else name, "type": kind} for k, name, kind in columns]


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("profile-capture", "options"), Output("profile-capture", "value"),
                  Input("profile-poll", "n_intervals"), State("profile-capture", "options"),
                  State("profile-capture", "value"), prevent_initial_call=True)
    def _new_captures(_ticks: int, current: list[dict], value: str | None):
        options = [{"label": c.label, "value": c.key} for c in _captures().values()]
        if options == current:
            return no_update, no_update
        return options, value if value in {o["value"] for o in options} else (options[0]["value"] if options else None)

    @app.callback(Output("profile-no-capture", "style"), Output("profile-capture-views", "style"),
                  Output("profile-capture-controls", "style"), Input("profile-capture", "options"),
                  prevent_initial_call=True)
    def _capture_views(options: list[dict]):
        return _shown(not options), _shown(bool(options)), _shown(bool(options))

    @app.callback(Output("profile-request-run", "value"), Input("profile-capture", "value"),
                  State("profile-request-run", "options"), prevent_initial_call=True)
    def _request_run_follows(key: str | None, runs: list | None):
        """The run Capture would record is the run whose capture is shown."""
        capture = _captures().get(key or "")
        return capture.run if capture is not None and capture.run in (runs or []) else no_update

    @app.callback(Output("profile-memory", "figure"), Output("profile-memory-panel", "style"),
                  Output("profile-memory-note", "children"), Input("profile-capture", "value"))
    def _memory(key: str | None):
        capture, columns, _ = _load(key)
        if columns is None:
            return no_update, _shown(False), ""
        curve = memory_curve(columns)
        if not len(curve):
            how = ("torch.profiler.profile(..., profile_memory=True)" if capture.source == "torch"
                   else "a capture of an engine run records it")
            return no_update, _shown(False), f"No memory events in this capture ({how})."
        source = "torch's [memory] events" if capture.source == "torch" else "the allocator's counters"
        return (memory_figure(curve, f"memory allocated · {capture.label} · {len(curve):,} samples from {source}"),
                _shown(True), "")

    @app.callback(Output("profile-breakdown", "figure"), Output("profile-summary", "children"),
                  Output("profile-step", "options"), Output("profile-step", "value"),
                  Output("profile-mark-note", "children"),
                  Input("profile-capture", "value"), Input("profile-breakdown", "clickData"),
                  State("profile-step", "value"), State("profile-query-step", "data"), State("profile-mark", "data"))
    def _breakdown(key: str | None, click: dict | None, step: int | None, wanted: int | None, mark: dict | None):
        capture, columns, problem = _load(key)
        if columns is None:
            return breakdown_figure(StepBreakdown.empty()), problem if key else "", [], None, ""  # the panel says so
        breakdown = step_breakdown(columns)
        steps = breakdown.steps.tolist()
        if dash.ctx.triggered_id == "profile-breakdown" and click and click.get("points"):
            chosen = int(click["points"][0]["x"])
            return no_update, no_update, no_update, chosen if chosen in steps else step, no_update
        kernels = int((columns.ops.category == 1).sum())
        ops = f"{len(columns.ops) - kernels:,} ops" + (f" · {kernels:,} kernel events" if kernels else "")
        summary = (f"{capture.source} trace · {ops} · {len(steps)} steps · "
                   f"{format_bytes(capture.size_bytes)} · {capture.path.name}")
        if breakdown.gpu_busy_ms is not None and breakdown.step_ms.sum() > 0:
            summary += f" · GPU busy {breakdown.gpu_busy_ms.sum() / breakdown.step_ms.sum():.0%} of step time"
        first = steps[len(steps) // 2] if steps else (int(columns.ops.step.max()) if len(columns.ops) else None)
        first = wanted if wanted in steps else first  # the step a link asked for
        marked, window, note = _mark(mark, capture, steps)
        return (breakdown_figure(breakdown, f"step time · {capture.label}", marked, window), summary,
                [{"label": str(s), "value": s} for s in steps], first, note)

    @app.callback(Output("profile-overhead-run", "options"), Output("profile-overhead-run", "value"),
                  Output("profile-overhead-none", "style"), Output("profile-overhead-panel", "style"),
                  Input("profile-poll", "n_intervals"), Input("profile-capture", "value"),
                  State("profile-overhead-run", "options"), State("profile-overhead-run", "value"))
    def _overhead_runs(_ticks: int | None, key: str | None, current: list | None, value: str | None):
        runs = overhead_runs(board_context().store)
        styles = (_shown(not runs), _shown(bool(runs))) if runs != current else (no_update, no_update)
        capture = _captures().get(key or "") if dash.ctx.triggered_id == "profile-capture" else None
        if capture is not None and capture.run in runs:  # the selected capture's run, when it has a breakdown
            return (runs if runs != current else no_update), capture.run, *styles
        if runs == current and value in runs:
            return no_update, no_update, no_update, no_update
        return runs, value if value in runs else (runs[0] if runs else None), *styles

    @app.callback(Output("profile-overhead", "figure"), Output("profile-overhead-table", "data"),
                  Input("profile-overhead-run", "value"), Input("profile-poll", "n_intervals"))
    def _overhead(run: str | None, _ticks: int | None):
        costs = observer_costs(board_context().store, run) if run else []
        return overhead_figure(costs, f"instrumentation · {run}" if run else "instrumentation"), overhead_rows(costs)

    @app.callback(Output("profile-ops", "data"), Output("profile-ops", "columns"),
                  Output("profile-ops-note", "children"),
                  Input("profile-capture", "value"), Input("profile-group-by", "value"))
    def _table(key: str | None, group_by: str):
        capture, columns, _ = _load(key)
        if columns is None:
            return [], _header(COLUMNS, group_by), ""
        stats = top_ops(columns, group_by)
        torch_trace = capture.source == "torch"
        note = ""
        if group_by == "module" and not len(columns.spans.of(fmt.CAT_MODULE)):
            note = ("This trace has no module events: torch.profiler writes them with "
                    "profile(with_modules=True, with_stack=True)." if torch_trace
                    else "This trace has no module spans.")
        elif group_by == "module" and torch_trace:
            note = ("Modules from torch's nn.Module events (their forward calls); \"(outside modules)\" holds the "
                    "DataLoader's, backward and optimizer ops.")
        top_level = "(outside modules)" if torch_trace and group_by == "module" else "(model)"
        return op_rows(stats, top_level), _header(columns_for(stats), group_by), note

    @app.callback(Output("profile-timeline", "figure"), Input("profile-capture", "value"),
                  Input("profile-step", "value"))
    def _timeline(key: str | None, step: int | None):
        _, columns, _ = _load(key)
        if columns is None or step is None:
            return timeline_figure(Timeline.empty())
        return timeline_figure(step_timeline(columns, int(step)))

    @app.callback(Output("profile-download", "data"), Input("profile-download-button", "n_clicks"),
                  State("profile-capture", "value"), prevent_initial_call=True)
    def _download(_clicks: int, key: str | None):
        capture = _captures().get(key or "")
        if capture is None:
            return no_update
        run = capture.run.replace("/", "_")
        try:
            data = capture.read_bytes()
        except OSError:
            return no_update
        return dcc.send_bytes(data, filename=f"{run}_{capture.capture_id}_{capture.path.name}"
                              if capture.source == "flowscope" else capture.path.name)

    @app.callback(Output("profile-request-id", "data"), Input("profile-capture-button", "n_clicks"),
                  State("profile-request-run", "value"), State("profile-request-steps", "value"),
                  prevent_initial_call=True)
    def _request(clicks: int | None, run: str | None, steps: int | None):
        """Capture pressed: ask the run's training process; what was asked (or why not) is what the status says."""
        context = board_context()
        if not clicks or not context.config.allows_capture_requests:
            return no_update
        run_dirs = _run_dirs()
        if run is None or run not in run_dirs:
            return {"run": run, "message": "no run to capture: choose a run that writes event files"}
        try:
            request = request_capture(run_dirs, run, int(steps or 0), context.config.allows_capture_requests,
                                      context.store.logdir)
        except NotListening as error:  # nothing was written: there is no request to follow
            return {"run": run, "message": f"cannot capture {error}"}
        except (ValueError, KeyError, OSError, CaptureRequestsDisabled) as error:
            return {"run": run, "message": f"capture request failed: {error}"}
        return {"run": run, "request_id": request.request_id,
                "message": f"requested {request.steps} steps of {run}; waiting for the training process…"}

    @app.callback(Output("profile-capture-status", "children"), Input("profile-request-id", "data"),
                  Input("profile-poll", "n_intervals"), State("profile-request-run", "value"),
                  prevent_initial_call=True)
    def _capture_status(asked: dict | None, _ticks: int | None, run: str | None):
        """Says something only after an action: what pressing Capture here did, then (polled) where that request
        stands; or a request of the chosen run that is pending or running (made by another page or board)."""
        context = board_context()
        if not context.config.allows_capture_requests:
            return no_update  # the layout says so
        said = (asked or {}).get("message", no_update)  # NOTE: a pure function of the inputs: a poll that
        # supersedes the answer to a press (Dash drops the older response) says the same
        run_dirs = _run_dirs()
        run = asked["run"] if asked else run
        if run not in run_dirs:
            return said
        status = fmt.read_capture_status(run_dirs[run], root=context.store.logdir)
        ours = bool(asked) and bool(asked.get("request_id")) and status.request_id == asked["request_id"]
        if not ours and status.state not in ("pending", "running"):  # no request of ours, or ours was replaced
            return said
        if status.state == "pending" and (reason := not_listening_reason(run_dirs[run], context.store.logdir)):
            return f"requested {status.steps} steps of {run}, but {reason}"
        return {"pending": f"requested {status.steps} steps of {run}; waiting for the training process…",
                "running": f"{run} is recording {status.steps} steps…",
                "done": f"capture {status.capture_id} of {run} is ready",
                "failed": f"capture of {run} failed: {status.message}"}.get(status.state, said)


def _mark(mark: dict | None, capture: Capture, steps: list[int]) -> tuple[int | None, tuple[int, int] | None, str]:
    """The step (and window) an alert's link marks, when the shown capture is of the alert's run; and a line
    naming it, or saying that this capture does not hold it."""
    if not mark or mark.get("step") is None or (mark.get("run") and mark["run"] != capture.run):
        return None, None, ""
    step, first, last = mark["step"], mark.get("first"), mark.get("last")
    window = (first, last) if first is not None and last is not None else None
    what = f"{mark['kind']} alert" if mark.get("kind") else "alert"
    span = f" (steps {first}–{last})" if window else ""
    if step in steps:
        return step, window, f"{what} at step {step}{span}: outlined below, its timeline at the bottom."
    held = f"steps {steps[0]}–{steps[-1]}" if steps else "no steps"
    return None, window, f"{what} at step {step}{span}: this capture holds {held}, not that step."
