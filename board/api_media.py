"""JSON API of the text, images, PR curves, hparams and plugins data (routes on the API blueprint of `board.api`).

Like the scalars API: run and tag names are only looked up in the store, never joined onto a path; unknown → 404,
bad parameter → 400. Image bytes are served only when they start with a PNG/JPEG/GIF signature, as that type
(with `nosniff`), so a crafted "image" can never be served as HTML or script.
"""
from __future__ import annotations

from dataclasses import asdict
from urllib.parse import urlencode

from flask import Response, jsonify, request

from board.api import MAX_AFTER_DIGITS, _BadRequest, _checked, _required, api
from board.context import board_context
from board.data.hparams_table import hparams_table
from board.data.media import image_points, pr_curve_points, tag_names, text_points
from board.data.plugin_inventory import not_shown, plugin_uses
from board.data.store import UnknownSeries
from instrumentation.format import metadata


def _integer(name: str) -> int:
    text = request.args.get(name, "")
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > MAX_AFTER_DIGITS:
        raise _BadRequest(f"{name!r} must be an integer written with the digits 0-9")
    return -int(digits) if negative else int(digits)


def _tags_or_series(plugin: str, series):
    run = request.args.get("run")
    if run is None:
        return jsonify({"runs": tag_names(board_context().store, plugin)})
    run, tag = _checked("run", run), _required("tag")
    return jsonify({"run": run, "tag": tag, "points": series(run, tag)})


@api.get("/text")
def text() -> Response:
    """`/api/text`: run → text tags; `?run=R&tag=T`: every step's markdown (T as logged, with or without
    torch's `/text_summary`)."""
    return _tags_or_series(metadata.TEXT_PLUGIN, lambda run, tag: [asdict(point) for point in
                                                                   text_points(board_context().store, run, tag)])


def image_url(run: str, tag: str, step: int, index: int) -> str:
    return "/api/image?" + urlencode({"run": run, "tag": tag, "step": step, "index": index})


@api.get("/images")
def images() -> Response:
    """`/api/images`: run → image tags; `?run=R&tag=T`: each image's step, size and the URL of its bytes."""
    def series(run: str, tag: str) -> list[dict]:
        return [{"step": point.step, "wall_time": point.wall_time, "index": point.index, "width": point.width,
                 "height": point.height, "mime_type": point.mime_type,
                 "url": image_url(run, tag, point.step, point.index) if point.mime_type else None}
                for point in image_points(board_context().store, run, tag)]
    return _tags_or_series(metadata.IMAGES_PLUGIN, series)


@api.get("/image")
def image() -> Response:
    """The bytes of one image (`run`, `tag`, `step`, `index`): the last one logged at that step."""
    run, tag = _required("run"), _required("tag")
    step, index = _integer("step"), _integer("index") if "index" in request.args else 0
    found = [point for point in image_points(board_context().store, run, tag)
             if point.step == step and point.index == index]
    if not found:
        raise UnknownSeries(f"run {run!r} tag {tag!r} has no image {index} at step {step}")
    point = found[-1]
    if point.mime_type is None:
        return Response("not a PNG, JPEG or GIF image\n", 415, mimetype="text/plain")
    return Response(point.encoded, mimetype=point.mime_type, headers={"Cache-Control": "private, max-age=60"})


@api.get("/pr_curves")
def pr_curves() -> Response:
    """`/api/pr_curves`: run → PR-curve tags; `?run=R&tag=T`: each step's thresholds and the six rows."""
    def series(run: str, tag: str) -> list[dict]:
        return [{"step": point.step, "wall_time": point.wall_time, "thresholds": point.thresholds.tolist(),
                 **{name: row.tolist() for name, row in point.rows.items()}}
                for point in pr_curve_points(board_context().store, run, tag)]
    return _tags_or_series(metadata.PR_CURVES_PLUGIN, series)


@api.get("/hparams")
def hparams() -> Response:
    """Runs × hyperparameters × final metric values (hparams sub-runs folded into their parent run)."""
    table = hparams_table(board_context().store)
    return jsonify({"hparams": list(table.hparam_names), "metrics": list(table.metric_tags),
                    "rows": [asdict(row) for row in table.rows], "problems": list(table.problems)})


@api.get("/plugins")
def plugins() -> Response:
    """Every plugin's data per run, shown by this board or not, and what is not shown (plugin → runs, tags)."""
    uses = plugin_uses(board_context().store)
    return jsonify({"plugins": [asdict(use) for use in uses],
                    "not_shown": {plugin: {"runs": runs, "tags": tags}
                                  for plugin, (runs, tags) in not_shown(uses).items()},
                    "folded_runs": board_context().store.folded()})
