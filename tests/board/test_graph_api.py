"""/api/graph: listings and graphs, and hostile input (names, traversal, huge/malformed/truncated files)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from board_helpers import assert_refused, client_for
from graph_runs import mlp_optimised, torch_add_graph, write_mlp_graphs
from instrumentation import SummaryWriter
from instrumentation.format import graph_file

OPTIMISED = "train_step.0.optimised"


@pytest.fixture()
def logdir(tmp_path: Path) -> Path:
    logdir = tmp_path / "logs"
    with SummaryWriter(logdir / "mlp") as writer:
        writer.add_scalar("loss", 1.0, 0)
    write_mlp_graphs(logdir / "mlp")
    folder = logdir / "mlp" / "plugins" / "graph"
    (folder / "train_step.1.optimised.json").write_bytes(json.dumps(mlp_optimised()).encode()[:-30])  # truncated
    (folder / "train_step.2.optimised.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)  # deeply nested
    (folder / "train_step.3.optimised.json").write_text(json.dumps({**mlp_optimised(), "nodes": "n1"}))
    (tmp_path / "secret.json").write_text(json.dumps(mlp_optimised()))
    (folder / "train_step.4.optimised.json").symlink_to(tmp_path / "secret.json")
    torch_add_graph(logdir / "torch")
    return logdir


@pytest.fixture()
def client(logdir: Path) -> FlaskClient:
    return client_for(logdir)


def test_listing_of_every_run_and_of_one(client: FlaskClient) -> None:
    runs = client.get("/api/graph").get_json()["runs"]
    assert sorted(runs) == ["mlp", "torch"]
    assert [graph["name"] for graph in runs["mlp"]["graphs"]] == [
        OPTIMISED, "train_step.0.unoptimised", "train_step.1.optimised", "train_step.2.optimised",
        "train_step.3.optimised"]
    assert runs["torch"]["graphs"] == [{"name": "GraphDef", "source": "graphdef",
                                        "size_bytes": runs["torch"]["graphs"][0]["size_bytes"]}]
    assert any("train_step.4.optimised.json: not a regular file" in line for line in runs["mlp"]["problems"])
    one = client.get("/api/graph?run=mlp").get_json()
    assert one["run"] == "mlp" and one["graphs"] == runs["mlp"]["graphs"]


def test_one_graph_as_written(client: FlaskClient) -> None:
    body = client.get(f"/api/graph?run=mlp&graph={OPTIMISED}").get_json()
    written = mlp_optimised()
    assert body["stage"] == "optimised" and body["function"] == "train_step" and body["trace_ms"] == 12.5
    assert body["passes"] == written["passes"]
    ops = [node for node in body["nodes"] if node["kind"] == "op"]
    assert [node["id"] for node in ops] == [node["id"] for node in written["nodes"]]
    assert ops[0]["fused_from"] == ["Linear", "ReLU"] and ops[0]["inputs"] == ["x", "p:0.weight", "p:0.bias"]
    torch_graph = client.get("/api/graph?run=torch&graph=GraphDef").get_json()
    assert torch_graph["source"] == "graphdef"
    assert [node["op"] for node in torch_graph["nodes"] if node["kind"] == "op"] == ["aten::linear", "aten::relu",
                                                                                     "aten::linear"]


@pytest.mark.parametrize("name", ["train_step.1.optimised", "train_step.2.optimised", "train_step.3.optimised"])
def test_truncated_nested_and_malformed_files_are_a_422_naming_the_file(client: FlaskClient, name: str) -> None:
    response = client.get(f"/api/graph?run=mlp&graph={name}")
    assert response.status_code == 422 and f"{name}.json" in response.get_json()["error"]


def test_hostile_names(client: FlaskClient) -> None:
    assert_refused(client, "/api/graph?run=nope", 404, "unknown run 'nope'")
    assert_refused(client, "/api/graph?run=../../etc", 404, "unknown run")
    for name in ("../../secret", "train_step.4.optimised", "../mlp/plugins/graph/" + OPTIMISED, "%2e%2e",
                 "x" * 10_000, "🙂", ""):
        assert_refused(client, f"/api/graph?run=mlp&graph={name}", 404, "has no graph")
    assert_refused(client, "/api/graph?run=mlp&graph=a%00b", 400, "NUL")
    assert_refused(client, "/api/graph?run=m%00lp", 400, "NUL")


def test_a_huge_file_is_not_parsed(client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph_file, "MAX_GRAPH_BYTES", 1000)
    response = client.get(f"/api/graph?run=mlp&graph={OPTIMISED}")
    assert response.status_code == 422 and "larger than 1000 bytes" in response.get_json()["error"]


def test_the_page_answers_with_bad_files_present(client: FlaskClient) -> None:
    assert client.get("/graph").status_code == 200
