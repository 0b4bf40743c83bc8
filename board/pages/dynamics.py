"""Dynamics: per run, the loss, update ratios (heatmap and lines), gradient norms, dead fractions, which steps were
measured, and the run's alerts; an alert's step (and, from a badge, its series) is marked on the charts."""
from __future__ import annotations

from typing import Any

import dash
from dash import ALL, Dash, Input, Output, State, dcc, html, no_update

from board.components.dynamics_alerts_table import run_alerts_table
from board.components.dynamics_evidence import nonfinite_evidence
from board.components.dynamics_figures import StepMark, alert_marker, layer_lines, loss_figure, ratio_heatmap
from board.components.empty_state import empty_state
from board.context import board_context
from board.data.alerts import AlertFilter, alert_index
from board.data.dynamics import (DEAD_FRACTION_SUFFIX, HEALTHY_UPDATE_RATIO, dynamics_runs, layer_views, loss_tag,
                                 measured_steps, ratio_matrix, sampling_text)
from board.data.views import scalar_view
from instrumentation.format.alert_names import (DEAD_UNITS, EXPLODING_GRADIENT, LOSS_SPIKE, NONFINITE,
                                                VANISHING_GRADIENT)
from instrumentation.format.tags import ACTIVATION, GRAD_NORM, UPDATE_RATIO

dash.register_page(__name__, path="/dynamics", name="Dynamics", order=3, title="flowscope · dynamics")

GRAPHS = ("loss", "heatmap", "ratios", "grad-norms", "dead")
RATIO_KINDS = (EXPLODING_GRADIENT, VANISHING_GRADIENT)  # their subject is a parameter: its update ratio
LOSS_KINDS = (LOSS_SPIKE, NONFINITE)  # marked on the loss chart
HOW_TO = ("from instrumentation import SummaryWriter, watch\n"
          "handle = watch(model, SummaryWriter(\"logs/run1\"))   # then engine.fit(..., callbacks=[handle])")


def _mark(step: Any, kind: Any = "", subject: Any = "") -> dict[str, Any] | None:
    try:
        return {"step": int(step), "kind": str(kind or ""), "subject": str(subject or "")}
    except (TypeError, ValueError):
        return None


def layout(run: str | None = None, step: str | None = None, kind: str = "", subject: str = "",
           **_query: str) -> html.Div:
    context = board_context()
    runs = dynamics_runs(context.store)
    chosen = run if run in runs else (runs[0] if runs else None)
    return html.Div([
        html.H2("Dynamics"),
        empty_state(context.store, "dynamics") or (html.Div() if runs else html.Div(id="empty-dynamics-tags",
            className="fs-empty", children=[
                f"No run has {UPDATE_RATIO}, {GRAD_NORM} or {ACTIVATION}…{DEAD_FRACTION_SUFFIX} tags yet. "
                "watch() writes them (and the loss, and alerts) while a model trains:", html.Pre(HOW_TO)])),
        html.Div(className="fs-controls", children=[
            html.Label("run", htmlFor="dynamics-run"),
            dcc.Dropdown(id="dynamics-run", options=runs, value=chosen, clearable=False, style={"minWidth": "22em"}),
            html.Span(id="dynamics-step-label", className="fs-muted"),
            html.Span(id="dynamics-step-alert", className="fs-muted"),
            html.Button("clear step", id="dynamics-clear-step", className="fs-step-button"),
        ]),
        html.Div(id="dynamics-sampling", className="fs-muted"),
        html.Div(id="dynamics-evidence-box"),
        dcc.Store(id="dynamics-step", data=_mark(step, kind, subject)),
        # no run: the note above, no blank charts
        html.Div(id="dynamics-charts", style=_charts_style(chosen), children=[
            dcc.Graph(id="dynamics-loss", config={"displaylogo": False}),
            dcc.Graph(id="dynamics-heatmap", config={"displaylogo": False}),
            html.Div(className="fs-grid2", children=[
                dcc.Graph(id=f"dynamics-{name}", config={"displaylogo": False}) for name in GRAPHS[2:]]),
        ]),
        html.H3("Alerts of this run"),
        html.Div(id="dynamics-alerts"),
        dcc.Store(id="dynamics-alerts-shown"),
        dcc.Store(id="dynamics-drawn"),
        dcc.Interval(id="dynamics-poll", interval=context.config.browser_poll_ms),
    ])


def _charts_style(run: str | None) -> dict[str, str]:
    return {} if run else {"display": "none"}


