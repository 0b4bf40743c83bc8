"""Graph: a run's traced graphs and GraphDefs, grouped by module, coloured by the profile; passes; eager vs traced."""
from __future__ import annotations

import dash
from dash import Dash, Input, Output, State, dash_table, dcc, html, no_update

from board.components.empty_state import empty_state
from board.components.graph_figure import graph_figure
from board.components.graph_tables import comparison_rows, fused_table, node_detail, passes_table
from board.context import board_context
from board.data.graph import (GraphCache, GraphView, list_graphs, pass_marks, run_metadata_tags, runs_with_graphs,
                              sibling)
from board.data.graph_layout import default_expanded, groups_of, layout_graph
from board.data.graph_profile import RecordCache, compare, join_costs, pick_capture, run_captures
from board.data.profile_captures import find_captures
from board.data.store import UnknownSeries
from instrumentation.format.graph_file import GraphFileError

dash.register_page(__name__, path="/graph", name="Graph", order=6, title="flowscope · graph")

_graphs = GraphCache()
_records = RecordCache()
NO_CAPTURE = ""


def _run_options() -> list[str]:
    return sorted(runs_with_graphs(board_context().store))


def _graph_options(run: str | None) -> tuple[list[str], list[str]]:
    if not run:
        return [], []
    try:
        listing = list_graphs(board_context().store, run)
    except UnknownSeries:
        return [], []
    return [entry.name for entry in listing.entries], list(listing.problems)


def _open(run: str | None, name: str | None) -> tuple[GraphView | None, str]:
    if not run or not name:
        return None, ""
    try:
        return _graphs.open(board_context().store, run, name), ""
    except UnknownSeries as error:
        return None, str(error)
    except (GraphFileError, OSError) as error:
        return None, f"graph {name} of run {run} is not shown: {error}"


def _preferred_graph(names: list[str]) -> str | None:
    return next((name for name in names if name.endswith(".optimised")), names[0] if names else None)


def layout(**_query: str) -> html.Div:
    context = board_context()
    runs = _run_options()
    captures = [{"label": c.label, "value": c.key} for c in find_captures(context.store.logdir).values()]
    return html.Div([
        html.H2("Graph"),
        empty_state(context.store, "graph") or html.Div(),
        html.Div(id="graph-none", className="fs-empty", style=_shown(not runs), children=[
            html.P("No graph in any run yet. "
                   "Train under engine.function and its traced graphs are written to the run:"),
            html.Pre(html.Code("train_step = engine.function(train_step, logdir=writer.log_dir)  "
                               "# plugins/graph/train_step.<n>.<stage>.json")),
            html.P(["or, from PyTorch, ", html.Code("writer.add_graph(model, example_input)"),
                    " (a TensorBoard GraphDef)."]),
        ]),
        html.Div(id="graph-views", style=_shown(bool(runs)), children=_views(runs, captures)),
        dcc.Interval(id="graph-poll", interval=context.config.browser_poll_ms),
    ])


def _shown(visible: bool) -> dict:
    return {} if visible else {"display": "none"}


