"""Dynamics: per run, update ratios (heatmap and lines), gradient norms, dead fractions and the run's alerts."""
from __future__ import annotations

from typing import Any

import dash
from dash import ALL, Dash, Input, Output, State, dcc, html, no_update

from board.components.dynamics_alerts_table import run_alerts_table
from board.components.dynamics_figures import layer_lines, ratio_heatmap
from board.components.empty_state import empty_state
from board.context import board_context
from board.data.alerts import AlertFilter, alert_index
from board.data.dynamics import DEAD_FRACTION_SUFFIX, HEALTHY_UPDATE_RATIO, dynamics_runs, layer_views, ratio_matrix
from instrumentation.format.tags import ACTIVATION, GRAD_NORM, UPDATE_RATIO

dash.register_page(__name__, path="/dynamics", name="Dynamics", order=3, title="flowscope · dynamics")

GRAPHS = ("heatmap", "ratios", "grad-norms", "dead")


def _step(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def layout(run: str | None = None, step: str | None = None, **_query: str) -> html.Div:
    context = board_context()
    runs = dynamics_runs(context.store)
    chosen = run if run in runs else (runs[0] if runs else None)
    return html.Div([
        html.H2("Dynamics"),
        empty_state(context.store, "dynamics") or (html.Div() if runs else html.Div(
            f"No run has {UPDATE_RATIO}, {GRAD_NORM} or {ACTIVATION}…{DEAD_FRACTION_SUFFIX} tags yet: log them with "
            "instrumentation.watch(model, writer).", className="fs-empty", id="empty-dynamics-tags")),
        html.Div(className="fs-controls", children=[
            html.Label("run", htmlFor="dynamics-run"),
            dcc.Dropdown(id="dynamics-run", options=runs, value=chosen, clearable=False, style={"minWidth": "22em"}),
            html.Span(id="dynamics-step-label", className="fs-muted"),
            html.Button("clear step", id="dynamics-clear-step", className="fs-step-button"),
        ]),
        dcc.Store(id="dynamics-step", data=_step(step)),
        html.Div(id="dynamics-charts", style=_charts_style(chosen), children=[  # no run: the note above, no blank charts
            dcc.Graph(id="dynamics-heatmap", config={"displaylogo": False}),
            html.Div(className="fs-grid2", children=[
                dcc.Graph(id=f"dynamics-{name}", config={"displaylogo": False}) for name in GRAPHS[1:]]),
        ]),
        html.H3("Alerts of this run"),
        html.Div(id="dynamics-alerts"),
        dcc.Store(id="dynamics-alerts-shown"),
        dcc.Interval(id="dynamics-poll", interval=context.config.browser_poll_ms),
    ])


def _charts_style(run: str | None) -> dict[str, str]:
    return {} if run else {"display": "none"}


def figures(run: str | None, step: int | None) -> list[dict[str, Any]]:
    context = board_context()
    if not run:
        return [{"data": [], "layout": {"height": 260, "title": {"text": "no run selected"}}}] * len(GRAPHS)
    store, cache = context.store, context.smoothing
    return [
        ratio_heatmap(ratio_matrix(store, run), step),
        layer_lines("update ratio ‖Δw‖/‖w‖ per layer (log)", layer_views(store, cache, run, UPDATE_RATIO),
                    UPDATE_RATIO, log_y=True, step=step, band=HEALTHY_UPDATE_RATIO),
        layer_lines("gradient norm ‖g‖ per layer (log)", layer_views(store, cache, run, GRAD_NORM), GRAD_NORM,
                    log_y=True, step=step),
        layer_lines("dead fraction per layer (units never positive in a batch)",
                    layer_views(store, cache, run, ACTIVATION, DEAD_FRACTION_SUFFIX), ACTIVATION, DEAD_FRACTION_SUFFIX,
                    log_y=False, step=step,
                    y_range=(-0.02, 1.02)),
    ]


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("dynamics-step", "data"),
                  Input({"type": "dynamics-alert-step", "step": ALL, "row": ALL}, "n_clicks"),
                  Input("dynamics-clear-step", "n_clicks"), prevent_initial_call=True)
    def _select_step(clicks: list[int | None], _clear: int | None):
        trigger = dash.ctx.triggered_id
        if trigger == "dynamics-clear-step":
            return None
        if isinstance(trigger, dict) and any(clicks):
            return int(trigger["step"])
        return no_update  # the alert table was re-rendered: no click

    @app.callback(*[Output(f"dynamics-{name}", "figure") for name in GRAPHS], Output("dynamics-step-label", "children"),
                  Output("dynamics-charts", "style"), Input("dynamics-run", "value"), Input("dynamics-step", "data"), Input("dynamics-poll", "n_intervals"))
    def _figures(run: str | None, step: int | None, _ticks: int | None):
        label = f"selected step: {step}" if step is not None else "click an alert's step to mark it on the charts"
        return *figures(run, step), label, _charts_style(run)

    @app.callback(Output("dynamics-alerts", "children"), Output("dynamics-run", "options"),
                  Output("dynamics-alerts-shown", "data"),
                  Input("dynamics-run", "value"), Input("dynamics-poll", "n_intervals"),
                  State("dynamics-run", "options"), State("dynamics-alerts-shown", "data"))
    def _alerts(run: str | None, _ticks: int | None, options: list[str], shown: list | None):
        store = board_context().store
        runs = dynamics_runs(store)
        items = alert_index(store).alerts(AlertFilter(runs=(run,))) if run else []
        # NOTE: re-render the table only when its content changed: a re-rendered button loses a click in flight.
        signature = [run, len(items), repr(items[-1]) if items else ""]
        table = run_alerts_table(items, "dynamics-alert-step") if signature != shown else no_update
        return table, (runs if runs != options else no_update), signature
