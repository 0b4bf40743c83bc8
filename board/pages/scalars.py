"""Scalars: one chart per tag (grouped by prefix), every matching run, smoothing, zoom at full resolution, live."""
from __future__ import annotations

from typing import Any

import dash
from dash import MATCH, Dash, Input, Output, Patch, State, dcc, html, no_update

from board.components.empty_state import empty_state
from board.components.scalar_figure import TRACES_PER_RUN, run_traces, scalar_figure
from board.context import board_context
from board.data.export import scalars_csv
from board.data.filters import matching, pattern_error
from board.data.tag_groups import group_tags
from board.data.downsample import DEFAULT_POINTS
from board.data.views import X_AXES, ScalarView, XAxis, scalar_view
from board.components.relayout import window_from_relayout

dash.register_page(__name__, path="/scalars", name="Scalars", order=1, title="flowscope · scalars")

REBUILD_FACTOR = 3  # after live appends, a trace holding this many times the display budget is rebuilt


def layout(**_query: str) -> html.Div:
    context = board_context()
    return html.Div([
        html.H2("Scalars"),
        html.Div(className="fs-controls", children=[
            dcc.Input(id="scalars-run-filter", type="text", placeholder="runs (regex)", debounce=True, value="",
                      style={"width": "14em"}),
            dcc.Input(id="scalars-tag-filter", type="text", placeholder="tags (regex)", debounce=True, value="",
                      style={"width": "14em"}),
            html.Label("smoothing"),
            html.Div(dcc.Slider(id="scalars-smoothing", min=0, max=0.99, step=0.01, value=0.6,
                                marks={0: "0", 0.5: "0.5", 0.99: "0.99"}), style={"width": "14em"}),
            dcc.RadioItems(id="scalars-x-axis", options=[{"label": a, "value": a} for a in X_AXES], value="step",
                           inline=True),
            dcc.Checklist(id="scalars-log-y", options=[{"label": "log y", "value": "log"}], value=[], inline=True),
        ]),
        html.Div(id="scalars-sections", children=_sections("", "")),
        dcc.Store(id="scalars-tag-list", data=_tag_list("", "")),
        dcc.Interval(id="scalars-poll", interval=context.config.browser_poll_ms),
    ])


def _tag_list(run_filter: str, tag_filter: str) -> list[str]:
    tags_by_run = board_context().store.all_scalar_tags()
    runs = matching(list(tags_by_run), run_filter)
    return matching(sorted({tag for run in runs for tag in tags_by_run[run]}), tag_filter)


def _sections(run_filter: str, tag_filter: str) -> list[Any]:
    store = board_context().store
    note = empty_state(store, "scalars")
    if note is not None:
        return [note]
    errors = [f"{label}: {error}" for label, pattern in (("runs", run_filter), ("tags", tag_filter))
              if (error := pattern_error(pattern)) is not None]
    if errors:
        return [html.Div(f"Invalid regular expression ({'; '.join(errors)}). Filters use RE2 syntax: no "
                         "backreferences or lookaround.", className="fs-empty", id="scalars-filter-error")]
    tags = _tag_list(run_filter, tag_filter)
    if not tags:
        return [html.Div("No scalar tag matches the filters.", className="fs-empty", id="empty-scalars")]
    return [
        html.Details(open=True, className="fs-section", children=[
            html.Summary(f"{prefix} ({len(members)})"),
            html.Div(className="fs-grid2", children=[_chart(tag) for tag in members]),
        ])
        for prefix, members in group_tags(tags)
    ]


def _chart(tag: str) -> html.Div:
    return html.Div(className="fs-chart", children=[
        dcc.Graph(id={"type": "scalars-graph", "tag": tag}, config={"displaylogo": False},
                  figure={"data": [], "layout": {"height": 320, "title": {"text": tag}}}),
        dcc.Store(id={"type": "scalars-state", "tag": tag}),
        dcc.Store(id={"type": "scalars-zoom", "tag": tag}),
        html.Button("CSV", id={"type": "scalars-csv", "tag": tag}, className="fs-small-button",
                    title="download every point of this tag for the runs shown"),
        dcc.Download(id={"type": "scalars-download", "tag": tag}),
    ])


def _views(tag: str, run_filter: str, *, x_axis: XAxis, smoothing: float, window: list[float] | None,
           after: dict[str, int] | None = None) -> list[ScalarView]:
    context = board_context()
    runs = [run for run, tags in context.store.all_scalar_tags().items() if tag in tags]
    views = []
    for run in matching(runs, run_filter):
        start = 0 if after is None else after.get(run, 0)
        views.append(scalar_view(context.store, context.smoothing, run, tag, x_axis=x_axis, window=window,
                                 smoothing=smoothing, after=start))
    return views


