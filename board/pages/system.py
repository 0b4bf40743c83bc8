"""System: CPU, RSS and per-GPU memory, utilisation, power and temperature, on the step or a time axis."""
from __future__ import annotations

from typing import Any

import dash
from dash import Dash, Input, Output, State, dcc, html, no_update

from board.components.empty_state import empty_state
from board.components.system_figure import system_figure
from board.context import board_context
from board.data.system import GPU_CHARTS, engine_memory_tags, gpu_status, gpus, nvml_note, series, system_runs
from board.data.store import UnknownSeries
from board.data.views import X_AXES
from instrumentation.format.tags import CPU_PERCENT, RSS_BYTES, SYSTEM, gpu_tag, system_tag

dash.register_page(__name__, path="/system", name="System", order=6, title="flowscope · system")


def layout(**_query: str) -> html.Div:
    """The controls and charts of the first run with system metrics; a page opened before any run sampled shows
    what to start and fills in once one does (the poll runs either way)."""
    context = board_context()
    runs = system_runs(context.store)
    run = runs[0] if runs else None
    return html.Div([
        html.H2("System"),
        html.Div(className="fs-controls", children=[
            dcc.Dropdown(id="system-run", options=runs, value=run, clearable=False, style={"minWidth": "20em"}),
            dcc.RadioItems(id="system-x-axis", options=[{"label": a, "value": a} for a in X_AXES], value="step",
                           inline=True),
        ]),
        html.Div(id="system-nvml-note", className="fs-note", children=_note(run)),
        html.Div(id="system-charts", className="fs-grid2", children=_charts(run, "step")),
        dcc.Store(id="system-version", data=_version(run, "step")),
        dcc.Interval(id="system-poll", interval=context.config.browser_poll_ms),
    ])


def _no_runs() -> html.Div:
    store = board_context().store
    return empty_state(store, "system") or html.Div(
        "No system metrics yet: start instrumentation.SystemSampler(writer) in a training run.", className="fs-empty",
        id="empty-system")


def _charts(run: str | None, x_axis: str) -> list[Any]:
    if run is None:
        return [_no_runs()]
    store = board_context().store
    charts = []
    host = [("CPU (process + children)", [system_tag(CPU_PERCENT)]),
            ("RSS (process + children)", [system_tag(RSS_BYTES)])]
    # NVML's memory of each GPU beside the engine's own device memory (mem/cuda:<i>/allocated|reserved_bytes)
    gpu_charts = [(f"GPU {index} {title}", [gpu_tag(index, metric) for metric in metrics]
                   + (engine_memory_tags(index) if title == "memory" else []))
                  for index in gpus(store, run) for title, metrics in GPU_CHARTS]
    for title, tags in host + gpu_charts:
        lines = [s for tag in tags if (s := series(store, run, tag, x_axis)) is not None]
        if lines or title.startswith(("CPU", "RSS")):
            key = title.lower().replace(" ", "-").replace("(", "").replace(")", "").replace("+", "and")
            charts.append(dcc.Graph(id=f"system-{key}", config={"displaylogo": False},
                                    figure=system_figure(title, lines, x_axis)))
    return charts


def _note(run: str | None) -> str:
    return "" if run is None else nvml_note(gpu_status(board_context().store, run)) or ""


def _version(run: str | None, x_axis: str) -> list:
    """What the charts show: the run, the x axis and (tag, revision, length) of the run's `sys/` series and engine
    device memory series. The charts
    are rebuilt only when this changes, whichever input fired (a poll tick and a click may arrive as one call)."""
    store = board_context().store
    try:
        tags = store.scalar_tags(run)
        engine_tags = {t for index in gpus(store, run) for t in engine_memory_tags(index)}
        tags = [t for t in tags if t.startswith(SYSTEM) or t in engine_tags]
    except UnknownSeries:
        return [run, x_axis]
    return [run, x_axis, *([tag, *store.scalar_version(run, tag)] for tag in tags)]


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("system-nvml-note", "children"), Input("system-run", "value"), prevent_initial_call=True)
    def _run_note(run: str):
        return _note(run)

    @app.callback(Output("system-charts", "children"), Output("system-version", "data"),
                  Output("system-run", "options"), Output("system-run", "value"), Input("system-run", "value"),
                  Input("system-x-axis", "value"), Input("system-poll", "n_intervals"), State("system-version", "data"),
                  State("system-run", "options"), prevent_initial_call=True)
    def _update(selected: str | None, x_axis: str, _ticks: int, shown: list | None, options: list | None):
        """Redraw when the run's series changed (or the run or axis did); list runs that started sampling since."""
        runs = system_runs(board_context().store)
        run = selected if selected in runs else (runs[0] if runs else None)
        new_options = runs if runs != options else no_update
        new_value = run if run != selected else no_update
        version = _version(run, x_axis)
        if version == shown:
            return no_update, no_update, new_options, new_value  # nothing new: keep the charts (and the zoom)
        return _charts(run, x_axis), version, new_options, new_value
