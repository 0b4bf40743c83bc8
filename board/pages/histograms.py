"""Histograms: per run and tag, an offset (ridgeline) view and a distribution view, with a step slider; redrawn
when new histograms arrive while the page is open."""
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


HOW_TO = ("writer.add_histogram(\"weights/fc1\", values, step)   # any array, each step you want drawn\n"
          "handle = watch(model, writer)                     # or: weight/ and grad/ histograms of every parameter")


def _none_note(hidden: bool) -> html.Div:
    return html.Div(id="histograms-none", className="fs-empty", style={"display": "none"} if hidden else {},
                    children=["No histogram logged in any run yet. Log one with:", html.Pre(HOW_TO)])


def layout(**_query: str) -> html.Div:
    context = board_context()
    options = _options()
    waiting = empty_state(context.store, "histograms")  # no logdir or no run yet: that says why
    return html.Div([
        html.H2("Histograms"),
        waiting or html.Div(),
        _none_note(hidden=bool(options or waiting)),
        html.Div(className="fs-controls", children=[
            html.Label("series", htmlFor="histograms-series"),
            dcc.Dropdown(id="histograms-series", options=options, value=options[0]["value"] if options else None,
                         clearable=False, style={"minWidth": "28em"}),
            html.Label("step"),
            html.Div(dcc.Slider(id="histograms-step", min=0, max=0, step=1, value=0, marks=None,
                                tooltip={"placement": "bottom"}), style={"flex": "1"}),
        ]),
        html.Div(className="fs-grid2", id="histograms-charts", style={} if options else {"display": "none"}, children=[
            dcc.Graph(id="histograms-ridgeline", config={"displaylogo": False}),
            dcc.Graph(id="histograms-distribution", config={"displaylogo": False}),
        ]),
        dcc.Interval(id="histograms-poll", interval=context.config.browser_poll_ms),
        dcc.Store(id="histograms-shown"),
    ])


def _split(series: str) -> tuple[str, str]:
    run, _, tag = series.partition("\x1f")
    return run, tag


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("histograms-series", "options"), Output("histograms-series", "value"),
                  Output("histograms-none", "style"), Output("histograms-charts", "style"),
                  Input("histograms-poll", "n_intervals"), State("histograms-series", "options"),
                  State("histograms-series", "value"), prevent_initial_call=True)
    def _new_tags(_ticks: int, current: list[dict[str, str]], value: str | None):
        options = _options()
        if options == current:
            return no_update, no_update, no_update, no_update
        chosen = value if value else (options[0]["value"] if options else None)
        return options, chosen, {} if not options else {"display": "none"}, {} if options else {"display": "none"}

    @app.callback(Output("histograms-step", "min"), Output("histograms-step", "max"),
                  Output("histograms-step", "value"), Input("histograms-series", "value"),
                  Input("histograms-poll", "n_intervals"),
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
                  Output("histograms-shown", "data"),
                  Input("histograms-series", "value"), Input("histograms-step", "value"),
                  Input("histograms-poll", "n_intervals"), State("histograms-shown", "data"))
    def _figures(series: str | None, step: int | None, _ticks: int | None, shown: list | None):
        if not series:
            return ridgeline_figure("no histogram yet", "", []), distribution_figure("", "", []), None
        run, tag = _split(series)
        try:
            points = board_context().store.histograms(run, tag)
        except UnknownSeries:
            points = []
        drawn = [series, step, len(points), points[-1].step if points else None]
        if drawn == shown:  # a poll with nothing new: no redraw
            return no_update, no_update, no_update
        title = f"{tag} · {run}"
        return (ridgeline_figure(f"{title} (offset)", run, points, upto_step=step),
                distribution_figure(f"{title} (distribution)", run, points, marked_step=step), drawn)
