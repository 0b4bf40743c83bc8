"""The graph file contract: write_graph validates and writes atomically, read_graph refuses partial/corrupt files."""
from __future__ import annotations

import copy
import json
import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "board"))  # the graph fixtures live with the board's

from graph_runs import mlp_optimised, mlp_unoptimised  # noqa: E402
from instrumentation import SummaryWriter  # noqa: E402
from instrumentation.format import graph_file  # noqa: E402
from instrumentation.format.graph_file import GraphFileError, read_graph, write_graph  # noqa: E402


def test_round_trip_through_a_run_directory_and_a_summary_writer(tmp_path: Path) -> None:
    path = write_graph(tmp_path / "run", mlp_optimised())
    assert path == str(tmp_path / "run" / "plugins" / "graph" / "train_step.0.optimised.json")
    assert read_graph(path) == mlp_optimised()
    with SummaryWriter(tmp_path / "other") as writer:
        second = write_graph(writer, mlp_unoptimised(), signature_index=3)
    assert os.path.basename(second) == "train_step.3.unoptimised.json"
    assert read_graph(second, root=tmp_path) == mlp_unoptimised()
    assert not [name for name in os.listdir(os.path.dirname(second)) if ".tmp-" in name]


def _broken(change) -> dict:
    graph = copy.deepcopy(mlp_optimised())
    change(graph)
    return graph


@pytest.mark.parametrize(("change", "field"), [
    (lambda g: g.update(version=2), "version"),
    (lambda g: g.update(stage="fast"), "stage"),
    (lambda g: g.update(trace_ms=float("nan")), "trace_ms"),
    (lambda g: g.update(trace_ms=-1), "trace_ms"),
    (lambda g: g.pop("function"), "function"),
    (lambda g: g["nodes"][1].update(id="f1"), "nodes[1].id"),
    (lambda g: g["nodes"][1].update(inputs=["n99"]), "nodes[1].inputs[0]"),
    (lambda g: g["nodes"][0].update(inputs=["n3"]), "nodes[0].inputs[0]"),  # a later node: not a DAG in order
    (lambda g: g["nodes"][2].update(shape=[32, -1]), "nodes[2].shape"),
    (lambda g: g["nodes"][2].update(phase="sideways"), "nodes[2].phase"),
    (lambda g: g["nodes"][2].update(module=None), "nodes[2].module"),
    (lambda g: g["nodes"][0].update(fused_from=[]), "nodes[0].fused_from"),
    (lambda g: g["nodes"][0].update(bytes=1.5), "nodes[0].bytes"),
    (lambda g: g["inputs"][0].pop("dtype"), "inputs[0].dtype"),
    (lambda g: g.update(outputs=["nope"]), "outputs[0]"),
    (lambda g: g["passes"][1]["merged"][0].update({"from": "n1"}), "passes[1].merged[0].from"),
    (lambda g: g["passes"][0].update(nodes_after=None), "passes[0].nodes_after"),
    (lambda g: g.pop("passes"), "passes"),
])
def test_a_bad_field_is_named(tmp_path: Path, change, field: str) -> None:
    with pytest.raises(GraphFileError, match=f"^{re.escape(field)}: "):
        write_graph(tmp_path, _broken(change))
    assert not (tmp_path / "plugins").exists() or not list((tmp_path / "plugins" / "graph").iterdir())


def test_unsafe_function_names_are_refused(tmp_path: Path) -> None:
    for function in ("../evil", "a/b", "x\x00y", ""):
        with pytest.raises(GraphFileError):
            write_graph(tmp_path, _broken(lambda g: g.update(function=function)))
    assert not (tmp_path.parent / "evil.0.optimised.json").exists()
    with pytest.raises(TypeError, match="run directory or a SummaryWriter"):
        write_graph(42, mlp_optimised())


@pytest.mark.parametrize(("data", "message"), [
    (json.dumps(mlp_optimised()).encode()[:-40], "not a complete JSON document"),
    (b"", "not a complete JSON document"),
    (b"\xff\xfe garbage", "not a complete JSON document"),
    (b"[" * 200_000, "not a complete JSON document"),
    (json.dumps({**mlp_optimised(), "trace_ms": "NaN"}).replace('"NaN"', "NaN").encode(), "not a complete JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (json.dumps({**mlp_optimised(), "nodes": {}}).encode(), "nodes: must be a list"),
])
def test_partial_and_corrupt_files_raise_a_clear_error(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "train_step.0.optimised.json"
    path.write_bytes(data)
    with pytest.raises(GraphFileError, match=message) as raised:
        read_graph(path)
    assert str(path) in str(raised.value)


def test_oversized_links_and_fifos_are_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(write_graph(tmp_path / "run", mlp_optimised()))
    monkeypatch.setattr(graph_file, "MAX_GRAPH_BYTES", 100)
    with pytest.raises(GraphFileError, match="larger than 100 bytes"):
        read_graph(path)
    monkeypatch.undo()
    outside = tmp_path / "outside.json"
    outside.write_bytes(path.read_bytes())
    link = path.parent / "train_step.1.optimised.json"
    link.symlink_to(outside)
    with pytest.raises(GraphFileError, match="leads outside"):
        read_graph(link, root=tmp_path / "run")
    fifo = path.parent / "train_step.2.optimised.json"
    os.mkfifo(fifo)
    with pytest.raises(GraphFileError, match="FIFO"):
        read_graph(fifo)


def test_names() -> None:
    assert graph_file.fused_op_name(["Add", "ReLU"]) == "Fused[Add+ReLU]"
    assert graph_file.graph_name("Trainer.step", 2, "optimised") == "Trainer.step.2.optimised"
    assert graph_file.is_graph_file("train_step.0.optimised.json")
    for name in ("train_step.0.fast.json", "..json", "x.json", "a..b.0.optimised.json", "train_step.0.optimised"):
        assert not graph_file.is_graph_file(name)