def _state(views: list[ScalarView], window: list[float] | None, settings: list[Any]) -> dict[str, Any]:
    """What a chart shows: per run (name, revision, length, points drawn), the x window and the controls."""
    return {"runs": [[v.run, v.revision, v.length, len(v.x)] for v in views], "window": window, "settings": settings}


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("scalars-sections", "children"), Output("scalars-tag-list", "data"),
                  Input("scalars-poll", "n_intervals"), Input("scalars-run-filter", "value"),
                  Input("scalars-tag-filter", "value"), State("scalars-tag-list", "data"), prevent_initial_call=True)
    def _rebuild_sections(_ticks: int, run_filter: str, tag_filter: str, shown: list[str]):
        tags = _tag_list(run_filter or "", tag_filter or "")
        if tags == shown and dash.ctx.triggered_id == "scalars-poll":
            return no_update, no_update
        return _sections(run_filter or "", tag_filter or ""), tags

    # Plotly reports every relayout (autosize on first render, y-only pans, legend clicks) through relayoutData.
    # Only x-range changes are passed on, in the browser, so that those events cause no request that could
    # overtake (and make Dash drop) the request of a real zoom.
    app.clientside_callback(
        """
        function(relayout, xAxis) {
            if (relayout && ("xaxis.range[0]" in relayout || "xaxis.range" in relayout || "xaxis.autorange" in relayout)) {
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

    @app.callback(
        Output({"type": "scalars-graph", "tag": MATCH}, "figure"),
        Output({"type": "scalars-state", "tag": MATCH}, "data"),
        Input({"type": "scalars-zoom", "tag": MATCH}, "data"),
        Input("scalars-smoothing", "value"), Input("scalars-x-axis", "value"), Input("scalars-log-y", "value"),
        Input("scalars-run-filter", "value"), Input("scalars-poll", "n_intervals"),
        State({"type": "scalars-graph", "tag": MATCH}, "id"), State({"type": "scalars-state", "tag": MATCH}, "data"),
    )
    def _chart_update(zoom_data, smoothing, x_axis, log_y, run_filter, _ticks, graph_id, state):
        """Draw what the controls and the zoom ask for. Compares the wanted view with the one drawn (`state`)
        rather than looking at which input fired, so coalesced or dropped requests cannot lose a zoom."""
        tag, smoothing, log_y = graph_id["tag"], float(smoothing or 0), "log" in (log_y or [])
        settings = [run_filter or "", smoothing, x_axis, log_y]
        zoom = None
        if zoom_data and zoom_data.get("x_axis") == x_axis:
            zoom = window_from_relayout(zoom_data["relayout"], x_axis)
        window = list(zoom.window) if zoom is not None and zoom.window is not None else None
        if state and state["settings"] == settings and state["window"] == window:
            return _live_update(tag, settings, state)
        views = _views(tag, settings[0], x_axis=x_axis, smoothing=smoothing, window=window)
        figure = scalar_figure(tag, views, x_axis=x_axis, log_y=log_y, smoothing=smoothing > 0)
        return figure, _state(views, window, settings)

    def _live_update(tag: str, settings: list[Any], state: dict[str, Any]):
        """Append only the points written since the last update; rebuild when that cannot be done by appending."""
        run_filter, smoothing, x_axis, log_y = settings
        if state["window"] is not None:  # zoomed in: the user is reading; leave the window as it is
            return no_update, no_update
        store = board_context().store
        runs = matching([run for run, tags in store.all_scalar_tags().items() if tag in tags], run_filter)
        held = {run: (revision, length, shown) for run, revision, length, shown in state["runs"]}
        versions = {run: store.scalar_version(run, tag) for run in held if run in runs}
        if runs == list(held) and all(versions[run] == (revision, length) for run, (revision, length, _) in held.items()):
            return no_update, no_update
        rebuild = runs != list(held) or any(
            shown > REBUILD_FACTOR * DEFAULT_POINTS or versions[run][0] != revision
            for run, (revision, _, shown) in held.items()
        )
        if rebuild:
            views = _views(tag, run_filter, x_axis=x_axis, smoothing=smoothing, window=None)
            return scalar_figure(tag, views, x_axis=x_axis, log_y=log_y, smoothing=smoothing > 0), _state(views, None, settings)
        news = _views(tag, run_filter, x_axis=x_axis, smoothing=smoothing, window=None,
                      after={run: length for run, (_, length, _) in held.items()})
        patch = Patch()
        new_runs = []
        for index, view in enumerate(news):
            for offset, trace in enumerate(run_traces(view, x_axis, smoothing > 0)):
                target = patch["data"][index * TRACES_PER_RUN + offset]
                if trace["x"]:
                    target["x"].extend(trace["x"])
                    target["y"].extend(trace["y"])
                    if "text" in trace:
                        target["text"].extend(trace["text"])
            new_runs.append([view.run, view.revision, view.length, held[view.run][2] + len(view.x)])
        return patch, {**state, "runs": new_runs}

    @app.callback(Output({"type": "scalars-download", "tag": MATCH}, "data"),
                  Input({"type": "scalars-csv", "tag": MATCH}, "n_clicks"),
                  State({"type": "scalars-csv", "tag": MATCH}, "id"), State("scalars-run-filter", "value"),
                  prevent_initial_call=True)
    def _download(_clicks: int, button_id: dict[str, str], run_filter: str):
        store = board_context().store
        tag = button_id["tag"]
        runs = matching([run for run, tags in store.all_scalar_tags().items() if tag in tags], run_filter or "")
        series = [(run, tag, store.scalars(run, tag)[0]) for run in runs]
        return dcc.send_string(scalars_csv(series), filename=f"{tag.replace('/', '_')}.csv", type="text/csv")
