"""The Scalars page's charts: one per tag, every run the filter matches, smoothing, zoom at full resolution, live."""
from __future__ import annotations

from typing import Any

from dash import MATCH, Dash, Input, Output, Patch, State, dcc, html, no_update

from board.components.relayout import window_from_relayout
from board.components.scalar_figure import TRACES_PER_RUN, run_traces, scalar_figure
from board.context import board_context
from board.data.downsample import DEFAULT_POINTS
from board.data.export import scalars_csv
from board.data.filters import matching
from board.data.views import ScalarView, XAxis, scalar_view

REBUILD_FACTOR = 3  # after live appends, a trace holding this many times the display budget is rebuilt
FIRST_DRAWN_WAIT_MS = 3000
SHOWN, HIDDEN = {}, {"display": "none"}  # a chart no run of the filter has is hidden, not removed


def id_key(name: str) -> str:
    """A tag or group prefix as it goes into a component id: dash 2 cuts "<id>.<property>" at the first dot, also in
    a pattern-matching id's JSON, so "." (and "%") are percent-encoded."""
    return name.replace("%", "%25").replace(".", "%2E")


def id_value(key: str) -> str:
    """The tag or prefix an `id_key` names."""
    return key.replace("%2E", ".").replace("%25", "%")


def chart(tag: str, pinned: bool = False, settings: list[Any] | None = None) -> html.Div:
    """A chart's components. With `settings` (run filter, smoothing, x axis, log y) its figure is drawn here, in the
    page's layout, with the state its callback compares against: the first charts need no request of their own."""
    key = id_key(tag)
    figure, state, style = ({"data": [], "layout": {"height": 320, "title": {"text": tag}}}, None, SHOWN)
    if settings is not None:
        figure, state, style = _drawn(tag, _views(tag, settings[0], x_axis=settings[2], smoothing=settings[1],
                                                  window=None), None, settings)
    return html.Div(className="fs-chart", id={"type": "scalars-chart", "tag": key}, style=style, children=[
        html.Div(className="fs-chart-head", children=[
            html.Button("unpin" if pinned else "pin", id={"type": "scalars-pin", "tag": key, "pinned": pinned},
                        className="fs-small-button", title="show this chart in the pinned row at the top"),
            html.Button("CSV", id={"type": "scalars-csv", "tag": key}, className="fs-small-button",
                        title="download every point of this tag for the runs shown"),
        ]),
        dcc.Graph(id={"type": "scalars-graph", "tag": key}, config={"displaylogo": False}, figure=figure),
        dcc.Store(id={"type": "scalars-state", "tag": key}, data=state),
        dcc.Store(id={"type": "scalars-zoom", "tag": key}),
        dcc.Download(id={"type": "scalars-download", "tag": key}),
    ])


def chart_settings(run_filter: str | None, smoothing: float | None, x_axis: XAxis,
                   log_y: list[str] | None) -> list[Any]:
    """The controls as a chart's state records them (what its callback compares to decide whether to redraw)."""
    return [run_filter or "", float(smoothing or 0), x_axis, "log" in (log_y or [])]


def _runs_with(tag: str, run_filter: str) -> list[str]:
    return matching([run for run, tags in board_context().store.all_scalar_tags().items() if tag in tags], run_filter)


def _views(tag: str, run_filter: str, *, x_axis: XAxis, smoothing: float, window: list[float] | None,
           after: dict[str, int] | None = None) -> list[ScalarView]:
    context = board_context()
    return [scalar_view(context.store, context.smoothing, run, tag, x_axis=x_axis, window=window, smoothing=smoothing,
                        after=0 if after is None else after.get(run, 0))
            for run in _runs_with(tag, run_filter)]


def _state(views: list[ScalarView], window: list[float] | None, settings: list[Any], figure: dict) -> dict[str, Any]:
    """What a chart shows: per run (name, revision, length, points drawn), the x window, the controls, and whether
    its y axis was laid out from the data (unit ticks, a constant's range), which appending points cannot keep."""
    return {"runs": [[v.run, v.revision, v.length, len(v.x)] for v in views], "window": window, "settings": settings,
            "fixed_y": "tickvals" in figure["layout"]["yaxis"] or "range" in figure["layout"]["yaxis"]}


def _drawn(tag: str, views: list[ScalarView], window, settings: list[Any]):
    _, smoothing, x_axis, log_y = settings
    figure = scalar_figure(tag, views, x_axis=x_axis, log_y=log_y, smoothing=smoothing > 0)
    return figure, _state(views, window, settings, figure), SHOWN if views else HIDDEN


