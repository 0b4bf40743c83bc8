"""engine.function(fn, logdir=...) writes both stages of each traced signature to <run>/plugins/graph/ in the
format of docs/logformat.md."""
from __future__ import annotations

import json

import numpy as np

import engine
from instrumentation.format.graph_file import read_graph
from tests.engine.graph.digits_step import batches, make


def check_format(graph: dict) -> None:
    """The rules of the format: every node input is a graph input or an earlier node; outputs are known."""
    assert graph["version"] == 1 and graph["stage"] in ("unoptimised", "optimised") and graph["trace_ms"] >= 0
    known = {entry["id"] for entry in graph["inputs"]}
    assert all(isinstance(e["shape"], list) and e["dtype"] for e in graph["inputs"])
    for node in graph["nodes"]:
        assert all(source in known for source in node["inputs"]), node
        assert node["phase"] in ("forward", "backward", "optimizer", "loss") and node["dtype"]
        assert isinstance(node["bytes"], int) and node["bytes"] >= 0
        known.add(node["id"])
    assert all(output in known for output in graph["outputs"])


def test_both_stages_are_written_per_signature(tmp_path):
    _, _, step = make("mlp")
    traced = engine.function(step, logdir=str(tmp_path))
    for batch in (32, 32, 16):
        traced(*next(batches(1, batch=batch)))
    folder = tmp_path / "plugins" / "graph"
    names = sorted(p.name for p in folder.iterdir())
    qualname = step.__qualname__
    assert names == sorted(f"{qualname}.{i}.{stage}.json" for i in (0, 1) for stage in ("unoptimised", "optimised"))
    assert not list(folder.glob("*.tmp"))
    for path in folder.iterdir():
        graph = json.loads(path.read_text())
        check_format(graph)
        read_graph(path, root=tmp_path)  # the board's reader and validator take what the engine wrote
        assert graph["function"] == qualname
        assert ("passes" in graph) == (graph["stage"] == "optimised")
    graph = json.loads((folder / f"{qualname}.1.optimised.json").read_text())
    assert graph["signature"] == "x: float32[16, 64] cpu; y: int64[16] cpu"
    linear = [n for n in graph["nodes"] if n["op"] == "Linear"]
    assert [n["module"] for n in linear] == ["0", "2"] and linear[0]["shape"] == [16, 128]
    assert linear[0]["bytes"] == 16 * 128 * 4 and "p:0" in linear[0]["inputs"]


def test_fused_nodes_name_their_ops(tmp_path):
    w = engine.tensor(np.ones(4, np.float32), requires_grad=True)

    @engine.function(logdir=tmp_path)
    def f(x):
        return (-(x + 1.0) * 2.0 - x).sum() + (w * 1).sum()

    f(engine.tensor(np.arange(4, dtype=np.float32)))
    graph = json.loads(next((tmp_path / "plugins" / "graph").glob("*.optimised.json")).read_text())
    check_format(graph)
    fused = [n for n in graph["nodes"] if "fused_from" in n]
    assert [n["op"] for n in fused] == ["Fused[Add+Neg+Mul+Sub]"]
    assert fused[0]["fused_from"] == ["Add", "Neg", "Mul", "Sub"]
    fusion = [p for p in graph["passes"] if p["name"] == "elementwise_fusion"][0]
    assert fusion["merged"][0]["into"] == fused[0]["id"] and len(fusion["merged"][0]["from"]) == 4
