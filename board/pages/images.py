"""Images: per tag, the image at the chosen step of each run side by side; a click opens it at full size."""
from __future__ import annotations

import dash
from dash import Dash, Input, Output, State, dcc, html, no_update

from board.api_media import image_url
from board.components.empty_state import empty_state
from board.components.step_marks import step_marks
from board.context import board_context
from board.data.media import ImagePoint, image_points, tag_names
from board.data.store import UnknownSeries
from instrumentation.format import metadata

dash.register_page(__name__, path="/images", name="Images", order=8, title="flowscope · images")
THUMBNAIL_PX = 320  # the widest an image is drawn on the page (a click shows it whole)


def _tags() -> tuple[list[str], dict[str, list[str]]]:
    by_run = tag_names(board_context().store, metadata.IMAGES_PLUGIN)
    return sorted({tag for tags in by_run.values() for tag in tags}), by_run


def layout(**_query: str) -> html.Div:
    context = board_context()
    tags, _ = _tags()
    return html.Div([
        html.H2("Images"),
        empty_state(context.store, "images") or html.Div(
            "No images logged (add_image, add_images, add_figure) in any run yet." if not tags else "",
            className="fs-muted", id="images-none"),
        html.Div(className="fs-controls", children=[
            html.Label("tag", htmlFor="images-tag"),
            dcc.Dropdown(id="images-tag", options=tags, value=tags[0] if tags else None, clearable=False,
                         style={"minWidth": "24em"}),
            html.Label("step"),
            html.Div(dcc.Slider(id="images-step", min=0, max=0, step=None, value=0, marks={0: "0"},
                                tooltip={"placement": "bottom"}), style={"flex": "1"}),
        ]),
        html.Div(id="images-panel", className="fs-image-row"),
        dcc.Interval(id="images-poll", interval=context.config.browser_poll_ms),
    ])


def _series(tag: str) -> dict[str, list[ImagePoint]]:
    _, by_run = _tags()
    store, series = board_context().store, {}
    for run, tags in by_run.items():
        if tag in tags:
            try:
                series[run] = image_points(store, run, tag)
            except UnknownSeries:
                continue
    return series


def _figure(run: str, tag: str, point: ImagePoint | None, step: int) -> html.Figure:
    if point is None:
        body = html.Div(f"no image at step {step}", className="fs-muted")
    elif point.mime_type is None:
        body = html.Div("not a PNG, JPEG or GIF image: not shown", className="fs-muted")
    else:
        url = image_url(run, tag, point.step, point.index)
        body = html.A(html.Img(src=url, alt=f"{tag} at step {point.step}", className="fs-image",
                               style={"maxWidth": f"{THUMBNAIL_PX}px"}), href=url, target="_blank",
                      title="open at full size")
    size = f" · {point.width}×{point.height}" if point is not None else ""
    return html.Figure([body, html.Figcaption(f"{run} · step {step}{size}")], className="fs-image-card")


def register_callbacks(app: Dash) -> None:
    @app.callback(Output("images-tag", "options"), Input("images-poll", "n_intervals"),
                  State("images-tag", "options"), prevent_initial_call=True)
    def _new_tags(_ticks: int, current: list[str]):
        tags, _ = _tags()
        return tags if tags != current else no_update

    @app.callback(Output("images-step", "min"), Output("images-step", "max"), Output("images-step", "marks"),
                  Output("images-step", "value"), Input("images-tag", "value"), Input("images-poll", "n_intervals"),
                  State("images-step", "value"), State("images-step", "max"), State("images-step", "marks"))
    def _steps(tag: str | None, _ticks: int | None, value: int | None, old_max: int, old_marks: dict | None):
        steps = sorted({point.step for points in (_series(tag) if tag else {}).values() for point in points})
        if not steps:
            return 0, 0, {0: "0"}, 0
        if dash.ctx.triggered_id == "images-poll" and set(map(str, steps)) == set(old_marks or {}):
            return no_update, no_update, no_update, no_update  # nothing new: the panel is not redrawn
        following = value is None or value >= old_max or dash.ctx.triggered_id == "images-tag"
        chosen = steps[-1] if following or value not in steps else value
        return steps[0], steps[-1], step_marks(steps), chosen

    @app.callback(Output("images-panel", "children"), Input("images-tag", "value"), Input("images-step", "value"))
    def _panel(tag: str | None, step: int | None):
        if not tag or step is None:
            return []
        cards = []
        for run, points in _series(tag).items():
            at_step = [point for point in points if point.step == step]
            cards.append(_figure(run, tag, at_step[-1] if at_step else None, step))
        return cards