def register_chart_callbacks(app: Dash) -> None:
    # Plotly reports every relayout (autosize on first render, y-only pans, legend clicks) through relayoutData.
    # Only x-range changes are passed on, in the browser, so that those events cause no request that could
    # overtake (and make Dash drop) the request of a real zoom.
    app.clientside_callback(
        """
        function(relayout, xAxis) {
            if (relayout && ("xaxis.range[0]" in relayout || "xaxis.range" in relayout
                             || "xaxis.autorange" in relayout)) {
                return {"relayout": relayout, "x_axis": xAxis};
            }
            return window.dash_clientside.no_update;
        }
        """,
        Output({"type": "scalars-zoom", "tag": MATCH}, "data"),
        Input({"type": "scalars-graph", "tag": MATCH}, "relayoutData"),
        State("scalars-x-axis", "value"),
        prevent_initial_call=True,
    )

    # The page's layout holds its first row drawn; the other charts ask for their figures a frame after a chart is
    # on screen (or after FIRST_DRAWN_WAIT_MS whatever happens), so that they do not compete with that row.
    app.clientside_callback(
        """
        function(_id) {
            const started = performance.now();
            return new Promise(resolve => {
                const check = () => {
                    const drawn = document.querySelector("#scalars-sections .js-plotly-plot .scatterlayer .trace");
                    const none = !document.querySelector("#scalars-sections .fs-chart");
                    if (drawn || none || performance.now() - started > %d) {
                        requestAnimationFrame(() => resolve(true));
                    } else {
                        requestAnimationFrame(check);
                    }
                };
                check();
            });
        }
        """ % FIRST_DRAWN_WAIT_MS,
        Output("scalars-first-drawn", "data"), Input("scalars-first-drawn", "id"),
    )

    @app.callback(
        Output({"type": "scalars-graph", "tag": MATCH}, "figure"),
        Output({"type": "scalars-state", "tag": MATCH}, "data"),
        Output({"type": "scalars-chart", "tag": MATCH}, "style"),
        Input({"type": "scalars-zoom", "tag": MATCH}, "data"),
        Input("scalars-smoothing", "value"), Input("scalars-x-axis", "value"), Input("scalars-log-y", "value"),
        Input("scalars-run-filter", "value"), Input("scalars-poll", "n_intervals"),
        Input("scalars-first-drawn", "data"),
        State({"type": "scalars-graph", "tag": MATCH}, "id"), State({"type": "scalars-state", "tag": MATCH}, "data"),
        prevent_initial_call=True,  # charts are created drawn, or wait for "scalars-first-drawn"
    )
    def _chart_update(zoom_data, smoothing, x_axis, log_y, run_filter, _ticks, _first_drawn, graph_id, state):
        """Draw what the controls and the zoom ask for. Compares the wanted view with the one drawn (`state`)
        rather than looking at which input fired, so coalesced or dropped requests cannot lose a zoom."""
        tag = id_value(graph_id["tag"])
        settings = chart_settings(run_filter, smoothing, x_axis, log_y)
        _, smoothing, x_axis, log_y = settings
        zoom = None
        if zoom_data and zoom_data.get("x_axis") == x_axis:
            zoom = window_from_relayout(zoom_data["relayout"], x_axis)
        window = list(zoom.window) if zoom is not None and zoom.window is not None else None
        if state and state["settings"] == settings and state["window"] == window:
            return _live_update(tag, settings, state)
        views = _views(tag, settings[0], x_axis=x_axis, smoothing=smoothing, window=window)
        return _drawn(tag, views, window, settings)

    def _live_update(tag: str, settings: list[Any], state: dict[str, Any]):
        """Append only the points written since the last update; rebuild when that cannot be done by appending."""
        run_filter, smoothing, x_axis, log_y = settings
        if state["window"] is not None:  # zoomed in: the user is reading; leave the window as it is
            return no_update, no_update, no_update
        store = board_context().store
        runs = _runs_with(tag, run_filter)
        held = {run: (revision, length, shown) for run, revision, length, shown in state["runs"]}
        versions = {run: store.scalar_version(run, tag) for run in held if run in runs}
        if runs == list(held) and all(versions[run] == (revision, length)
                                      for run, (revision, length, _) in held.items()):
            return no_update, no_update, no_update
        rebuild = runs != list(held) or state.get("fixed_y") or any(
            shown > REBUILD_FACTOR * DEFAULT_POINTS or versions[run][0] != revision
            for run, (revision, _, shown) in held.items()
        )
        if rebuild:
            return _drawn(tag, _views(tag, run_filter, x_axis=x_axis, smoothing=smoothing, window=None), None, settings)
        news = _views(tag, run_filter, x_axis=x_axis, smoothing=smoothing, window=None,
                      after={run: length for run, (_, length, _) in held.items()})
        if any(view.sampling is not None for view in news):  # its line breaks and legend are drawn from every point
            return _drawn(tag, _views(tag, run_filter, x_axis=x_axis, smoothing=smoothing, window=None), None, settings)
        patch = Patch()
        new_runs = []
        for index, view in enumerate(news):
            for offset, trace in enumerate(run_traces(view, x_axis, smoothing > 0)):
                target = patch["data"][index * TRACES_PER_RUN + offset]
                for key in ("x", "y", "text", "customdata"):
                    if len(trace.get(key, ())):
                        # NOTE: Patch.extend takes a list (dash 4 refuses a NumPy array); list() keeps the NumPy
                        # scalars, which go out as the float32's shortest decimal, as the first draw wrote them.
                        target[key].extend(list(trace[key]))
            new_runs.append([view.run, view.revision, view.length, held[view.run][2] + len(view.x)])
        return patch, {**state, "runs": new_runs}, no_update

    @app.callback(Output({"type": "scalars-download", "tag": MATCH}, "data"),
                  Input({"type": "scalars-csv", "tag": MATCH}, "n_clicks"),
                  State({"type": "scalars-csv", "tag": MATCH}, "id"), State("scalars-run-filter", "value"),
                  prevent_initial_call=True)
    def _download(_clicks: int, button_id: dict[str, str], run_filter: str):
        store = board_context().store
        tag = id_value(button_id["tag"])
        series = [(run, tag, store.scalars(run, tag)[0]) for run in _runs_with(tag, run_filter or "")]
        return dcc.send_string(scalars_csv(series), filename=f"{tag.replace('/', '_')}.csv", type="text/csv")
