"""`/api/ranks`: the groups with ranks, one group's numbers, and hostile group names (never a 5xx, strict JSON)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from flask.testing import FlaskClient

from board_helpers import assert_refused, client_for, write_scalars
from instrumentation.format.alerts import ALERTS_RELPATH
from ranks_fixture import checksum_tags, rank_tags, write_rank, write_straggler_group
from test_board_api_hostile import HOSTILE_VALUES, strict_json


@pytest.fixture()
def client(tmp_path: Path) -> FlaskClient:
    logdir = tmp_path / "logs"
    write_straggler_group(logdir, "ddp", ranks=4, steps=30, slow_rank=2)
    for rank, times in enumerate(([0.0, 10.0], [0.0, 12.0])):  # step 0: median 0, so the skew is NaN
        write_rank(logdir / "zero" / f"rank{rank}", {**rank_tags(np.array(times)), **checksum_tags({0: 1.0, 1: rank})})
    alerts = logdir / "zero" / "rank1" / ALERTS_RELPATH  # bare Infinity, as Python's json writes it unless told not to
    alerts.parent.mkdir(parents=True)
    alerts.write_text(json.dumps({"kind": "replica_divergence", "severity": "error", "subject": "rank1", "step": 1,
                                  "message": "checksums differ", "evidence": {"checksums": [1.0, math.inf]}}) + "\n")
    write_scalars(logdir / "solo", "loss", np.arange(3), np.ones(3))
    return client_for(logdir)


def test_without_a_group_every_group_with_ranks_is_listed(client: FlaskClient) -> None:
    body = strict_json(client.get("/api/ranks").get_data(as_text=True))
    assert body == {"groups": {"ddp": [{"rank": k, "run": f"ddp/rank{k}"} for k in range(4)],
                               "zero": [{"rank": 0, "run": "zero/rank0"}, {"rank": 1, "run": "zero/rank1"}]}}


def test_a_groups_answer_holds_every_skew_point_the_breakdown_and_the_straggler_alert(client: FlaskClient) -> None:
    body = strict_json(client.get("/api/ranks?group=ddp").get_data(as_text=True))
    assert body["group"] == "ddp" and [rank["run"] for rank in body["ranks"]] == [f"ddp/rank{k}" for k in range(4)]
    skew = body["skew"]
    assert skew["ranks"] == [0, 1, 2, 3] and skew["steps"] == list(range(30)) and skew["slowest"] == [2] * 30
    for i in range(30):
        assert skew["skew"][i] == pytest.approx((skew["max_ms"][i] - skew["min_ms"][i]) / skew["median_ms"][i])
    tables = {row["rank"]: row for row in body["breakdown"]}
    assert set(tables[2]) == {"rank", "run", "steps", "step_ms", "compute_ms", "wait_ms", "data_ms", "cpu_wait_ms",
                              "allreduce_ms", "comm_bytes"}
    assert tables[2]["compute_ms"] > 77 and tables[0]["comm_bytes"] == 4 << 20
    assert all(20 <= row["cpu_wait_ms"] <= 21 for row in body["breakdown"])  # the fixture's 20-21 ms a step
    [alert] = body["alerts"]
    assert (alert["run"], alert["kind"], alert["subject"], alert["step"]) == ("ddp/rank2", "straggler", "rank2", 19)
    assert alert["evidence"]["steps_over"] == 20 and alert["evidence"]["window_steps"] == [0, 19]
    assert body["replicas"]["first_divergent_step"] is None and len(body["replicas"]["checks"]) == 3
    assert body["notes"] == []


def test_non_finite_numbers_are_spelled_out(client: FlaskClient) -> None:
    body = strict_json(client.get("/api/ranks?group=zero").get_data(as_text=True))
    assert body["skew"]["skew"] == ["NaN", pytest.approx(2 / 11)]
    assert body["replicas"]["first_divergent_step"] == 1
    assert body["replicas"]["checks"] == [{"step": 0, "checksums": [1.0, 1.0], "agree": True},
                                          {"step": 1, "checksums": [0.0, 1.0], "agree": False}]
    assert body["alerts"][0]["evidence"]["checksums"] == [1.0, "Infinity"]


@pytest.mark.parametrize("url, status, message", [
    ("/api/ranks?group=solo", 404, "no run group 'solo' with rank sub-runs"),
    ("/api/ranks?group=ddp/rank0", 404, "no run group 'ddp/rank0'"),
    ("/api/ranks?group=../../etc/passwd", 404, "no run group '../../etc/passwd'"),
    ("/api/ranks?group=", 400, "missing query parameter 'group'"),
    ("/api/ranks?group=a%00b", 400, "NUL"),
])
def test_bad_groups_name_what_is_wrong(client: FlaskClient, url: str, status: int, message: str) -> None:
    assert_refused(client, url, status, message)


def test_a_huge_group_name_is_a_404_with_a_shortened_message(client: FlaskClient) -> None:
    response = client.get("/api/ranks", query_string={"group": "x" * 100_000})
    assert response.status_code == 404 and len(response.get_json()["error"]) < 400


@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_hostile_group_values_never_cause_a_server_error(client: FlaskClient, value: str) -> None:
    for query in ([("group", value)], [("group", value), ("group", "ddp")], [("group", "ddp"), ("group", value)]):
        response = client.get("/api/ranks", query_string=query)
        assert response.status_code in (200, 400, 404), (query, response.status_code)
        body = strict_json(response.get_data(as_text=True))
        if response.status_code >= 400:
            assert body["error"] and body["status"] == response.status_code
    assert client.get("/api/ranks?group=%ff%fe").status_code == 404  # bytes that are not UTF-8


def _refresh_request(group: object, window: object, series: object, focus: object = None) -> dict:
    """The Ranks page's refresh callback request, as the browser sends it."""
    outputs = [{"id": f"ranks-{name}", "property": "figure"} for name in ("step-times", "skew", "breakdown")] + [
        {"id": f"ranks-{name}", "property": "children"} for name in ("per-rank", "alerts", "replicas", "notes",
                                                                      "summary")] + [
        {"id": "ranks-content", "property": "style"}]
    return {"output": ".." + "...".join(f"{o['id']}.{o['property']}" for o in outputs) + "..",
            "outputs": outputs,
            "inputs": [{"id": "ranks-group", "property": "value", "value": group},
                       {"id": "ranks-window", "property": "data", "value": window},
                       {"id": "ranks-series", "property": "value", "value": series},
                       {"id": "ranks-poll", "property": "n_intervals", "value": 1}],
            "state": [{"id": "ranks-focus", "property": "data", "value": focus}],
            "changedPropIds": ["ranks-poll.n_intervals"]}


