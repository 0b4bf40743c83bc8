"""The graph IR of a traced step: nodes in execution order, each an op with its inputs, outputs, shapes, dtypes,
module path and phase, and the callable that computes it on replay.

Values are named by strings: graph inputs by their argument name (``x``), captured tensors by ``p:<name>``
(parameters) or ``c:<n>`` (other tensors the function read), node results by the node id (``n12``; a node with
several results names them ``n12``, ``n12.1`` …). ``Node.run(*arrays)`` returns one array (or a tuple for several
outputs, or None for a pure effect such as the optimizer update). ``Node.ctx`` names the forward node whose op
instance a backward node reads its saved state from (an ordering dependency that passes keep). A module call is two
``module`` nodes: ``ModuleBegin[<path>]`` (no inputs, no instance) where the call begins and ``Module[<path>]``
(reading its tensor arguments and output; ``instance`` is the module) where it ends.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

KINDS = ("forward", "backward", "accumulate", "seed", "set_grad", "effect", "module", "fused")


@dataclass
class Node:
    id: str
    op: str
    kind: str
    run: Callable[..., Any]
    inputs: list[str]
    outputs: list[str]
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    module: str = ""
    phase: str = "forward"
    ctx: str | None = None  # forward node whose op instance holds the state this (backward) node reads
    instance: Any = None  # the op instance (forward/backward nodes)
    attrs: tuple = ()  # hashable static attributes (CSE key)
    deterministic: bool = True
    ufunc: Any = None  # elementwise: the NumPy ufunc (with ``scalar``) it computes, for fusion
    fused_from: list[str] = field(default_factory=list)  # original node ids a fused node holds
    fused_ops: list[str] = field(default_factory=list)
    category: str = "activation"
    release_state: bool = False  # memory planning: the op instance's saved arrays are dead after this node
    kept: tuple[str, ...] = ()  # the op instance's attributes before its first forward (from its constructor)

    @property
    def effect(self) -> bool:
        return self.kind in ("set_grad", "effect", "module")

    @property
    def nbytes(self) -> int:
        import numpy as np
        return sum(int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize for s, d in zip(self.shapes, self.dtypes)
                   if d and d != "None")


@dataclass
class Graph:
    function: str
    signature: str
    nodes: list[Node]
    inputs: list[str]  # argument values, in call order
    captured: dict[str, Any]  # value id -> the Tensor read on every replay (parameters, constants)
    outputs: list[str]
    input_meta: dict[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)  # value id -> array computed once (constant folding)
    passes: list[dict[str, Any]] = field(default_factory=list)
    trace_ms: float = 0.0
    frees: dict[str, list[str]] = field(default_factory=dict)  # node id -> values dead after it (memory planning)

    def copy(self) -> Graph:
        import copy as _copy
        nodes = [_copy.copy(n) for n in self.nodes]
        for n in nodes:
            n.inputs, n.outputs = list(n.inputs), list(n.outputs)
        return Graph(self.function, self.signature, nodes, list(self.inputs), dict(self.captured), list(self.outputs),
                     dict(self.input_meta), dict(self.constants), list(self.passes), self.trace_ms, dict(self.frees))

    def producers(self) -> dict[str, Node]:
        return {v: n for n in self.nodes for v in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                users.setdefault(v, []).append(n)
        return users

    def replace_uses(self, old: str, new: str) -> None:
        for n in self.nodes:
            n.inputs = [new if v == old else v for v in n.inputs]
        self.outputs = [new if v == old else v for v in self.outputs]


def record_pass(graph: Graph, name: str, before: int, removed: list[str], merged: list[dict[str, Any]]) -> Graph:
    graph.passes.append({"name": name, "removed": removed, "merged": merged, "nodes_before": before,
                         "nodes_after": len(graph.nodes)})
    return graph


def to_dict(graph: Graph, stage: str) -> dict[str, Any]:
    """The graph as the JSON object of docs/logformat.md (plugins/graph)."""
    made_by = {v: n.id for n in graph.nodes for v in n.outputs}  # value -> the node making it (a fused node's id)

    def base(value: str) -> str:
        return made_by.get(value, value)

    nodes = []
    for n in graph.nodes:
        if n.kind == "module":  # a module boundary (replay calls its forward hooks there), not an op
            continue
        entry: dict[str, Any] = {"id": n.id, "op": n.op, "inputs": [base(v) for v in n.inputs],
                                 "shape": list(n.shapes[0]) if n.shapes else [],
                                 "dtype": (n.dtypes[0] if n.dtypes else "") or "none",
                                 "module": n.module, "phase": n.phase, "bytes": n.nbytes}
        if n.fused_ops:
            entry["fused_from"] = list(n.fused_ops)
            entry["fused_nodes"] = list(n.fused_from)
        nodes.append(entry)
    inputs = [{"id": v, "shape": list(graph.input_meta.get(v, ((), ""))[0]),
               "dtype": graph.input_meta.get(v, ((), "?"))[1]} for v in graph.inputs]
    inputs += [{"id": v, "shape": list(t.shape), "dtype": str(t.dtype)} for v, t in sorted(graph.captured.items())]
    inputs += [{"id": v, "shape": list(getattr(a, "shape", ())), "dtype": str(getattr(a, "dtype", "?"))}
               for v, a in sorted(graph.constants.items())]
    out = {"version": 1, "function": graph.function, "signature": graph.signature, "stage": stage,
           "trace_ms": round(graph.trace_ms, 3), "nodes": nodes, "inputs": inputs,
           "outputs": [base(v) for v in graph.outputs]}
    if stage == "optimised":
        out["passes"] = graph.passes
    return out
