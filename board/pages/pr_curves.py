"""PR curves: per tag, precision against recall at the chosen step, one line per run."""
from __future__ import annotations

import dash
import plotly.graph_objects as go
from dash import Dash, Input, Output, State, dcc, html, no_update

from board.components.colors import run_color
from board.components.empty_state import empty_state
from board.components.step_marks import step_marks
from board.context import board_context
from board.data.media import PrCurvePoint, pr_curve_points, tag_names
from board.data.pr_drawn import drawn_curve
from board.data.store import UnknownSeries
from instrumentation.format import metadata

dash.register_page(__name__, path="/pr_curves", name="PR curves", order=9, title="flowscope · PR curves")


def _tags() -> tuple[list[str], dict[str, list[str]]]:
    by_run = tag_names(board_context().store, metadata.PR_CURVES_PLUGIN)
    return sorted({tag for tags in by_run.values() for tag in tags}), by_run


def layout(**_query: str) -> html.Div:
    context = board_context()
    tags, _ = _tags()
    return html.Div([
        html.H2("PR curves"),
        empty_state(context.store, "pr_curves") or html.Div(
            ["No precision-recall curve logged in any run yet. Log one with:",
             html.Pre("writer.add_pr_curve(\"val/pr\", labels, probabilities, step)   # labels 0/1, probabilities "
                      "in [0, 1]")] if not tags else "", className="fs-empty" if not tags else "", id="pr-none"),
        html.Div(className="fs-controls", children=[
            html.Label("tag", htmlFor="pr-tag"),
            dcc.Dropdown(id="pr-tag", options=tags, value=tags[0] if tags else None, clearable=False,
                         style={"minWidth": "24em"}),
            html.Label("step"),
            html.Div(dcc.Slider(id="pr-step", min=0, max=0, step=None, value=0, marks={0: "0"},
                                tooltip={"placement": "bottom"}), style={"flex": "1"}),
        ]),
        html.Div(dcc.Graph(id="pr-figure", config={"displaylogo": False}), id="pr-charts",
                 style={} if tags else {"display": "none"}),  # no curve: the note above, not a blank chart
        dcc.Interval(id="pr-poll", interval=context.config.browser_poll_ms),
    ])


def _series(tag: str) -> dict[str, list[PrCurvePoint]]:
    _, by_run = _tags()
    store, series = board_context().store, {}
    for run, tags in by_run.items():
        if tag in tags:
            try:
                series[run] = pr_curve_points(store, run, tag)
            except UnknownSeries:
                continue
    return series


def pr_figure(tag: str, step: int, series: dict[str, list[PrCurvePoint]]) -> go.Figure:
    """One line per run: its last curve at or before `step`, hovering shows the threshold and counts. Thresholds
    where nothing is predicted positive (TP + FP = 0) are not drawn (``board.data.pr_drawn``)."""
    figure = go.Figure()
    left_out = 0
    for run, points in series.items():
        before = [point for point in points if point.step <= step]
        if not before:
            continue
        point = drawn_curve(before[-1])
        left_out += point.left_out
        rows = point.rows
        custom = list(zip(point.thresholds, rows["true_positives"], rows["false_positives"]))
        figure.add_trace(go.Scatter(
            x=rows["recall"], y=rows["precision"], mode="lines+markers", name=f"{run} (step {point.step})",
            line={"color": run_color(run)}, marker={"size": 4}, customdata=custom,
            hovertemplate="threshold %{customdata[0]:.3f}<br>precision %{y:.4f}<br>recall %{x:.4f}"
                          "<br>TP %{customdata[1]:.0f} FP %{customdata[2]:.0f}<extra>%{fullData.name}</extra>"))
    note = f" · {left_out} threshold(s) with nothing predicted positive not drawn" if left_out else ""
    figure.update_layout(title={"text": f"{tag} · step {step}{note}", "font": {"size": 14}},
                         xaxis={"title": "recall", "range": [0, 1.02]},
                         yaxis={"title": "precision", "range": [0, 1.02]}, height=480,
                         margin={"l": 60, "r": 20, "t": 50, "b": 50}, legend={"orientation": "h"})
    return figure


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("pr-tag", "options"), Output("pr-tag", "value"), Output("pr-charts", "style"),
                  Input("pr-poll", "n_intervals"), State("pr-tag", "options"), State("pr-tag", "value"),
                  prevent_initial_call=True)
    def _new_tags(_ticks: int, current: list[str], value: str | None):
        tags, _ = _tags()
        if tags == current:
            return no_update, no_update, no_update
        return tags, value or (tags[0] if tags else None), {} if tags else {"display": "none"}

    @app.callback(Output("pr-step", "min"), Output("pr-step", "max"), Output("pr-step", "marks"),
                  Output("pr-step", "value"), Input("pr-tag", "value"), Input("pr-poll", "n_intervals"),
                  State("pr-step", "value"), State("pr-step", "max"), State("pr-step", "marks"))
    def _steps(tag: str | None, _ticks: int | None, value: int | None, old_max: int, old_marks: dict | None):
        steps = sorted({point.step for points in (_series(tag) if tag else {}).values() for point in points})
        if not steps:
            return 0, 0, {0: "0"}, 0
        if dash.ctx.triggered_id == "pr-poll" and set(map(str, steps)) == set(old_marks or {}):
            return no_update, no_update, no_update, no_update  # nothing new: the panel is not redrawn
        following = value is None or value >= old_max or dash.ctx.triggered_id == "pr-tag"
        return steps[0], steps[-1], step_marks(steps), steps[-1] if following or value not in steps else value

    @app.callback(Output("pr-figure", "figure"), Input("pr-tag", "value"), Input("pr-step", "value"))
    def _figure(tag: str | None, step: int | None):
        if not tag:
            return pr_figure("no PR curve yet", 0, {})
        return pr_figure(tag, step or 0, _series(tag))