@pytest.mark.parametrize("group, window, series", [
    ("../../etc/passwd", None, "step"), ("x" * 100_000, None, "step"), (["ddp"], None, "step"),
    ("ddp", "not a window", "compute"), ("ddp", [1, "x"], "wait"), ("ddp", [float("nan"), 3], {"a": 1}),
    ("ddp", [5, 10], "../../etc/passwd")])
def test_the_page_callback_answers_hostile_inputs_without_a_server_error(client: FlaskClient, group, window,
                                                                         series) -> None:
    client.get("/")  # Dash finishes its set-up on the first request
    response = client.post("/_dash-update-component", json=_refresh_request(group, window, series))
    assert response.status_code in (200, 204), response.get_data(as_text=True)[:300]


@pytest.mark.parametrize("focus", ["ddp", [1, 2], {"group": "ddp", "rank": "2", "window": ["a", "b"]},
                                   {"group": "ddp", "rank": True, "window": [float("inf"), 3]},
                                   {"group": ["ddp"], "window": [1, 2, 3]}])
def test_the_page_callback_answers_a_hostile_focus_without_marks(client: FlaskClient, focus) -> None:
    client.get("/")
    response = client.post("/_dash-update-component", json=_refresh_request("ddp", None, "compute", focus))
    assert response.status_code == 200, response.get_data(as_text=True)[:300]
    figure = response.get_json()["response"]["ranks-step-times"]["figure"]
    assert not [s for s in figure["layout"].get("shapes", []) if s.get("name") == "alert-window"]
    assert all("opacity" not in trace for trace in figure["data"])


