"""The JSON/CSV API: every endpoint, errors, traversal attempts, the token."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from board.security import TOKEN_COOKIE
from board_helpers import client_for


@pytest.fixture()
def client(fixture_logdir: Path) -> FlaskClient:
    return client_for(fixture_logdir)


def test_runs_lists_every_run_with_its_summary(client: FlaskClient) -> None:
    body = client.get("/api/runs").get_json()
    assert body["logdir_exists"] and body["loaded"]
    runs = {run["name"]: run for run in body["runs"]}
    assert sorted(runs) == ["baseline", "ddp/rank0", "ddp/rank1"]
    assert runs["ddp/rank1"]["group"] == "ddp" and runs["baseline"]["group"] == "baseline"
    assert runs["baseline"]["last_step"] == 3000
    assert runs["baseline"]["scalar_tags"] == 2 and runs["baseline"]["histogram_tags"] == 1
    assert runs["baseline"]["points"] == 2 * 600 + 1 and runs["baseline"]["size_bytes"] > 0
    assert runs["baseline"]["corrupt_records"] == 0


def test_tags_of_one_run_and_of_all(client: FlaskClient) -> None:
    assert client.get("/api/tags?run=baseline").get_json() == {
        "run": "baseline", "scalars": ["loss/train", "lr"], "histograms": ["weight/fc"]}
    every = client.get("/api/tags").get_json()["runs"]
    assert every["ddp/rank0"]["scalars"] == ["loss/train", "lr"]


def test_scalars_serves_every_point_with_non_finite_values_spelled_out(client: FlaskClient) -> None:
    body = client.get("/api/scalars?run=baseline&tag=loss/train").get_json()
    assert body["steps"] == list(range(0, 3000, 5)) + [3000]
    assert len(body["values"]) == len(body["wall_times"]) == 601 == body["length"]
    assert body["values"][300] == 50.0  # the spike
    assert body["values"][-1] == "NaN"
    assert body["wall_times"][1] == 1.7e9 + 5
    after = client.get("/api/scalars?run=baseline&tag=loss/train&after=598").get_json()
    assert after["steps"] == [2990, 2995, 3000] and after["start"] == 598


def test_scalars_csv_round_trips_every_value(client: FlaskClient) -> None:
    response = client.get("/api/scalars?run=ddp/rank0&tag=lr&format=csv")
    assert response.status_code == 200 and response.mimetype == "text/csv"
    lines = response.get_data(as_text=True).splitlines()
    assert lines[0] == "run,tag,step,wall_time,value" and len(lines) == 601
    json_values = client.get("/api/scalars?run=ddp/rank0&tag=lr").get_json()["values"]
    assert [float(line.split(",")[-1]) for line in lines[1:]] == json_values
    nan_line = client.get("/api/scalars?run=baseline&tag=loss/train&format=csv").get_data(as_text=True).splitlines()[-1]
    assert nan_line.startswith("baseline,loss/train,3000,") and math.isnan(float(nan_line.split(",")[-1]))


def test_histograms(client: FlaskClient) -> None:
    body = client.get("/api/histograms?run=baseline&tag=weight/fc").get_json()
    assert [h["step"] for h in body["histograms"]] == list(range(0, 3000, 300))
    first = body["histograms"][0]
    assert len(first["edges"]) == len(first["counts"]) + 1 and sum(first["counts"]) == pytest.approx(500)
    assert first["num"] == 500


@pytest.mark.parametrize("url, status", [
    ("/api/scalars?run=nope&tag=lr", 404),
    ("/api/scalars?run=baseline&tag=nope", 404),
    ("/api/histograms?run=baseline&tag=lr", 404),
    ("/api/tags?run=nope", 404),
    ("/api/scalars?run=baseline", 400),
    ("/api/scalars?tag=lr", 400),
    ("/api/scalars?run=baseline&tag=lr&after=-1", 400),
    ("/api/nothing-here", 404),
])
def test_errors_are_json(client: FlaskClient, url: str, status: int) -> None:
    response = client.get(url)
    assert response.status_code == status
    assert response.get_json()["status"] == status and response.get_json()["error"]


@pytest.mark.parametrize("url", [
    "/api/scalars?run=../../../../etc&tag=passwd",
    "/api/scalars?run=%2Fetc&tag=passwd",
    "/api/scalars?run=baseline/../../..&tag=lr",
    "/api/histograms?run=..%2F..%2F..&tag=..%2Fetc%2Fpasswd",
    "/api/tags?run=/etc/passwd",
    "/api/scalars?run=baseline%00&tag=lr",
    "/api/../../etc/passwd",
    "/assets/../../../../etc/passwd",
    "/assets/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
    "/_dash-component-suites/../../../etc/passwd",
])
def test_traversal_attempts_never_reach_a_file(client: FlaskClient, url: str) -> None:
    response = client.get(url)
    assert response.status_code in (400, 404)
    assert b"root:" not in response.get_data()


def test_token_is_required_everywhere_then_kept_in_a_cookie(fixture_logdir: Path) -> None:
    client = client_for(fixture_logdir, token="s3cret")
    for url in ("/", "/scalars", "/api/runs", "/_dash-layout", "/_dash-dependencies", "/assets/board.css"):
        assert client.get(url).status_code == 401, url
    assert client.get("/api/runs?token=wrong").status_code == 401
    assert client.get("/api/runs?token=s3cret").status_code == 200
    client.delete_cookie(TOKEN_COOKIE)
    page = client.get("/scalars?token=s3cret")
    assert page.status_code == 303 and page.headers["Location"] == "/scalars"  # the token leaves the address bar
    assert "HttpOnly" in page.headers["Set-Cookie"] and "SameSite=Strict" in page.headers["Set-Cookie"]
    assert client.get("/scalars").status_code == 200
    assert client.get("/api/scalars?run=baseline&tag=lr").status_code == 200
    other = client_for(fixture_logdir, token="s3cret")
    other.set_cookie(TOKEN_COOKIE, "guess")
    assert other.get("/api/runs").status_code == 401


def test_security_headers(client: FlaskClient) -> None:
    headers = client.get("/api/runs").headers
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"


def test_pages_render_on_the_server(client: FlaskClient) -> None:
    for url in ("/", "/scalars", "/histograms"):
        assert client.get(url).status_code == 200
    layout = client.get("/_dash-layout").get_data(as_text=True)
    assert "nav-scalars" in layout and "nav-histograms" in layout and "nav-runs" in layout


@pytest.mark.parametrize("host, status", [("localhost:6006", 200), ("127.0.0.1", 200), ("[::1]:6006", 200),
                                          ("evil.example:6006", 403), ("127.0.0.1.evil.example", 403)])
def test_a_loopback_board_answers_only_loopback_host_names(client: FlaskClient, host: str, status: int) -> None:
    response = client.get("/api/runs", headers={"Host": host})
    assert response.status_code == status
    if status == 403:
        assert "DNS rebinding" in response.get_json()["error"]


def test_a_board_with_a_token_accepts_any_host_name(fixture_logdir: Path) -> None:
    client = client_for(fixture_logdir, token="s3cret")
    assert client.get("/api/runs?token=s3cret", headers={"Host": "board.example"}).status_code == 200
