"""HParams: runs × hyperparameters × final metrics (sortable, filterable), parallel coordinates and a scatter."""
from __future__ import annotations

import hashlib
import math

import dash
import orjson
from dash import Dash, Input, Output, State, dash_table, dcc, html, no_update

from board.components.empty_state import empty_state
from board.components.hparams_figures import metric_scatter, parallel_coordinates
from board.context import board_context
from board.data.hparams_table import HParamsTable, hparams_table

dash.register_page(__name__, path="/hparams", name="HParams", order=10, title="flowscope · hparams",
                   preload_plotly=True)
RUN_COLUMN = "run"


def _column_id(kind: str, name: str) -> str:
    return f"{kind}:{name}"


def _cell(value):
    """Table cells: numbers stay numbers (sortable); NaN/±Inf as text (JSON has no NaN)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


_LAST_TABLE_DATA: list = [None, None]  # [table, (columns, rows)]: the tables are cached per store generation


def table_data(table: HParamsTable) -> tuple[list[dict], list[dict]]:
    """The DataTable's columns and rows (the same lists for the same table: callers do not change them)."""
    held, data = _LAST_TABLE_DATA
    if held is table:
        return data
    data = _table_data(table)
    _LAST_TABLE_DATA[:] = [table, data]
    return data


def _table_data(table: HParamsTable) -> tuple[list[dict], list[dict]]:
    columns = [{"name": ["", RUN_COLUMN], "id": RUN_COLUMN}]
    columns += [{"name": ["hyperparameter", name], "id": _column_id("h", name), "type": "any"}
                for name in table.hparam_names]
    columns += [{"name": ["metric (last value)", tag], "id": _column_id("m", tag), "type": "numeric",
                 "format": {"specifier": ".6~g"}} for tag in table.metric_tags]
    rows = []
    for row in table.rows:
        record = {RUN_COLUMN: row.run}
        record.update({_column_id("h", name): _cell(value) for name, value in row.hparams.items()})
        record.update({_column_id("m", tag): _cell(value) for tag, value in row.metrics.items()})
        rows.append(record)
    return columns, rows


def _shown(generation: int, rows: list[dict]) -> dict:
    return {"generation": generation,
            "digest": hashlib.blake2b(orjson.dumps(rows, option=orjson.OPT_NON_STR_KEYS), digest_size=16).hexdigest()}


def _charts_style(table: HParamsTable) -> dict[str, str]:
    return {} if table.rows else {"display": "none"}


def layout(**_query: str) -> html.Div:
    context = board_context()
    generation = context.store.generation
    table = hparams_table(context.store)
    columns, rows = table_data(table)
    metric = table.metric_tags[0] if table.metric_tags else None
    hparam = table.hparam_names[0] if table.hparam_names else None
    return html.Div([
        html.H2("HParams"),
        empty_state(context.store, "hparams") or html.Div(
            ["No hyperparameters logged in any run yet. Log a run's with:",
             html.Pre('writer.add_hparams({"lr": 0.01, "batch_size": 64}, {"hparam/accuracy": accuracy})')]
            if not table.rows else
            f"{len(table.rows)} runs with hyperparameters; click a column header to sort, type in the second row to "
            "filter (e.g. > 0.5, or text); a run without a hyperparameter has no place on its axis",
            className="fs-empty" if not table.rows else "fs-muted", id="hparams-summary"),
        html.Div([html.Div(problem, className="fs-muted") for problem in table.problems], id="hparams-problems"),
        dash_table.DataTable(id="hparams-table", columns=columns, data=rows, sort_action="native",
                             filter_action="native", page_action="native", page_size=50, merge_duplicate_headers=True,
                             style_table={"overflowX": "auto"},
                             style_cell={"fontSize": "13px", "padding": "4px", "textAlign": "left"},
                             style_header={"fontWeight": "bold"}),
        html.Div(className="fs-controls", children=[
            html.Label("colour by", htmlFor="hparams-color"),
            dcc.Dropdown(id="hparams-color", options=list(table.metric_tags), value=metric, style={"minWidth": "16em"}),
        ]),
        html.Div(id="hparams-charts", style=_charts_style(table), children=[  # no rows: the note above, no blank charts
        dcc.Graph(id="hparams-parallel", figure=parallel_coordinates(table, metric), config={"displaylogo": False}),
        html.Div(className="fs-controls", children=[
            html.Label("metric", htmlFor="hparams-metric"),
            dcc.Dropdown(id="hparams-metric", options=list(table.metric_tags), value=metric,
                         style={"minWidth": "16em"}),
            html.Label("against", htmlFor="hparams-hparam"),
            dcc.Dropdown(id="hparams-hparam", options=list(table.hparam_names), value=hparam,
                         style={"minWidth": "16em"}),
        ]),
        dcc.Graph(id="hparams-scatter", figure=metric_scatter(table, hparam, metric), config={"displaylogo": False}),
        ]),
        dcc.Interval(id="hparams-poll", interval=context.config.browser_poll_ms),
        dcc.Store(id="hparams-generation", data=_shown(generation, rows)),
    ])


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("hparams-table", "columns"), Output("hparams-table", "data"),
                  Output("hparams-generation", "data"),
                  Input("hparams-poll", "n_intervals"), State("hparams-generation", "data"), prevent_initial_call=True)
    def _refresh(_ticks: int, shown: dict | None):
        """New rows only when they differ from those shown; the browser sends the generation and a digest of the
        rows it shows, not the rows (so no work while the directory is unchanged, and no redraw when a change
        left the table as it was)."""
        store = board_context().store
        generation = store.generation
        if shown and generation == shown["generation"]:
            return no_update, no_update, no_update
        columns, rows = table_data(hparams_table(store))
        now = _shown(generation, rows)
        if shown and now["digest"] == shown["digest"]:
            return no_update, no_update, now
        return columns, rows, now

    @app.callback(Output("hparams-parallel", "figure"), Output("hparams-charts", "style"),
                  Input("hparams-color", "value"), Input("hparams-table", "data"), prevent_initial_call=True)
    def _parallel(metric: str | None, _rows: list[dict]):
        table = hparams_table(board_context().store)
        return parallel_coordinates(table, metric), _charts_style(table)

    @app.callback(Output("hparams-scatter", "figure"), Input("hparams-hparam", "value"),
                  Input("hparams-metric", "value"), Input("hparams-table", "data"), prevent_initial_call=True)
    def _scatter(hparam: str | None, metric: str | None, _rows: list[dict]):
        return metric_scatter(hparams_table(board_context().store), hparam, metric)