def test_the_page_callback_marks_a_straggler_window_and_its_rank(client: FlaskClient) -> None:
    client.get("/")
    focus = {"group": "ddp", "rank": 2, "window": [5, 9]}
    answer = client.post("/_dash-update-component", json=_refresh_request("ddp", None, "compute", focus)).get_json()
    for chart in ("ranks-step-times", "ranks-skew"):
        shapes = answer["response"][chart]["figure"]["layout"]["shapes"]
        [shape] = [s for s in shapes if s.get("name") == "alert-window"]
        assert (shape["x0"], shape["x1"]) == (5, 9)
    lines = {t["name"]: t for t in answer["response"]["ranks-step-times"]["figure"]["data"]}
    assert lines["rank2"]["line"]["width"] > lines["rank0"]["line"]["width"] and "opacity" not in lines["rank2"]
    assert all(lines[f"rank{k}"]["opacity"] < 1 for k in (0, 1, 3))
    other = client.post("/_dash-update-component",  # the focus belongs to its group: another one is drawn plain
                        json=_refresh_request("ddp", None, "compute", {**focus, "group": "other"})).get_json()
    assert not [s for s in other["response"]["ranks-step-times"]["figure"]["layout"].get("shapes", [])
                if s.get("name") == "alert-window"]


def test_the_page_callback_draws_a_window_of_the_compute_series(client: FlaskClient) -> None:
    client.get("/")
    answer = client.post("/_dash-update-component", json=_refresh_request("ddp", [5, 10], "compute")).get_json()
    figure = answer["response"]["ranks-step-times"]["figure"]
    assert [trace["name"] for trace in figure["data"]] == [f"rank{k}" for k in range(4)]
    assert figure["data"][0]["x"] == list(range(4, 12)) and figure["layout"]["xaxis"]["range"] == [5, 10]
    assert figure["layout"]["title"]["text"].startswith("compute per rank")


def test_the_page_callback_draws_each_ranks_cpu_wait_and_the_breakdown_stacks_it(client: FlaskClient) -> None:
    client.get("/")
    answer = client.post("/_dash-update-component", json=_refresh_request("ddp", None, "cpu_wait")).get_json()
    lines = answer["response"]["ranks-step-times"]["figure"]
    assert lines["layout"]["title"]["text"].startswith("CPU wait per rank")
    assert all(len(trace["y"]) == 30 and 20 <= min(trace["y"]) and max(trace["y"]) <= 21 for trace in lines["data"])
    bars = {trace["name"]: trace for trace in answer["response"]["ranks-breakdown"]["figure"]["data"]}
    body = client.get("/api/ranks?group=ddp").get_json()["breakdown"]
    assert bars["CPU wait"]["y"] == [row["cpu_wait_ms"] for row in body]
    assert bars["CPU wait"]["base"] == [row["compute_ms"] + row["wait_ms"] + row["data_ms"] for row in body]


def test_the_replica_line_words_one_check_and_many() -> None:
    from board.components.rank_tables import replica_indicator
    from board.data.ranks import ReplicaAgreement, ReplicaCheck

    one = ReplicaAgreement((0, 1), (ReplicaCheck(49, (5.0, 5.0), True),), None, 0)
    two = ReplicaAgreement((0, 1), (ReplicaCheck(9, (5.0, 5.0), True), ReplicaCheck(19, (6.0, 6.0), True)), None, 1)
    assert replica_indicator(one).children.children == "✓ replicas agree at the one checked step (step 49)"
    assert replica_indicator(two).children.children == ("✓ replicas agree at all 2 checked steps (last: step 19) (1 "
                                                        "step(s) not yet logged by every rank)")