def figures(run: str | None, mark: StepMark | None) -> list[dict[str, Any]]:
    context = board_context()
    if not run:
        return [{"data": [], "layout": {"height": 260, "title": {"text": "no run selected"}}}] * len(GRAPHS)
    store, cache = context.store, context.smoothing
    kind = mark.kind if mark is not None else ""
    tag = loss_tag(store, run)
    heatmap = ratio_heatmap(ratio_matrix(store, run), mark, uirevision=run)
    if mark is not None and kind in RATIO_KINDS and mark.subject in heatmap["data"][0]["y"]:
        heatmap["data"].append(alert_marker(mark.step, mark.subject, kind, mark.subject))  # y: the parameter's row
    return [
        loss_figure(scalar_view(store, cache, run, tag) if tag else None, mark, kind in LOSS_KINDS, uirevision=run),
        heatmap,
        layer_lines("update ratio ‖Δw‖/‖w‖ per layer (log)", layer_views(store, cache, run, UPDATE_RATIO),
                    UPDATE_RATIO, log_y=True, mark=mark, mark_subject=kind in RATIO_KINDS, band=HEALTHY_UPDATE_RATIO,
                    uirevision=run),
        layer_lines("gradient norm ‖g‖ per layer (log)", layer_views(store, cache, run, GRAD_NORM), GRAD_NORM,
                    log_y=True, mark=mark, uirevision=run),
        layer_lines("dead fraction per layer (units never positive in a batch)",
                    layer_views(store, cache, run, ACTIVATION, DEAD_FRACTION_SUFFIX), ACTIVATION, DEAD_FRACTION_SUFFIX,
                    log_y=False, mark=mark, mark_subject=kind == DEAD_UNITS, y_range=(-0.02, 1.02), uirevision=run),
    ]


def _evidence(run: str | None, mark: StepMark | None) -> Any:
    """A nonfinite alert's op and module (it has no series of its own to mark)."""
    if not run or mark is None or mark.kind != NONFINITE:
        return None
    items = alert_index(board_context().store).alerts(AlertFilter(kinds=(NONFINITE,), runs=(run,)))
    found = next((item for item in items if item.alert.step == mark.step), None)
    return nonfinite_evidence(found) if found is not None else None


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("dynamics-step", "data"),
                  Input({"type": "dynamics-alert-step", "step": ALL, "row": ALL, "kind": ALL, "subject": ALL},
                        "n_clicks"),
                  Input("dynamics-clear-step", "n_clicks"), prevent_initial_call=True)
    def _select_step(clicks: list[int | None], _clear: int | None):
        trigger = dash.ctx.triggered_id
        if trigger == "dynamics-clear-step":
            return None
        if isinstance(trigger, dict) and any(clicks):
            return _mark(trigger["step"], trigger.get("kind"), trigger.get("subject"))
        return no_update  # the alert table was re-rendered: no click

    @app.callback(*[Output(f"dynamics-{name}", "figure") for name in GRAPHS], Output("dynamics-step-label", "children"),
                  Output("dynamics-step-alert", "children"), Output("dynamics-charts", "style"),
                  Output("dynamics-sampling", "children"),
                  Output("dynamics-evidence-box", "children"), Output("dynamics-drawn", "data"),
                  Input("dynamics-run", "value"), Input("dynamics-step", "data"), Input("dynamics-poll", "n_intervals"),
                  State("dynamics-drawn", "data"))
    def _figures(run: str | None, marked: dict | None, _ticks: int | None, drawn: list | None):
        store = board_context().store
        alerts = len(alert_index(store).alerts(AlertFilter(runs=(run,)))) if run else 0  # the evidence box reads them
        now = [run, marked, store.generation, alerts]
        if now == drawn:  # a poll while nothing was read: no redraw
            return (no_update,) * (len(GRAPHS) + 6)
        mark = StepMark(int(marked["step"]), marked.get("kind", ""), marked.get("subject", "")) if marked else None
        label = f"selected step: {mark.step}" if mark is not None else "click an alert's step to mark it on the charts"
        alert = " · ".join(part for part in (mark.kind, mark.subject) if part) if mark is not None else ""
        sampling = sampling_text(measured_steps(store, run)) + \
            " — markers are the measured steps; a faint dotted line crosses steps not measured" if run else ""
        return *figures(run, mark), label, alert, _charts_style(run), sampling, _evidence(run, mark), now

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
