"""In-place updates: a gradient accumulation (``a + b``) whose left operand is a buffer the graph allocated itself
(an accumulation's or a fused chain's result) used by nothing else writes its sum into that buffer instead of a new
one; an op with a ``forward_in_place(x)`` (ReLU) whose input is dead after it (made by an op that declares
``keeps_output = False``, or a fused chain, read later by nothing but module boundaries, where forward hooks would see
it: then, while such a hook is attached, the op runs out of place) computes into that input's buffer. Parameters and
optimizer state are updated in place by the optimizer node already. Same arithmetic, same bits."""
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
                and target not in outputs and source.shapes[0] == node.shapes[0]
                and source.dtypes[0] == node.dtypes[0]):
            node.run = _add_into_first
            node.op = "AccumulateInPlace"
            merged.append({"into": source.id, "from": [node.id]})
    positions = {n.id: i for i, n in enumerate(graph.nodes)}
    for i, node in enumerate(graph.nodes):
        in_place = getattr(node.instance, "forward_in_place", None) if node.kind == "forward" else None
        if in_place is None or len(node.inputs) != 1:
            continue
        target = node.inputs[0]
        source = producers.get(target)
        later = [u for u in users.get(target, []) if u is not node and positions[u.id] >= i]
        hooked = [u.instance for u in later if u.kind == "module"]  # forward hooks would read the input there
        readers_with_backward = [u for u in users.get(target, []) if u.kind == "forward" and u is not node
                                 and any(n.ctx == u.id for n in graph.nodes)]
        if (source is not None and (source.kind == "fused" or not getattr(source.instance, "keeps_output", True))
                and len(later) == len(hooked) and not readers_with_backward and target not in outputs
                and source.shapes[0] == node.shapes[0] and source.dtypes[0] == node.dtypes[0]):
            node.run = _into_input(in_place, node.run, hooked)
            merged.append({"into": source.id, "from": [node.id]})
    return record_pass(graph, "inplace_updates", before, [], merged)


def _into_input(in_place: Any, forward: Any, hooked: list[Any]) -> Any:
    """The op's ``forward_in_place`` on its dead input — unless a module whose forward hooks would read that input
    has hooks now (checked on every replay: hooks may come and go)."""
    if not hooked:
        return in_place

    def run(x: Any) -> Any:
        for module in hooked:
            if module._forward_hooks:
                return forward(x)
        return in_place(x)
    return run


def _add_into_first(a: Any, b: Any) -> Any:
    return np.add(a, b, out=a) if type(a) is np.ndarray else a.__iadd__(b)
