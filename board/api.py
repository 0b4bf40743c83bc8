"""Read-only JSON/CSV API for scripts and tests, as Flask routes on Dash's server.

Run and tag names are only ever looked up in the store's dictionaries, never joined onto a path, so a
parameter such as `../../etc/passwd` is simply an unknown run (404). Every JSON body is strict JSON
(`StrictJSONProvider`); every bad parameter is a 4xx with a message.
"""
from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any
from urllib.parse import quote

from flask import Blueprint, Response, current_app, jsonify, request
from flask.json.provider import DefaultJSONProvider

from board.context import board_context
from board.data.alerts import SEVERITIES, AlertFilter, alert_index
from board.data.export import histograms_json, scalars_csv, scalars_json_bytes, strict_json_value
from board.data.store import UnknownSeries

api = Blueprint("flowscope_api", __name__, url_prefix="/api")
MAX_AFTER_DIGITS = 18  # any point count fits; more digits would not fit the int64 an array index needs
FORMATS = ("json", "csv")


class StrictJSONProvider(DefaultJSONProvider):
    """Flask's JSON with NaN/±Inf written as "NaN", "Infinity", "-Infinity" (bare NaN is not JSON)."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("allow_nan", False)
        return super().dumps(strict_json_value(obj), **kwargs)


def json_error(status: int, message: str) -> Response:
    response = jsonify({"error": message, "status": status})
    response.status_code = status
    return response


class _BadRequest(ValueError):
    pass


@api.errorhandler(_BadRequest)
def _bad_request(error: _BadRequest) -> Response:
    return json_error(400, str(error))


@api.errorhandler(UnknownSeries)
def _unknown(error: UnknownSeries) -> Response:
    return json_error(404, str(error))


def _checked(name: str, value: str) -> str:
    if "\x00" in value:
        raise _BadRequest(f"query parameter {name!r} holds a NUL character")
    return value


def _required(name: str) -> str:
    value = request.args.get(name)
    if value is None or value == "":
        raise _BadRequest(f"missing query parameter {name!r}")
    return _checked(name, value)


def _after() -> int:
    """`after=N`: the number of points the client already holds (ASCII digits only: str.isdigit accepts '²')."""
    text = request.args.get("after", "0")
    if not (text.isascii() and text.isdigit()):
        raise _BadRequest("'after' must be a non-negative integer written with the digits 0-9 (points already held)")
    if len(text) > MAX_AFTER_DIGITS:
        raise _BadRequest(f"'after' has more than {MAX_AFTER_DIGITS} digits")
    return int(text)


def _format() -> str:
    chosen = request.args.get("format", "json")
    if chosen not in FORMATS:
        raise _BadRequest(f"'format' must be one of {', '.join(FORMATS)}")
    return chosen


def _values(name: str, comma_separated: bool = True) -> tuple[str, ...]:
    """A filter parameter given repeatedly (`kind=a&kind=b`) or comma-separated (`kind=a,b`; not for run names,
    which may hold commas)."""
    raws = [_checked(name, raw) for raw in request.args.getlist(name)]
    values = [part.strip() for raw in raws for part in raw.split(",")] if comma_separated else raws
    return tuple(dict.fromkeys(value for value in values if value))


def attachment(filename_stem: str, extension: str) -> str:
    """A Content-Disposition value for any name: an ASCII fallback plus the exact name percent-encoded
    (RFC 6266), so CR/LF, quotes or non-Latin-1 characters in a tag can neither break nor inject a header."""
    stem = filename_stem[:200]
    fallback = re.sub(r"[^A-Za-z0-9._-]", "_", stem) or "download"
    return f"attachment; filename=\"{fallback}.{extension}\"; filename*=UTF-8''{quote(stem, safe='')}.{extension}"


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
        return jsonify({"runs": {name: {"scalars": scalars[name], "histograms": histograms.get(name, [])}
                                 for name in scalars}})
    run = _checked("run", run)
    return jsonify({"run": run, "scalars": store.scalar_tags(run), "histograms": store.histogram_tags(run)})


@api.get("/scalars")
def scalars() -> Response:
    run, tag = _required("run"), _required("tag")
    start, chosen = _after(), _format()
    columns, revision = board_context().store.scalars(run, tag)
    if chosen == "csv":
        return Response(scalars_csv([(run, tag, columns)]), mimetype="text/csv",
                        headers={"Content-Disposition": attachment(f"{run}_{tag}".replace("/", "_"), "csv")})
    body = scalars_json_bytes(run, tag, columns, revision, min(start, len(columns)))
    return current_app.response_class(body, mimetype="application/json")


@api.get("/histograms")
def histograms() -> Response:
    run, tag = _required("run"), _required("tag")
    return jsonify(histograms_json(run, tag, board_context().store.histograms(run, tag)))


@api.get("/alerts")
def alerts() -> Response:
    """Alerts of every run, or of `run=R` (repeatable), filtered by `kind` and `severity`; most recent step last."""
    store = board_context().store
    severities = _values("severity")
    unknown = [severity for severity in severities if severity not in SEVERITIES]
    if unknown:
        raise _BadRequest(f"unknown severity {unknown[0]!r}: one of {', '.join(SEVERITIES)}")
    runs = _values("run", comma_separated=False)
    known = {summary.name for summary in store.runs()}
    for run in runs:
        if run not in known:
            raise UnknownSeries(f"unknown run {run!r}")
    selection = AlertFilter(kinds=_values("kind"), severities=severities, runs=runs)
    found = alert_index(store).alerts(selection)
    counts = {severity: sum(item.alert.severity == severity for item in found) for severity in SEVERITIES}
    return jsonify({
        "loaded": store.refreshes > 0,
        "count": len(found),
        "counts": counts,
        "alerts": [{"run": item.run, **asdict(item.alert)} for item in found],
    })


@api.route("/<path:unknown>")
def _no_such_endpoint(unknown: str) -> Response:
    return json_error(404, f"no such endpoint /api/{unknown}")
