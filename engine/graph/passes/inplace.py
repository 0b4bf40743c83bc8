"""In-place updates: a gradient accumulation (``a + b``) whose left operand is a buffer the graph allocated itself
(an accumulation's or a fused chain's result) used by nothing else writes its sum into that buffer instead of a new
one. Parameters and optimizer state are updated in place by the optimizer node already."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.graph.ir import Graph, record_pass


def inplace_updates(graph: Graph) -> Graph:
    before = len(graph.nodes)
    users = graph.consumers()
    producers = graph.producers()
    outputs = set(graph.outputs)
    merged = []
    for node in graph.nodes:
        if node.kind != "accumulate" or not node.inputs:
            continue
        target = node.inputs[0]
        source = producers.get(target)
        if (source is not None and source.kind in ("accumulate", "fused") and len(users.get(target, [])) == 1
                and target not in outputs and source.shapes[0] == node.shapes[0] and source.dtypes[0] == node.dtypes[0]):
            node.run = _add_into_first
            node.op = "AccumulateInPlace"
            merged.append({"into": source.id, "from": [node.id]})
    return record_pass(graph, "inplace_updates", before, [], merged)


def _add_into_first(a: Any, b: Any) -> Any:
    return np.add(a, b, out=a) if type(a) is np.ndarray else a.__iadd__(b)
