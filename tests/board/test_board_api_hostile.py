"""Hostile requests: every JSON body is strict JSON, every bad parameter a 4xx with a message, never a 5xx."""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
from flask.testing import FlaskClient

from board_helpers import assert_refused, client_for
from instrumentation import SummaryWriter
from instrumentation.format.alerts import ALERTS_RELPATH

CRLF_TAG = "loss\r\nSet-Cookie: owned=1"
HOSTILE_VALUES = ["²", "٣", "１２", "9" * 30, "9" * 5000, "-1", "1e3", " 1", "0x10", "\x00", "a\x00b", "a\r\nb",
                  "x" * 100_000, "../../etc/passwd", "%", "%ff%fe", "\u202e", "🙂", "", ",", "NaN"]


def strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture()
def hostile_logdir(tmp_path: Path) -> Path:
    """A histogram holding NaN and ±Inf, a scalar with an infinite wall time, a tag with CR/LF in its name, and an
    alerts file whose evidence holds bare NaN/Infinity (Python's json writes them unless told not to)."""
    logdir = tmp_path / "logs"
    with SummaryWriter(logdir / "run") as writer:
        writer.add_histogram("weights", np.array([1.0, np.nan, 2.0, np.inf, -np.inf]), 1, walltime=1.7e9)
        writer.add_scalar("loss", 1.0, 1, walltime=1.7e9)
        writer.add_scalar("loss", float("nan"), 2, walltime=1.7e9 + 1)
        writer.add_scalar("late", 3.0, 1, walltime=float("inf"))
        writer.add_scalar(CRLF_TAG, 2.0, 1, walltime=1.7e9)
    alerts = logdir / "run" / ALERTS_RELPATH
    alerts.parent.mkdir(parents=True)
    alerts.write_text(json.dumps({"kind": "nonfinite", "severity": "error", "subject": "fc.weight", "message": "NaN",
                                  "step": 2, "wall_time": 1.7e9,
                                  "evidence": {"max": math.inf, "mean": math.nan}}) + "\n")
    return logdir


@pytest.fixture()
def client(hostile_logdir: Path) -> FlaskClient:
    return client_for(hostile_logdir)


def test_every_json_answer_is_strict_json_with_non_finite_numbers_spelled_out(client: FlaskClient) -> None:
    histogram = strict_json(client.get("/api/histograms?run=run&tag=weights").get_data(as_text=True))["histograms"][0]
    assert histogram["min"] == "NaN" and histogram["max"] == "NaN"  # what the writer computes over a NaN
    assert histogram["sum"] == "NaN" and histogram["num"] == 5
    runs = strict_json(client.get("/api/runs").get_data(as_text=True))
    assert runs["runs"][0]["last_update"] == "Infinity"
    late = strict_json(client.get("/api/scalars?run=run&tag=late").get_data(as_text=True))
    assert late["wall_times"] == ["Infinity"] and late["values"] == [3.0]
    loss = strict_json(client.get("/api/scalars?run=run&tag=loss").get_data(as_text=True))
    assert loss["values"] == [1.0, "NaN"]
    alerts = strict_json(client.get("/api/alerts").get_data(as_text=True))
    assert alerts["alerts"][0]["evidence"] == {"max": "Infinity", "mean": "NaN"}
    for url in ("/api/tags", "/api/tags?run=run", "/api/nothing", "/api/scalars?run=run"):
        strict_json(client.get(url).get_data(as_text=True))


def test_csv_of_a_tag_with_cr_lf_is_downloaded_under_a_safe_name(client: FlaskClient) -> None:
    response = client.get("/api/scalars", query_string={"run": "run", "tag": CRLF_TAG, "format": "csv"})
    assert response.status_code == 200 and "owned" not in response.headers.get("Set-Cookie", "")
    disposition = response.headers["Content-Disposition"]
    assert "\r" not in disposition and "\n" not in disposition and disposition.isascii()
    fallback = disposition.split('filename="')[1].split('"')[0]
    assert fallback == "run_loss__Set-Cookie__owned_1.csv"
    assert unquote(disposition.split("filename*=UTF-8''")[1]) == f"run_{CRLF_TAG}.csv"  # the exact name, encoded
    assert response.get_data(as_text=True).splitlines()[1].startswith('run,"loss')


@pytest.mark.parametrize("after, message", [("²", "digits 0-9"), ("٣", "digits 0-9"), ("9" * 30, "more than 18"),
                                            ("9" * 5000, "more than 18"), ("-1", "digits 0-9")])
def test_after_outside_ascii_digits_or_too_long_is_a_400(client: FlaskClient, after: str, message: str) -> None:
    response = client.get("/api/scalars", query_string={"run": "run", "tag": "loss", "after": after})
    assert response.status_code == 400 and message in response.get_json()["error"]


