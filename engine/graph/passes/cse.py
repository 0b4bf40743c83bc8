"""Common-subexpression elimination: a forward node computing the same deterministic op (same class, same static
attributes) on the same inputs as an earlier one is dropped and its uses read the earlier result. Its backward
nodes then read the earlier op instance's state, which holds the same saved arrays."""
from __future__ import annotations

from engine.graph.ir import Graph, record_pass


def common_subexpressions(graph: Graph) -> Graph:
    before = len(graph.nodes)
    seen: dict[tuple, object] = {}
    kept, removed, merged = [], [], []
    for node in graph.nodes:
        if node.kind != "forward" or not node.deterministic or len(node.outputs) != 1:
            kept.append(node)
            continue
        key = (node.attrs, tuple(node.inputs))
        first = seen.get(key)
        if first is None:
            seen[key] = node
            kept.append(node)
            continue
        graph.replace_uses(node.outputs[0], first.outputs[0])
        for other in graph.nodes:
            if other.ctx == node.id:
                other.ctx, other.instance, other.kept = first.id, first.instance, first.kept
                other.run = first.instance.backward
        removed.append(node.id)
        merged.append({"into": first.id, "from": [node.id]})
    graph.nodes = kept
    return record_pass(graph, "common_subexpressions", before, removed, merged)
