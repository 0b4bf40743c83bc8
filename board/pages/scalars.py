"""Scalars: the user's own tags first, instrumentation groups collapsed, a pinned row; one chart per tag."""
from __future__ import annotations

from typing import Any

import dash
from dash import ALL, MATCH, Dash, Input, Output, State, dcc, html, no_update

from board.components.empty_state import empty_state
from board.context import board_context
from board.data.filters import matching, pattern_error
from board.data.tag_groups import TagGroup, group_tags
from board.data.views import X_AXES
from board.pages.scalar_charts import chart, chart_settings, id_key, id_value, register_chart_callbacks

dash.register_page(__name__, path="/scalars", name="Scalars", order=1, title="flowscope · scalars",
                   preload_plotly=True)

DEFAULT_SMOOTHING = 0.6
FIRST_DRAWN = 2  # the page's first row comes drawn in its layout; the other charts ask for theirs once it is drawn


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
            html.Div(dcc.Slider(id="scalars-smoothing", min=0, max=0.99, step=0.01, value=DEFAULT_SMOOTHING,
                                marks={0: "0", 0.5: "0.5", 0.99: "0.99"}), style={"width": "14em"}),
            html.Span(f"{DEFAULT_SMOOTHING:.2f}", id="scalars-smoothing-value", className="fs-slider-value"),
            dcc.RadioItems(id="scalars-x-axis", options=[{"label": a, "value": a} for a in X_AXES],
                           value="step", inline=True),
            dcc.Checklist(id="scalars-log-y", options=[{"label": "log y", "value": "log"}], value=[], inline=True),
        ]),
        html.Div(id="scalars-sections",
                 children=_sections("", "", [], chart_settings("", DEFAULT_SMOOTHING, "step", []), FIRST_DRAWN)),
        dcc.Store(id="scalars-first-drawn", data=False),
        dcc.Store(id="scalars-tag-list", data=_wanted("", "", [])),
        dcc.Store(id="scalars-pinned", storage_type="local", data=[]),
        dcc.Interval(id="scalars-poll", interval=context.config.browser_poll_ms),
    ])


def _tag_list(tag_filter: str) -> list[str]:
    """Every scalar tag of any run, filtered by tag; the run filter hides charts, it does not rebuild the page."""
    tags_by_run = board_context().store.all_scalar_tags()
    return matching(sorted({tag for tags in tags_by_run.values() for tag in tags}), tag_filter)


def _shown(tag_filter: str, pinned: list[str]) -> dict[str, list[str]]:
    """What the sections are built from: when it has not changed, the page is left as it is."""
    tags = _tag_list(tag_filter) if pattern_error(tag_filter) is None else []
    return {"tags": tags, "pinned": [tag for tag in pinned if tag in tags]}


def _wanted(run_filter: str, tag_filter: str, pinned: list[str]) -> dict[str, Any]:
    invalid = pattern_error(run_filter) is not None or pattern_error(tag_filter) is not None
    return {**_shown(tag_filter, pinned), "invalid": invalid}


def _sections(run_filter: str, tag_filter: str, pinned: list[str], settings: list[Any],
              drawn: int | None = None) -> list[Any]:
    """The page's sections; the first `drawn` charts of the open sections (all when None) with their figures."""
    store = board_context().store
    note = empty_state(store, "scalars")
    if note is not None:
        return [note]
    errors = [f"{label}: {error}" for label, pattern in (("runs", run_filter), ("tags", tag_filter))
              if (error := pattern_error(pattern)) is not None]
    if errors:
        return [html.Div(f"Invalid regular expression ({'; '.join(errors)}). Filters use RE2 syntax: no "
                         "backreferences or lookaround.", className="fs-empty", id="scalars-filter-error")]
    shown = _shown(tag_filter, pinned)
    if not shown["tags"]:
        return [html.Div("No scalar tag matches the filters.", className="fs-empty", id="empty-scalars")]
    rest = [tag for tag in shown["tags"] if tag not in shown["pinned"]]
    groups = group_tags(rest)
    in_open_sections = shown["pinned"] + [tag for group in groups if not group.instrumentation for tag in group.tags]
    first = {tag: settings for tag in in_open_sections[:drawn]}
    sections = []
    if shown["pinned"]:
        sections.append(html.Details(open=True, className="fs-section fs-pinned", id="scalars-pinned-row", children=[
            html.Summary(f"pinned ({len(shown['pinned'])})"),
            html.Div(className="fs-grid2", children=[chart(tag, True, first.get(tag)) for tag in shown["pinned"]]),
        ]))
    return sections + [_group_section(group, first) for group in groups]


