"""Read-only JSON/CSV API for scripts and tests, as Flask routes on Dash's server.

Run and tag names are only ever looked up in the store's dictionaries, never joined onto a path, so a
parameter such as `../../etc/passwd` is simply an unknown run (404).
"""
from __future__ import annotations

from dataclasses import asdict

from flask import Blueprint, Response, current_app, jsonify, request

from board.context import board_context
from board.data.export import histograms_json, scalars_csv, scalars_json_bytes
from board.data.store import UnknownSeries

api = Blueprint("flowscope_api", __name__, url_prefix="/api")


def json_error(status: int, message: str) -> Response:
    response = jsonify({"error": message, "status": status})
    response.status_code = status
    return response


def _required(name: str) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        raise _BadRequest(f"missing query parameter {name!r}")
    if "\x00" in value:
        raise _BadRequest(f"invalid query parameter {name!r}")
    return value


class _BadRequest(ValueError):
    pass


@api.errorhandler(_BadRequest)
def _bad_request(error: _BadRequest) -> Response:
    return json_error(400, str(error))


@api.errorhandler(UnknownSeries)
def _unknown(error: UnknownSeries) -> Response:
    return json_error(404, str(error))


@api.get("/runs")
def runs() -> Response:
    store = board_context().store
    return jsonify({
        "logdir": str(store.logdir),
        "logdir_exists": store.logdir_exists,
        "loaded": store.refreshes > 0,
        "first_load_seconds": store.first_load_seconds,
        "runs": [asdict(summary) for summary in store.runs()],
    })


@api.get("/tags")
def tags() -> Response:
    store = board_context().store
    run = request.args.get("run")
    if run is None:
        scalars, histograms = store.all_scalar_tags(), store.all_histogram_tags()
        return jsonify({"runs": {name: {"scalars": scalars[name], "histograms": histograms.get(name, [])} for name in scalars}})
    return jsonify({"run": run, "scalars": store.scalar_tags(run), "histograms": store.histogram_tags(run)})


@api.get("/scalars")
def scalars() -> Response:
    run, tag = _required("run"), _required("tag")
    start = request.args.get("after", "0")
    if not start.isdigit():
        raise _BadRequest("'after' must be a non-negative integer (points already held)")
    columns, revision = board_context().store.scalars(run, tag)
    if request.args.get("format") == "csv":
        name = f"{run}_{tag}".replace("/", "_")
        return Response(scalars_csv([(run, tag, columns)]), mimetype="text/csv",
                        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'})
    body = scalars_json_bytes(run, tag, columns, revision, int(start))
    return current_app.response_class(body, mimetype="application/json")


@api.get("/histograms")
def histograms() -> Response:
    run, tag = _required("run"), _required("tag")
    return jsonify(histograms_json(run, tag, board_context().store.histograms(run, tag)))


@api.route("/<path:unknown>")
def _no_such_endpoint(unknown: str) -> Response:
    return json_error(404, f"no such endpoint /api/{unknown}")
