"""Runs overview: each run's alerts first (linked to what explains them), then every run with its last step, last
update, tags, size on disk and warnings."""
from __future__ import annotations

import dash
from dash import Dash, Input, Output, dcc, html

from board.components.alert_summary import alert_summary
from board.components.empty_state import empty_state
from board.components.plugin_notice import plugin_notice
from board.components.runs_table import runs_table
from board.context import board_context
from board.data.alerts import alert_index, summarize
from board.data.plugin_inventory import plugin_uses

dash.register_page(__name__, path="/", name="Runs", order=0, title="flowscope · runs")


def layout(**_query: str) -> html.Div:
    context = board_context()
    return html.Div([
        html.H2("Runs"),
        html.Div(id="runs-logdir", className="fs-muted", children=f"log directory: {context.store.logdir}"),
        html.Div(id="runs-content", children=_content()),
        dcc.Interval(id="runs-poll", interval=context.config.browser_poll_ms),
    ])


def _content() -> html.Div | html.Table:
    store = board_context().store
    empty = empty_state(store, "runs")
    if empty is not None:
        return empty
    runs = store.runs()
    index = alert_index(store)
    summaries = summarize(index.alerts(), [summary.name for summary in runs])
    return html.Div([alert_summary(summaries, index.problems()), plugin_notice(plugin_uses(store)) or html.Div(),
                     runs_table(runs)])


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("runs-content", "children"), Input("runs-poll", "n_intervals"), prevent_initial_call=True)
    def _refresh(_ticks: int) -> html.Div | html.Table:
        return _content()
