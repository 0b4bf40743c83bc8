"""Elementwise fusion: a chain of elementwise nodes (each feeding only the next, all of one shape and dtype) becomes
one node. On host arrays it allocates its output once and evaluates every step into it with ``out=`` (NumPy ufuncs,
so the bits are those of the unfused ops). On device arrays it runs as one generated CUDA C kernel
(engine/backend/cuda/fused.py) where the generator covers the chain and its inputs, else as the same ufunc chain on
CuPy arrays. A node is elementwise when its op declares a ``ufunc`` (``Function.ufunc``); members whose backward reads
arrays saved by forward (Mul, Div with a gradient) are not fused, those that declare ``saves_no_arrays`` (Add/Sub/Neg:
static saved shapes) are. Inputs other than the previous result may broadcast (a bias, a scalar)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.graph.ir import Graph, Node, record_pass


def _fusible(node: Node, read_by_backward: set[str]) -> bool:
    if node.ufunc is None or node.kind not in ("forward", "accumulate") or len(node.outputs) != 1:
        return False
    return (node.kind == "accumulate" or getattr(node.instance, "saves_no_arrays", False)
            or node.id not in read_by_backward)


def elementwise_fusion(graph: Graph) -> Graph:
    before = len(graph.nodes)
    read_by_backward = {n.ctx for n in graph.nodes if n.ctx is not None}
    users = graph.consumers()
    outputs = set(graph.outputs)
    groups: dict[str, list[Node]] = {}  # id of a chain's last node -> the chain
    for node in graph.nodes:
        if not _fusible(node, read_by_backward):
            continue
        chain = None
        for v in node.inputs:
            tail = groups.get(v)
            if (tail is not None and len(users.get(v, [])) == 1 and v not in outputs
                    and tail[-1].shapes[0] == node.shapes[0] and tail[-1].dtypes[0] == node.dtypes[0]):
                chain = groups.pop(v)
                break
        groups[node.outputs[0]] = (chain or []) + [node]
    merged, removed, replaced = [], [], {}
    for count, chain in enumerate(c for c in groups.values() if len(c) > 1):
        fused = _fuse(chain, f"f{count + 1}")
        replaced[chain[-1].id] = fused
        removed.extend(n.id for n in chain[:-1])
        merged.append({"into": fused.id, "from": [n.id for n in chain]})
    dropped = set(removed)
    graph.nodes = [replaced.get(n.id, n) for n in graph.nodes if n.id not in dropped]
    return record_pass(graph, "elementwise_fusion", before, removed, merged)


def _fuse(chain: list[Node], fid: str) -> Node:
    inputs: list[str] = []
    steps: list[tuple[Any, list[int]]] = []
    previous = None
    for node in chain:
        sources = []
        for v in node.inputs:
            if v == previous:
                sources.append(-1)
            else:
                if v not in inputs:
                    inputs.append(v)
                sources.append(inputs.index(v))
        steps.append((node.ufunc[0], sources))
        previous = node.outputs[0]
    last = chain[-1]
    ops = [n.op for n in chain]
    node = Node(fid, "Fused[" + "+".join(ops) + "]", "fused", _fused_run(steps, last.shapes[0], last.dtypes[0]),
                inputs, [last.outputs[0]], [last.shapes[0]], [last.dtypes[0]], last.module, last.phase,
                fused_from=[n.id for n in chain], fused_ops=ops, category=last.category)
    node.steps = steps  # type: ignore[attr-defined]
    return node


def _fused_run(steps: list[tuple[Any, list[int]]], shape: tuple[int, ...], dtype: str) -> Any:
    dtype = np.dtype(dtype)

    def run(*arrays: Any) -> Any:
        if type(arrays[0]) is np.ndarray:
            out = np.empty(shape, dtype)
            for ufunc, sources in steps:
                ufunc(*[out if s < 0 else arrays[s] for s in sources], out=out)
            return out
        from engine.backend import get_array_module
        xp = get_array_module(*arrays)
        if xp is np:  # a NumPy scalar first
            return _chain(np.empty(shape, dtype), arrays)
        if run.kernel is None:
            from engine.backend.cuda.fused import FusedKernel
            run.kernel = FusedKernel(steps, shape, dtype)
        out = run.kernel(arrays)
        # not covered by the generated kernel (run.kernel.fallback says why): the ufunc chain, one launch per op
        return out if out is not None else _chain(xp.empty(shape, dtype), arrays)

    def _chain(out: Any, arrays: tuple[Any, ...]) -> Any:
        for ufunc, sources in steps:
            ufunc(*[out if s < 0 else arrays[s] for s in sources], out=out)
        return out
    run.kernel = None  # type: ignore[attr-defined]  # the device kernel, made on the first device call
    return run
