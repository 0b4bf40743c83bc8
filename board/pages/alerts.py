"""Alerts: every run's diagnostics (exploding/vanishing gradients, dead units, NaN origin, …) in one table."""
from __future__ import annotations

import dash
from dash import Dash, Input, Output, State, dcc, html, no_update

from board.components.dynamics_alerts_table import all_alerts_table
from board.components.empty_state import empty_state
from board.context import board_context
from board.data.alerts import SEVERITIES, AlertFilter, alert_index
from instrumentation.format.alert_names import KINDS

dash.register_page(__name__, path="/alerts", name="Alerts", order=4, title="flowscope · alerts")


def _kind_options() -> list[str]:
    index = alert_index(board_context().store)
    index.refresh()
    return sorted(set(KINDS) | set(index.kinds()))


def layout(**_query: str) -> html.Div:
    context = board_context()
    return html.Div([
        html.H2("Alerts"),
        empty_state(context.store, "alerts") or html.Div(),
        html.Div(className="fs-controls", children=[
            html.Label("kind", htmlFor="alerts-kind"),
            dcc.Dropdown(id="alerts-kind", options=_kind_options(), value=[], multi=True, placeholder="every kind",
                         style={"minWidth": "22em"}),
            html.Label("severity", htmlFor="alerts-severity"),
            dcc.Dropdown(id="alerts-severity", options=list(SEVERITIES), value=[], multi=True,
                         placeholder="every severity", style={"minWidth": "14em"}),
        ]),
        html.Div(id="alerts-content", children=_content([], [])),
        dcc.Interval(id="alerts-poll", interval=context.config.browser_poll_ms),
    ])


def _content(kinds: list[str], severities: list[str]) -> html.Div:
    """The matching alerts, then one line per run whose alerts file was not read (and why)."""
    index = alert_index(board_context().store)
    selection = AlertFilter(kinds=tuple(kinds or ()), severities=tuple(severities or ()))
    table = all_alerts_table(index.alerts(selection))
    problems = [html.Div(f"⚠ {run}: alerts not read: {problem}", className="fs-muted alerts-problem")
                for run, problem in index.problems().items()]
    return html.Div([table, *problems])


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("alerts-content", "children"), Output("alerts-kind", "options"), Input("alerts-kind", "value"),
                  Input("alerts-severity", "value"), Input("alerts-poll", "n_intervals"),
                  State("alerts-kind", "options"), prevent_initial_call=True)
    def _refresh(kinds: list[str], severities: list[str], _ticks: int | None, shown_kinds: list[str] | None):
        """The table with the alerts written since; a kind first raised since is added to the kind filter."""
        content = _content(kinds, severities)
        options = _kind_options()
        return content, options if options != shown_kinds else no_update
