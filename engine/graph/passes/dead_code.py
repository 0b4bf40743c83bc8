"""Dead-code elimination: drop nodes whose results nothing uses (effects and graph outputs are always used)."""
from __future__ import annotations

from engine.graph.ir import Graph, record_pass


def dead_code(graph: Graph) -> Graph:
    before = len(graph.nodes)
    used = set(graph.outputs)
    kept, removed = [], []
    for node in reversed(graph.nodes):
        if node.effect or any(v in used for v in node.outputs) or node.id in used:
            kept.append(node)
            used.update(node.inputs)
            if node.ctx is not None:
                used.add(node.ctx)  # the forward node whose op instance holds this backward's state
        else:
            removed.append(node.id)
    graph.nodes = kept[::-1]
    return record_pass(graph, "dead_code", before, removed[::-1], [])
