"""Ranks: a data-parallel run group side by side — step time per rank, skew, breakdown, alerts, replica agreement."""
from __future__ import annotations

import math
from typing import Any

import dash
from dash import Dash, Input, Output, State, dcc, html, no_update

from board.components.empty_state import empty_state
from board.components.rank_figures import breakdown_figure, mark_alert, rank_lines_figure, skew_figure
from board.components.rank_tables import rank_alerts_table, ranks_table, replica_indicator, replica_table
from board.components.relayout import window_from_relayout
from board.context import board_context
from board.data.ranks import LINE_SERIES, RanksView, rank_groups, rank_lines, ranks_view, skew_display_indices

dash.register_page(__name__, path="/ranks", name="Ranks", order=3.5, title="flowscope · ranks")

GRAPHS = ("step-times", "skew", "breakdown")
LINE_TITLES = {"step": "step time per rank (ms)",
               "compute": "compute per rank (ms): step − wait − data − cpu wait, the busy time the straggler rule "
                          "compares",
               "wait": "wait for the gradients' AllReduce per rank (ms)",
               "allreduce": "AllReduce in flight per rank (ms), overlapping compute", "data": "data wait per rank (ms)",
               "cpu_wait": "CPU wait per rank (ms): ready to run, waiting for a core shared with other processes"}
LINE_LABELS = {"step": "step time", "compute": "compute (busy)", "wait": "wait", "allreduce": "AllReduce in flight",
               "data": "data", "cpu_wait": "cpu wait"}
BREAKDOWN_NOTE = ("Compute, wait (for the gradients' AllReduce), data and CPU wait (ready to run, waiting for a core) "
                  "are stacked: at each step they add up to the step time, compute = step − wait − data − cpu wait "
                  "being the busy time the straggler rule compares. AllReduce in flight is drawn beside them, not in "
                  "the sum: buckets sent during backward overlap compute. The outline is the median step time; "
                  "medians of the parts need not add up to it.")


def _empty(groups: list[str]) -> html.Div:
    """Why there is nothing to show (no log directory yet, no runs, no run with ranks), or nothing."""
    return empty_state(board_context().store, "ranks") or (html.Div() if groups else html.Div([
        html.Div("No run has rank sub-runs yet. Under mpiexec, give each rank its own run and watch it: "),
        html.Code("writer = SummaryWriter(rank_logdir('logs/job')); watch(model, writer)"),
        html.Div("(both from instrumentation: logs/job/rank0, logs/job/rank1, …; watch() then logs "
                 "step, AllReduce and wait times per rank — see docs/distributed.md)")],
        className="fs-empty", id="empty-ranks-groups"))


def _focus(rank: str | None, window: str | None) -> dict[str, Any]:
    """A rank alert's rank and window of steps ("40-59") from the query string; what is malformed is left out."""
    focus: dict[str, Any] = {}
    if rank is not None and rank.isdigit():
        focus["rank"] = int(rank)
    first, _, last = (window or "").partition("-")
    if first.isdigit() and last.isdigit():
        focus["window"] = [min(int(first), int(last)), max(int(first), int(last))]
    return focus


def layout(group: str | None = None, rank: str | None = None, window: str | None = None, **_query: str) -> html.Div:
    context = board_context()
    focus = _focus(rank, window)
    groups = list(rank_groups(context.store))
    chosen = group if group in groups else (groups[0] if groups else None)
    missing = None
    if group is not None and group not in groups:
        shown = group if len(group) <= 200 else group[:200] + "…"
        missing = html.Div(f"No run group {shown!r} with rank sub-runs.", className="fs-notice", id="ranks-unknown")
    return html.Div([
        html.H2("Ranks"),
        html.Div(id="ranks-empty", children=_empty(groups)),
        missing or html.Div(),
        html.Div(className="fs-controls", children=[
            html.Label("run group", htmlFor="ranks-group"),
            dcc.Dropdown(id="ranks-group", options=groups, value=chosen, clearable=False, style={"minWidth": "22em"}),
            html.Span(style={"display": "inline-flex", "alignItems": "center", "gap": "0.6em"}, children=[
                html.Label("lines", htmlFor="ranks-series"),  # kept on the line of its choices
                dcc.RadioItems(id="ranks-series", options=[{"label": label, "value": key} for key, label in
                                                            LINE_LABELS.items()],
                               value="compute" if "window" in focus else "step", inline=True,
                               inputStyle={"marginRight": "0.25em"}, labelStyle={"marginRight": "0.8em"})]),
            html.Span(id="ranks-summary", className="fs-muted"),
        ]),
        html.Div(id="ranks-notes"),
        html.Div(id="ranks-content", style={} if chosen else {"display": "none"}, children=[
            dcc.Graph(id="ranks-step-times", config={"displaylogo": False}),
            html.Div(className="fs-grid2", children=[
                dcc.Graph(id="ranks-skew", config={"displaylogo": False}),
                html.Div([dcc.Graph(id="ranks-breakdown", config={"displaylogo": False}), html.Div(BREAKDOWN_NOTE,
                          className="fs-muted", id="ranks-breakdown-note")])]),
            html.H3("Per rank (medians over the rank's steps)"),
            html.Div(id="ranks-per-rank"),
            html.H3("Alerts naming ranks"),
            html.Div(id="ranks-alerts"),
            html.H3("Replica agreement (parameter checksums)"),
            html.Div(id="ranks-replicas"),
        ]),
        dcc.Store(id="ranks-window"),  # the zoomed window of steps, shared by the step-time and skew charts
        dcc.Store(id="ranks-focus", data={**focus, "group": chosen}),  # a rank alert's rank and window (its link)
        dcc.Interval(id="ranks-poll", interval=context.config.browser_poll_ms),
    ])


