"""`/api/alerts`: every run's alerts (or some runs'), filtered by kind and severity, for scripts and CI."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from board_helpers import REPO, assert_refused, client_for
from instrumentation import SummaryWriter
from instrumentation.format.alerts import Alert, AlertWriter

WRITTEN = [  # (run, kind, severity, step)
    ("a", "loss_spike", "warning", 10),
    ("a", "nonfinite", "error", 30),
    ("b/rank0", "exploding_gradient", "warning", 20),
    ("b/rank0", "dead_units", "info", 5),
    ("b/rank0", "nonfinite", "error", 40),
]


@pytest.fixture()
def alert_logdir(tmp_path: Path) -> Path:
    logdir = tmp_path / "logs"
    for run in ("a", "b/rank0", "quiet"):
        with SummaryWriter(logdir / run) as writer:
            writer.add_scalar("loss", 1.0, 0)
    for run, kind, severity, step in WRITTEN:
        AlertWriter(logdir / run).write(Alert(kind, severity, "fc1", f"{kind} at {step}", step, wall_time=1.7e9 + step,
                                              evidence={"step": step}))
    return logdir


@pytest.fixture()
def client(alert_logdir: Path) -> FlaskClient:
    return client_for(alert_logdir)


def expected(runs=None, kinds=None, severities=None) -> list[tuple[str, str, str, int]]:
    rows = [row for row in WRITTEN if (runs is None or row[0] in runs) and (kinds is None or row[1] in kinds)
            and (severities is None or row[2] in severities)]
    return sorted(rows, key=lambda row: (row[3], row[0]))


def listed(client: FlaskClient, url: str) -> list[tuple[str, str, str, int]]:
    response = client.get(url)
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    rows = [(item["run"], item["kind"], item["severity"], item["step"]) for item in body["alerts"]]
    assert body["count"] == len(rows) and sum(body["counts"].values()) == len(rows) and body["loaded"]
    return rows


def test_every_alert_of_every_run_with_all_its_fields(client: FlaskClient) -> None:
    assert listed(client, "/api/alerts") == expected()
    first = client.get("/api/alerts").get_json()["alerts"][0]
    assert first == {"run": "b/rank0", "kind": "dead_units", "severity": "info", "subject": "fc1",
                     "message": "dead_units at 5", "step": 5, "wall_time": 1.7e9 + 5, "evidence": {"step": 5}}
    assert client.get("/api/alerts").get_json()["counts"] == {"info": 1, "warning": 2, "error": 2}


@pytest.mark.parametrize("query, selection", [
    ("run=a", {"runs": {"a"}}),
    ("run=b/rank0&run=a", {"runs": {"a", "b/rank0"}}),
    ("run=quiet", {"runs": {"quiet"}}),
    ("kind=nonfinite", {"kinds": {"nonfinite"}}),
    ("kind=nonfinite,dead_units", {"kinds": {"nonfinite", "dead_units"}}),
    ("kind=nonfinite&kind=loss_spike", {"kinds": {"nonfinite", "loss_spike"}}),
    ("kind=no_such_kind", {"kinds": {"no_such_kind"}}),  # kinds are open-ended: an unknown one matches nothing
    ("severity=error", {"severities": {"error"}}),
    ("severity=warning,error&run=a", {"severities": {"warning", "error"}, "runs": {"a"}}),
    ("severity=error&kind=nonfinite&run=b/rank0",
     {"severities": {"error"}, "kinds": {"nonfinite"}, "runs": {"b/rank0"}}),
])
def test_filters(client: FlaskClient, query: str, selection: dict) -> None:
    assert listed(client, f"/api/alerts?{query}") == expected(**selection)


def test_new_alerts_appear_on_the_next_call(client: FlaskClient, alert_logdir: Path) -> None:
    assert listed(client, "/api/alerts?run=quiet") == []
    AlertWriter(alert_logdir / "quiet").write(Alert("oom", "error", "op", "out of memory", 7))
    assert listed(client, "/api/alerts?run=quiet") == [("quiet", "oom", "error", 7)]


@pytest.mark.parametrize("query, status, message", [
    ("severity=fatal", 400, "unknown severity 'fatal': one of info, warning, error"),
    ("severity=error,Error", 400, "unknown severity 'Error'"),
    ("run=nope", 404, "unknown run 'nope'"),
    ("run=a&run=../etc", 404, "unknown run '../etc'"),
])
def test_bad_filters_are_refused(client: FlaskClient, query: str, status: int, message: str) -> None:
    assert_refused(client, f"/api/alerts?{query}", status, message)


def test_the_documented_ci_check_fails_a_job_on_alerts(alert_logdir: Path, serve_board) -> None:
    """docs/board.md's Python example, run as written against a served board: it lists the matching alerts and
    exits 1; on a log directory without such alerts it exits 0."""
    section = (REPO / "docs" / "board.md").read_text().split("### Failing a CI job on alerts")[1]
    script = section.split("```python\n")[1].split("```")[0]
    board = serve_board(alert_logdir)
    result = subprocess.run([sys.executable, "-c", script.replace("http://127.0.0.1:6006", board.url)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == ["b/rank0 step 20: warning exploding_gradient: exploding_gradient at 20",
                                          "a step 30: error nonfinite: nonfinite at 30",
                                          "b/rank0 step 40: error nonfinite: nonfinite at 40"]
    quiet = serve_board(alert_logdir / "quiet")
    assert subprocess.run([sys.executable, "-c", script.replace("http://127.0.0.1:6006", quiet.url)],
                          capture_output=True, text=True, timeout=120).returncode == 0
