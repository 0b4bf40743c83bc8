"""Constant folding: a deterministic node whose inputs are all constants (``k:`` values, folded results) and whose
op state no backward reads is computed once now; its result becomes a constant of the graph."""
from __future__ import annotations

import numpy as np

from engine.graph.ir import Graph, record_pass


def constant_folding(graph: Graph) -> Graph:
    before = len(graph.nodes)
    read_by_backward = {n.ctx for n in graph.nodes if n.ctx is not None}
    kept, removed = [], []
    for node in graph.nodes:
        foldable = (node.kind in ("forward", "seed", "accumulate") and node.deterministic and len(node.outputs) == 1
                    and node.id not in read_by_backward and all(v in graph.constants for v in node.inputs))
        if foldable:
            value = node.run(*[graph.constants[v] for v in node.inputs])
            value = np.asarray(value) if np.isscalar(value) or isinstance(value, np.generic) else value
            if type(value) is np.ndarray:
                value = value.copy() if value.base is not None else value
                value.flags.writeable = False  # shared by every replay: whoever needs to write copies it
            graph.constants[node.outputs[0]] = value
            graph.input_meta[node.outputs[0]] = (tuple(np.shape(value)), str(getattr(value, "dtype", "")))
            removed.append(node.id)
        else:
            kept.append(node)
    graph.nodes = kept
    return record_pass(graph, "constant_folding", before, removed, [])