def _group_section(group: TagGroup, first: dict[str, list[Any]]) -> html.Details:
    """A group of charts; the instrumentation's groups start collapsed and draw their charts when first opened."""
    body_id = {"type": "scalars-group-body", "prefix": id_key(group.prefix)}
    summary = html.Summary(f"{group.prefix} ({len(group.tags)})",
                           id={"type": "scalars-group-summary", "prefix": id_key(group.prefix)})
    charts = [] if group.instrumentation else [chart(tag, settings=first.get(tag)) for tag in group.tags]
    return html.Details(open=not group.instrumentation, className="fs-section",
                        **{"data-group": group.prefix, "data-instrumentation": str(group.instrumentation).lower()},
                        children=[summary, html.Div(id=body_id, className="fs-grid2", children=charts)])


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("scalars-sections", "children"), Output("scalars-tag-list", "data"),
                  Input("scalars-poll", "n_intervals"), Input("scalars-run-filter", "value"),
                  Input("scalars-tag-filter", "value"), Input("scalars-pinned", "data"),
                  State("scalars-tag-list", "data"), State("scalars-smoothing", "value"),
                  State("scalars-x-axis", "value"), State("scalars-log-y", "value"))
    def _rebuild_sections(_ticks: int, run_filter: str, tag_filter: str, pinned: list[str] | None, shown: Any,
                          smoothing: float, x_axis: str, log_y: list[str]):
        """Rebuild only when what the sections are built from changed, whichever input fired (a filter change
        coalesced with a poll tick arrives as one request)."""
        run_filter, tag_filter, pinned = run_filter or "", tag_filter or "", list(pinned or [])
        wanted = _wanted(run_filter, tag_filter, pinned)
        if wanted == shown:
            return no_update, no_update
        return _sections(run_filter, tag_filter, pinned, chart_settings(run_filter, smoothing, x_axis, log_y)), wanted

    @app.callback(Output({"type": "scalars-group-body", "prefix": MATCH}, "children"),
                  Input({"type": "scalars-group-summary", "prefix": MATCH}, "n_clicks"),
                  State({"type": "scalars-group-body", "prefix": MATCH}, "children"),
                  State({"type": "scalars-group-body", "prefix": MATCH}, "id"),
                  State("scalars-tag-filter", "value"), State("scalars-pinned", "data"),
                  State("scalars-run-filter", "value"), State("scalars-smoothing", "value"),
                  State("scalars-x-axis", "value"), State("scalars-log-y", "value"),
                  prevent_initial_call=True)
    def _open_group(clicks: int | None, children: list | None, body_id: dict[str, str], tag_filter: str, pinned: list,
                    run_filter: str, smoothing: float, x_axis: str, log_y: list[str]):
        """The group's charts, drawn (one request for the group, none per chart)."""
        if not clicks or children:
            return no_update
        shown = _shown(tag_filter or "", list(pinned or []))
        members = next((g.tags for g in group_tags([t for t in shown["tags"] if t not in shown["pinned"]])
                        if g.prefix == id_value(body_id["prefix"])), [])
        settings = chart_settings(run_filter, smoothing, x_axis, log_y)
        return [chart(tag, settings=settings) for tag in members]

    @app.callback(Output("scalars-pinned", "data"),
                  Input({"type": "scalars-pin", "tag": ALL, "pinned": ALL}, "n_clicks"),
                  State("scalars-pinned", "data"), prevent_initial_call=True)
    def _toggle_pin(clicks: list[int | None], pinned: list[str] | None):
        triggered = dash.ctx.triggered_id
        if triggered is None or not any(clicks) or not dash.ctx.triggered[0].get("value"):
            return no_update  # buttons drawn by a rebuild, not clicked
        pinned = list(pinned or [])
        tag = id_value(triggered["tag"])
        return [t for t in pinned if t != tag] if tag in pinned else pinned + [tag]

    app.clientside_callback("function(value) { return Number(value || 0).toFixed(2); }",
                            Output("scalars-smoothing-value", "children"), Input("scalars-smoothing", "value"))
    register_chart_callbacks(app)