def _views(runs: list[str], captures: list[dict]) -> list:
    """Everything the page draws once a run has a graph."""
    return [
        html.Div(className="fs-controls", children=[
            html.Label("run", htmlFor="graph-run"),
            dcc.Dropdown(id="graph-run", options=runs, value=runs[0] if runs else None, clearable=False,
                         style={"minWidth": "14em"}),
            html.Label("graph", htmlFor="graph-name"),
            dcc.Dropdown(id="graph-name", options=[], clearable=False, style={"minWidth": "22em"}),
            html.Label("colour by"),
            dcc.RadioItems(id="graph-color", options=["phase", "time", "memory"], value="time", inline=True),
        ]),
        html.Div(className="fs-controls", children=[
            html.Label("profile", htmlFor="graph-capture"),
            dcc.Dropdown(id="graph-capture", options=[], clearable=True, placeholder="no profile capture",
                         style={"minWidth": "30em"}),
            html.Button("Expand all", id="graph-expand-all"),
            html.Button("Collapse all", id="graph-collapse-all"),
        ]),
        html.Div(className="fs-controls", children=[
            html.Label("expanded modules", htmlFor="graph-expanded"),
            dcc.Dropdown(id="graph-expanded", options=[], value=[], multi=True, style={"minWidth": "40em"},
                         placeholder="all modules collapsed: click a square to open it"),
        ]),
        html.Div(id="graph-summary", className="fs-muted"),
        html.Div(id="graph-problems", className="fs-notice", style={"display": "none"}),
        dcc.Graph(id="graph-figure", config={"displaylogo": False, "scrollZoom": True}),
        html.Div(id="graph-node-detail", className="fs-muted"),
        html.H3("Optimisation passes"),
        html.Div(id="graph-passes"),
        html.Div(id="graph-fused"),
        html.H3("Eager vs traced"),
        html.Div(className="fs-controls", children=[
            html.Label("eager capture", htmlFor="graph-eager-capture"),
            dcc.Dropdown(id="graph-eager-capture", options=captures, style={"minWidth": "24em"}),
            html.Label("traced capture", htmlFor="graph-traced-capture"),
            dcc.Dropdown(id="graph-traced-capture", options=captures, style={"minWidth": "24em"}),
            dcc.RadioItems(id="graph-compare-by", options=["op", "module"], value="module", inline=True),
        ]),
        html.Div(id="graph-compare-note", className="fs-muted"),
        dash_table.DataTable(id="graph-compare", columns=[
            {"id": "key", "name": "op / module"}, {"id": "eager_ms", "name": "eager ms/step", "type": "numeric"},
            {"id": "traced_ms", "name": "traced ms/step", "type": "numeric"},
            {"id": "ratio", "name": "traced / eager", "type": "numeric"},
            {"id": "eager_bytes", "name": "eager bytes/step", "type": "numeric"},
            {"id": "traced_bytes", "name": "traced bytes/step", "type": "numeric"}], data=[], sort_action="native",
            page_size=25, style_cell={"fontFamily": "system-ui, sans-serif", "fontSize": 13, "padding": "4px 8px"}),
    ]


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("graph-run", "options"), Output("graph-run", "value"), Output("graph-none", "style"),
                  Output("graph-views", "style"), Input("graph-poll", "n_intervals"), State("graph-run", "options"),
                  State("graph-run", "value"), prevent_initial_call=True)
    def _runs(_ticks: int, current: list[str] | None, value: str | None):
        runs = _run_options()
        if runs == current:
            return no_update, no_update, no_update, no_update
        return runs, value if value in runs else (runs[0] if runs else None), _shown(not runs), _shown(bool(runs))

    @app.callback(Output("graph-name", "options"), Output("graph-name", "value"), Input("graph-run", "value"),
                  Input("graph-poll", "n_intervals"), State("graph-name", "options"), State("graph-name", "value"))
    def _names(run: str | None, _ticks: int | None, current: list[str] | None, value: str | None):
        names, _ = _graph_options(run)
        if names == current and value in names:
            return no_update, no_update
        return names, value if value in names else _preferred_graph(names)

    @app.callback(Output("graph-capture", "options"), Output("graph-capture", "value"),
                  Output("graph-eager-capture", "value"), Output("graph-traced-capture", "value"),
                  Input("graph-run", "value"), Input("graph-name", "value"))
    def _captures(run: str | None, name: str | None):
        logdir = board_context().store.logdir
        captures = run_captures(logdir, run) if run else {}
        view, _ = _open(run, name)
        chosen = pick_capture(captures, _records, traced=view is not None and view.stage == "optimised")
        eager = pick_capture(captures, _records, traced=False, strict=True)
        traced = pick_capture(captures, _records, traced=True, strict=True)
        return ([{"label": c.label, "value": c.key} for c in captures.values()], chosen.key if chosen else None,
                eager.key if eager else None, traced.key if traced else None)

    @app.callback(Output("graph-expanded", "options"), Output("graph-expanded", "value"),
                  Input("graph-run", "value"), Input("graph-name", "value"), Input("graph-expand-all", "n_clicks"),
                  Input("graph-collapse-all", "n_clicks"), Input("graph-figure", "clickData"),
                  State("graph-expanded", "value"))
    def _expanded(run: str | None, name: str | None, _all: int | None, _none: int | None, click: dict | None,
                  current: list[str] | None):
        view, _ = _open(run, name)
        if view is None:
            return [], []
        groups = groups_of(view)
        options = [{"label": f"{group.label} ({group.size})", "value": group.key} for group in groups]
        trigger = dash.ctx.triggered_id
        if trigger == "graph-expand-all":
            return no_update, [group.key for group in groups]
        if trigger == "graph-collapse-all":
            return no_update, []
        if trigger == "graph-figure":
            key = ((click or {}).get("points") or [{}])[0].get("customdata")
            if key in {group.key for group in groups} and key not in (current or []):
                return no_update, [*(current or []), key]
            return no_update, no_update
        return options, list(default_expanded(view))

    @app.callback(Output("graph-figure", "figure"), Output("graph-summary", "children"),
                  Output("graph-problems", "children"), Output("graph-problems", "style"),
                  Output("graph-passes", "children"), Output("graph-fused", "children"),
                  Input("graph-run", "value"), Input("graph-name", "value"), Input("graph-expanded", "value"),
                  Input("graph-color", "value"), Input("graph-capture", "value"))
    def _figure(run: str | None, name: str | None, expanded: list[str] | None, mode: str, capture_key: str | None):
        view, problem = _open(run, name)
        _, listing_problems = _graph_options(run)
        problems = ([problem] if problem else []) + listing_problems
        problem_box = ([html.Div(line) for line in problems], {"display": "block" if problems else "none"})
        if view is None:
            return (graph_figure(None, None), "", *problem_box, "", "")
        costs, summary = None, _summary(view)
        if view.source == "graphdef":
            tags = run_metadata_tags(board_context().store, view.run)
            summary += f" · run metadata: {', '.join(tags)}" if tags else ""
        capture = run_captures(board_context().store.logdir, run).get(capture_key or "")
        if capture is not None:
            try:
                costs = join_costs(view, _records.load(capture))
                summary += (f" · profile {capture.capture_id}: {costs.matched_records:,} op records joined by "
                            f"{costs.joined_by}, {costs.unmatched_records:,} not joined, {costs.steps} steps")
            except (OSError, ValueError) as error:
                problems.append(f"cannot read the capture {capture.path.name}: {error}")
                problem_box = ([html.Div(line) for line in problems], {"display": "block"})
        if costs is None and mode != "phase":
            summary += f" · no profile capture chosen: coloured by phase, not {mode}"
        store = board_context().store
        optimised = view if view.stage == "optimised" else sibling(store, _graphs, view, "optimised")
        unoptimised = view if view.stage == "unoptimised" else sibling(store, _graphs, view, "unoptimised")
        passes = optimised.passes if optimised is not None else ()
        drawn = layout_graph(view, set(expanded or ()))
        if drawn.back_edges:
            summary += f" · {drawn.back_edges} edges drawn backwards (between collapsed modules)"
        figure = graph_figure(view, drawn, costs, mode, pass_marks(passes), title=f"{view.run} · {view.name}")
        return figure, summary, *problem_box, passes_table(passes, unoptimised), fused_table(view)

    @app.callback(Output("graph-node-detail", "children"), Input("graph-figure", "clickData"),
                  State("graph-run", "value"), State("graph-name", "value"), prevent_initial_call=True)
    def _detail(click: dict | None, run: str | None, name: str | None):
        view, _ = _open(run, name)
        key = ((click or {}).get("points") or [{}])[0].get("customdata")
        return node_detail(view, key) if view is not None else ""

    @app.callback(Output("graph-compare", "data"), Output("graph-compare-note", "children"),
                  Input("graph-eager-capture", "value"), Input("graph-traced-capture", "value"),
                  Input("graph-compare-by", "value"))
    def _compare(eager_key: str | None, traced_key: str | None, by: str):
        captures = find_captures(board_context().store.logdir)
        eager, traced = captures.get(eager_key or ""), captures.get(traced_key or "")
        if eager is None or traced is None:
            return [], ("Pick an eager and a traced capture (of this run or of two runs) to compare them per op "
                        "and per module.")
        try:
            rows = compare(_records.load(eager), _records.load(traced), by)
        except (OSError, ValueError) as error:
            return [], f"cannot read a capture: {error}"
        eager_ms, traced_ms = sum(r.eager_ms for r in rows), sum(r.traced_ms for r in rows)
        return comparison_rows(rows), (f"{eager.label} vs {traced.label}: {eager_ms:.3f} vs {traced_ms:.3f} ms of "
                                       f"ops per step")


def _summary(view: GraphView) -> str:
    head = f"{view.function} ({view.signature}) · {view.stage}" if view.source == "flowscope" else \
        "TensorBoard GraphDef (add_graph)"
    trace = f" · traced in {view.trace_ms:.1f} ms" if view.trace_ms is not None else ""
    return f"{head} · {view.op_count} ops, {len(view.nodes) - view.op_count} inputs/parameters{trace}"
