"""Text: per tag, each step's markdown (rendered without raw HTML), the runs side by side."""
from __future__ import annotations

import dash
from dash import Dash, Input, Output, State, dcc, html, no_update

from board.components.empty_state import empty_state
from board.context import board_context
from board.data.media import TextPoint, tag_names, text_points
from board.data.store import UnknownSeries
from instrumentation.format import metadata

dash.register_page(__name__, path="/text", name="Text", order=7, title="flowscope · text")
MAX_STEPS_SHOWN = 100  # the most recent steps; the API has them all


def _tags() -> tuple[list[str], dict[str, list[str]]]:
    by_run = tag_names(board_context().store, metadata.TEXT_PLUGIN)
    return sorted({tag for tags in by_run.values() for tag in tags}), by_run


def layout(**_query: str) -> html.Div:
    context = board_context()
    tags, _ = _tags()
    return html.Div([
        html.H2("Text"),
        empty_state(context.store, "text") or html.Div(
            "No text logged (add_text) in any run yet." if not tags else "", className="fs-muted", id="text-none"),
        html.Div(className="fs-controls", children=[
            html.Label("tag", htmlFor="text-tag"),
            dcc.Dropdown(id="text-tag", options=tags, value=tags[0] if tags else None, clearable=False,
                         style={"minWidth": "24em"}),
        ]),
        html.Div(id="text-table"),
        dcc.Store(id="text-shown"),
        dcc.Interval(id="text-poll", interval=context.config.browser_poll_ms),
    ])


def _cell(point: TextPoint | None) -> html.Td:
    if point is None:
        return html.Td("—", className="fs-muted")
    # NOTE: dcc.Markdown escapes raw HTML unless dangerously_allow_html is set (it is not, on purpose)
    return html.Td(dcc.Markdown(point.text, className="fs-text-markdown", link_target="_blank"))


def _shown(tag: str | None) -> list:
    """What the table shows: the tag and each run's (points, newest wall time); unchanged → no redraw."""
    if not tag:
        return []
    _, by_run = _tags()
    store, shown = board_context().store, [tag]
    for run, tags in by_run.items():
        if tag in tags:
            try:
                points = text_points(store, run, tag)
            except UnknownSeries:
                continue
            shown.append([run, len(points), points[-1].wall_time if points else None])
    return shown


def text_table(tag: str | None) -> html.Div | html.Table:
    if not tag:
        return html.Div()
    _, by_run = _tags()
    store = board_context().store
    runs = [run for run, tags in by_run.items() if tag in tags]
    per_run: dict[str, dict[int, TextPoint]] = {}
    for run in runs:
        try:
            per_run[run] = {point.step: point for point in text_points(store, run, tag)}  # the last one per step
        except UnknownSeries:
            continue
    steps = sorted({step for points in per_run.values() for step in points}, reverse=True)
    note = [] if len(steps) <= MAX_STEPS_SHOWN else [html.Div(
        f"the {MAX_STEPS_SHOWN} most recent of {len(steps)} steps (all of them: /api/text)", className="fs-muted")]
    header = html.Tr([html.Th("step"), *(html.Th(run) for run in per_run)])
    body = [html.Tr([html.Td(str(step)), *(_cell(points.get(step)) for points in per_run.values())])
            for step in steps[:MAX_STEPS_SHOWN]]
    return html.Div([*note, html.Table([html.Thead(header), html.Tbody(body)], className="fs-table fs-text-table",
                                       id="text-steps")])


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("text-tag", "options"), Input("text-poll", "n_intervals"), State("text-tag", "options"),
                  prevent_initial_call=True)
    def _new_tags(_ticks: int, current: list[str]):
        tags, _ = _tags()
        return tags if tags != current else no_update

    @app.callback(Output("text-table", "children"), Output("text-shown", "data"), Input("text-tag", "value"),
                  Input("text-poll", "n_intervals"), State("text-shown", "data"))
    def _table(tag: str | None, _ticks: int | None, shown_before: list | None):
        shown = _shown(tag)
        if shown == shown_before:
            return no_update, no_update
        return text_table(tag), shown