def test_after_beyond_the_series_is_an_empty_answer(client: FlaskClient) -> None:
    body = client.get("/api/scalars?run=run&tag=loss&after=" + "9" * 18).get_json()
    assert body["steps"] == [] and body["length"] == 2 and body["start"] == 2


ENDPOINTS = {
    "/api/runs": [],
    "/api/tags": ["run"],
    "/api/scalars": ["run", "tag", "after", "format"],
    "/api/histograms": ["run", "tag"],
    "/api/alerts": ["run", "kind", "severity"],
}
VALID = {"run": "run", "tag": "loss", "after": "0", "format": "json", "kind": "nonfinite", "severity": "error"}


def _fuzz_cases() -> list[tuple[str, list[tuple[str, str]]]]:
    cases = []
    for endpoint, names in ENDPOINTS.items():
        for name, value in itertools.product(names or ["run"], HOSTILE_VALUES):
            query = [(other, VALID[other]) for other in names if other != name] + [(name, value)]
            cases.append((endpoint, query))
            cases.append((endpoint, query + [(name, value), (name, VALID.get(name, "x"))]))  # repeated parameter
    return cases


def test_fuzzed_parameters_never_cause_a_server_error(client: FlaskClient) -> None:
    """Every endpoint, each parameter set to each hostile value (alone and repeated): 2xx or 4xx, strict JSON,
    and a 4xx says what is wrong."""
    statuses = set()
    for endpoint, query in _fuzz_cases():
        response = client.get(endpoint, query_string=query)
        statuses.add(response.status_code)
        assert response.status_code < 500, (endpoint, query, response.get_data(as_text=True)[:300])
        if response.mimetype == "application/json":
            body = strict_json(response.get_data(as_text=True))
            if response.status_code >= 400:
                assert body["error"] and body["status"] == response.status_code
    assert {200, 400, 404} <= statuses  # the fuzz reached both the answers and the refusals
    raw = client.get("/api/scalars?run=%ff%fe&tag=%c0%af&after=%00")  # bytes that are not UTF-8
    assert raw.status_code == 400


@pytest.mark.parametrize("url, status, message", [
    ("/api/scalars?run=run&tag=loss&format=xml", 400, "'format' must be one of json, csv"),
    ("/api/tags?run=a%00b", 400, "NUL"),
])
def test_bad_parameters_name_what_is_wrong(client: FlaskClient, url: str, status: int, message: str) -> None:
    assert_refused(client, url, status, message)  # the alerts endpoint's own: test_board_api_alerts.py


def _sections_request(run_filter: object, tag_filter: object) -> dict:
    """The Scalars page's filter callback request, as the browser sends it."""
    return {"output": "..scalars-sections.children...scalars-tag-list.data..",
            "outputs": [{"id": "scalars-sections", "property": "children"},
                        {"id": "scalars-tag-list", "property": "data"}],
            "inputs": [{"id": "scalars-poll", "property": "n_intervals", "value": 1},
                       {"id": "scalars-run-filter", "property": "value", "value": run_filter},
                       {"id": "scalars-tag-filter", "property": "value", "value": tag_filter},
                       {"id": "scalars-pinned", "property": "data", "value": []}],
            "state": [{"id": "scalars-tag-list", "property": "data", "value": []},
                      {"id": "scalars-smoothing", "property": "value", "value": 0.6},
                      {"id": "scalars-x-axis", "property": "value", "value": "step"},
                      {"id": "scalars-log-y", "property": "value", "value": []}],
            "changedPropIds": ["scalars-tag-filter.value"]}


@pytest.mark.parametrize("body", [{}, [], {"output": "nothing.here", "outputs": {"id": "nothing", "property": "here"},
                                           "inputs": [], "changedPropIds": []}, _sections_request(5, ["x"])])
def test_malformed_callback_requests_are_a_400(client: FlaskClient, body: object) -> None:
    client.get("/")  # Dash finishes its set-up on the first request
    response = client.post("/_dash-update-component", json=body)
    assert response.status_code == 400 and "malformed callback request" in response.get_json()["error"]


def test_the_filter_callback_answers_an_invalid_pattern_with_its_reason(client: FlaskClient) -> None:
    client.get("/")
    response = client.post("/_dash-update-component", json=_sections_request("", r"(?<=a)b"))
    sections = response.get_json()["response"]["scalars-sections"]["children"]
    assert sections[0]["props"]["id"] == "scalars-filter-error"
    assert "tags: invalid perl operator: (?<=" in sections[0]["props"]["children"]