def _notes(view: RanksView) -> html.Div:
    lines = [html.Li(note) for note in view.notes]
    lines += [html.Li(f"{run}: {warning}") for run, warnings in view.warnings.items() for warning in warnings]
    return html.Div(html.Ul(lines), className="fs-notice", id="ranks-notes-list") if lines else html.Div()


def _summary(view: RanksView) -> str:
    if len(view.skew.steps) == 0:
        return f"{len(view.ranks)} ranks"
    return (f"{len(view.ranks)} ranks · skew over {len(view.skew.ranks)} ranks at {len(view.skew.steps)} steps "
            f"(steps {int(view.skew.steps[0])}–{int(view.skew.steps[-1])})")


def _window(data: Any) -> tuple[float, float] | None:
    """The zoomed window of steps held by the page's store (None: the whole run)."""
    numbers = isinstance(data, list) and len(data) == 2 and all(isinstance(v, (int, float)) for v in data)
    if numbers and all(math.isfinite(v) for v in data):
        return float(min(data)), float(max(data))
    return None


def content(group: str, window: tuple[float, float] | None = None, series: str = "step",
            focus: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """The figures, tables and notes of `group`, in the order of the page callback's outputs. The two step charts
    show `window` (steps), downsampled again for it; they keep the user's zoom across refreshes (`uirevision`). The
    line chart shows `series` (a key of LINE_SERIES) of every rank. `focus` (a rank alert's link): its window of steps
    shaded on the line and skew charts, its rank's line highlighted."""
    context = board_context()
    view = ranks_view(context.store, group)
    series = series if series in LINE_SERIES else "step"
    lines = rank_lines(context.store, context.smoothing, view.ranks, series, window)
    figures = [rank_lines_figure(lines, LINE_TITLES[series], window),
               skew_figure(view.skew, skew_display_indices(view.skew, window), window),
               breakdown_figure(view.breakdown)]
    for figure in figures:
        figure["layout"]["uirevision"] = group
    if focus and focus.get("group") == group:
        rank = focus.get("rank") if type(focus.get("rank")) is int else None
        shaded = _window(focus.get("window"))
        shaded = (int(shaded[0]), int(shaded[1])) if shaded else None
        label = f"alert window, steps {shaded[0]}–{shaded[1]}" if shaded else ""
        mark_alert(figures[0], rank, shaded, label)
        mark_alert(figures[1], None, shaded, "")
    return (*figures, ranks_table(view.breakdown, view.warnings), rank_alerts_table(view.alerts),
            html.Div([replica_indicator(view.replicas), replica_table(view.replicas)]), _notes(view), _summary(view))


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("ranks-window", "data"), Input("ranks-step-times", "relayoutData"),
                  Input("ranks-skew", "relayoutData"), Input("ranks-group", "value"), prevent_initial_call=True)
    def _zoom(steps_relayout: dict | None, skew_relayout: dict | None, _group: str | None):
        trigger = dash.ctx.triggered_id
        if trigger == "ranks-group":
            return None  # another group: its whole run
        zoom = window_from_relayout((steps_relayout if trigger == "ranks-step-times" else skew_relayout) or {}, "step")
        if zoom is None:
            return no_update
        return list(zoom.window) if zoom.window is not None else None

    @app.callback(*[Output(f"ranks-{name}", "figure") for name in GRAPHS], Output("ranks-per-rank", "children"),
                  Output("ranks-alerts", "children"), Output("ranks-replicas", "children"),
                  Output("ranks-notes", "children"), Output("ranks-summary", "children"),
                  Output("ranks-content", "style"), Input("ranks-group", "value"), Input("ranks-window", "data"),
                  Input("ranks-series", "value"), Input("ranks-poll", "n_intervals"), State("ranks-focus", "data"))
    def _refresh(group: str | None, window: Any, series: Any, _ticks: int | None, focus: Any):
        if not isinstance(group, str) or group not in rank_groups(board_context().store):
            return (*[no_update] * (len(GRAPHS) + 5), {"display": "none"})
        return (*content(group, _window(window), series if isinstance(series, str) else "step",
                         focus if isinstance(focus, dict) else None), {})

    @app.callback(Output("ranks-group", "options"), Output("ranks-group", "value"), Output("ranks-empty", "children"),
                  Input("ranks-poll", "n_intervals"), State("ranks-group", "options"), State("ranks-group", "value"),
                  prevent_initial_call=True)
    def _groups(_ticks: int | None, options: list[str] | None, chosen: str | None):
        groups = list(rank_groups(board_context().store))
        first = groups[0] if groups and chosen is None else no_update  # the first group to appear is shown
        changed = groups != options
        return (groups if changed else no_update), first, (_empty(groups) if changed else no_update)
