"""Histograms: per run and tag, an offset (ridgeline) view and a distribution view, with a step slider."""
from __future__ import annotations


import dash
from dash import Dash, Input, Output, State, dcc, html, no_update

from board.components.empty_state import empty_state
from board.components.histogram_figure import distribution_figure, ridgeline_figure
from board.context import board_context
from board.data.store import UnknownSeries

dash.register_page(__name__, path="/histograms", name="Histograms", order=2, title="flowscope · histograms")


def _options() -> list[dict[str, str]]:
    tags = board_context().store.all_histogram_tags()
    return [{"label": f"{run} · {tag}", "value": f"{run}\x1f{tag}"} for run, names in tags.items() for tag in names]


def layout(**_query: str) -> html.Div:
    context = board_context()
    options = _options()
    return html.Div([
        html.H2("Histograms"),
        empty_state(context.store, "histograms") or html.Div(),
        html.Div(className="fs-controls", children=[
            html.Label("series", htmlFor="histograms-series"),
            dcc.Dropdown(id="histograms-series", options=options, value=options[0]["value"] if options else None,
                         clearable=False, style={"minWidth": "28em"}),
            html.Label("step"),
            html.Div(dcc.Slider(id="histograms-step", min=0, max=0, step=1, value=0, marks=None,
                                tooltip={"placement": "bottom"}), style={"flex": "1"}),
        ]),
        html.Div(className="fs-grid2", children=[
            dcc.Graph(id="histograms-ridgeline", config={"displaylogo": False}),
            dcc.Graph(id="histograms-distribution", config={"displaylogo": False}),
        ]),
        dcc.Interval(id="histograms-poll", interval=context.config.browser_poll_ms),
    ])


def _split(series: str) -> tuple[str, str]:
    run, _, tag = series.partition("\x1f")
    return run, tag


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("histograms-series", "options"), Input("histograms-poll", "n_intervals"),
                  State("histograms-series", "options"), prevent_initial_call=True)
    def _new_tags(_ticks: int, current: list[dict[str, str]]):
        options = _options()
        return options if options != current else no_update

    @app.callback(Output("histograms-step", "min"), Output("histograms-step", "max"), Output("histograms-step", "value"),
                  Input("histograms-series", "value"), Input("histograms-poll", "n_intervals"),
                  State("histograms-step", "value"), State("histograms-step", "max"))
    def _steps(series: str | None, _ticks: int | None, value: int, old_max: int):
        if not series:
            return 0, 0, 0
        try:
            points = board_context().store.histograms(*_split(series))
        except UnknownSeries:
            return 0, 0, 0
        if not points:
            return 0, 0, 0
        low, high = points[0].step, points[-1].step
        following = value is None or value >= old_max or dash.ctx.triggered_id == "histograms-series"
        return low, high, high if following else min(max(value, low), high)

    @app.callback(Output("histograms-ridgeline", "figure"), Output("histograms-distribution", "figure"),
                  Input("histograms-series", "value"), Input("histograms-step", "value"))
    def _figures(series: str | None, step: int | None):
        if not series:
            return ridgeline_figure("no histogram yet", "", []), distribution_figure("", "", [])
        run, tag = _split(series)
        try:
            points = board_context().store.histograms(run, tag)
        except UnknownSeries:
            points = []
        title = f"{tag} · {run}"
        return (ridgeline_figure(f"{title} (offset)", run, points, upto_step=step),
                distribution_figure(f"{title} (distribution)", run, points, marked_step=step))
