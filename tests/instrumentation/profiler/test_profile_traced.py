"""Profiling an engine.function step: the replayed ops are in the trace under their node's op name (fused nodes as
Fused[...]) with the graph node id in args["node"], joinable to the graph file; steps and ops per step as eager."""
from __future__ import annotations

import json

import numpy as np

import engine
import instrumentation
from engine import nn
from engine.nn import functional as F
from instrumentation.format import trace as fmt

BATCH = 32


def test_replayed_ops_carry_their_graph_node(tmp_path) -> None:
    engine.manual_seed(0)
    (x, y), _ = engine.datasets.load_digits(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)
    shift = engine.tensor(np.zeros((BATCH, 64), np.float32))

    def step(xb, yb):
        optimizer.zero_grad()
        inputs = -(xb + shift) * 0.5 - shift  # an elementwise chain: one fused node
        loss = F.cross_entropy(model(inputs), yb)
        loss.backward()
        optimizer.step()
        return loss

    traced = engine.function(step, logdir=tmp_path)
    engine.hooks.reset_step()
    with instrumentation.profile(tmp_path) as prof:
        for i in range(4):
            traced(engine.tensor(x[i * BATCH:(i + 1) * BATCH]), engine.tensor(y[i * BATCH:(i + 1) * BATCH]))
    trace = fmt.read_trace(prof.traces_written[0])
    ops = [e for e in trace["traceEvents"] if e.get("cat") == fmt.CAT_OP]
    graph = json.loads(next((tmp_path / "plugins" / "graph").glob("*.optimised.json")).read_text())
    by_id = {node["id"]: node for node in graph["nodes"]}
    replayed = [e for e in ops if e["args"]["step"] >= 1]  # step 0 was the trace (eager ops, no node)
    assert replayed and all(e["args"][fmt.ARG_NODE] in by_id for e in replayed)
    assert all(by_id[e["args"][fmt.ARG_NODE]]["op"] == e["name"] for e in replayed)
    assert all(fmt.ARG_NODE not in e["args"] for e in ops if e["args"]["step"] == 0)
    names = [e["name"] for e in replayed if e["args"]["step"] == 1]
    assert names == ["Fused[Add+Neg+Mul+Sub]", "Linear", "ReLU", "Linear", "CrossEntropy", "CrossEntropyBackward",
                     "LinearBackward", "ReLUBackward", "LinearBackward"]
    eager_names = [e["name"] for e in ops if e["args"]["step"] == 0]
    assert eager_names == ["Add", "Neg", "Mul", "Sub"] + names[1:]
