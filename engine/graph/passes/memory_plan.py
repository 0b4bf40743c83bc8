"""Memory planning: each value is dropped (and its allocator record released) right after its last use, where a
use by a forward op with a backward node lasts until that backward node (as an eager op holds its inputs until its
backward ran) unless the op's backward reads no input (the op declares ``saves_inputs = False``: eager autograd keeps
them until then, a replay drops them at once); after an op instance's last backward node its saved arrays are let go
(as eager autograd frees a node). Values are never written to before they are dead: reuse happens through the fused
chains' single output buffer and the in-place accumulations (passes before this one)."""
from __future__ import annotations

from engine.graph.ir import Graph, record_pass



def memory_planning(graph: Graph) -> Graph:
    before = len(graph.nodes)
    index = {n.id: i for i, n in enumerate(graph.nodes)}
    last_use: dict[str, int] = {}
    backward_of: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        if node.ctx is not None:
            backward_of[node.ctx] = max(backward_of.get(node.ctx, -1), i)
    for i, node in enumerate(graph.nodes):
        # an op's inputs live until its backward (eager: its parents), unless its backward reads none of them
        end = max(i, backward_of.get(node.id, -1)) if getattr(node.instance, "saves_inputs", True) else i
        for v in node.inputs:
            last_use[v] = max(last_use.get(v, -1), end)
        for v in node.outputs:
            last_use[v] = max(last_use.get(v, -1), i)
    keep = set(graph.outputs) | set(graph.inputs) | set(graph.captured) | set(graph.constants)
    frees: dict[str, list[str]] = {}
    for v, i in last_use.items():
        if v not in keep:
            frees.setdefault(graph.nodes[i].id, []).append(v)
    graph.frees = frees
    for node_id, i in backward_of.items():
        graph.nodes[i].release_state = True
    del index
    return record_pass(graph, "memory_planning", before, [], [])
