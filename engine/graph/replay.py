"""Running a graph: each node's callable on the arrays of its inputs, in order, with the engine's records.

With recorders attached a replayed node emits what the eager op emits (``op_begin``/``op`` under the node's op
name — ``<Op>Backward`` for backward nodes, ``Fused[Add+ReLU]`` for fused ones — and its module), and
``hooks.graph_node`` names the node running (None outside replay) so a profiler can join records to nodes.
Node results are registered with the allocator (activation / temporary) and released when the memory plan says
they are dead, so the memory tracker sees a traced step as it sees an eager one.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from engine import hooks as _hooks
from engine import memory as _memory
from engine.graph.ir import Graph

_now = time.perf_counter_ns
_register, _release = _memory.register, _memory.release


def _plan(graph: Graph) -> list[tuple]:
    """The nodes as tuples of what ``run`` reads (built once per graph, kept on it)."""
    plan = []
    users = graph.consumers()
    # a gradient only SetGrad reads becomes .grad there (registered as a gradient then, as eager does)
    to_grad = {v for v, readers in users.items() if all(r.kind == "set_grad" for r in readers)}
    for node in graph.nodes:
        mode = 0 if node.kind == "backward" else (1 if node.outputs else 2)
        outputs = node.outputs[0] if mode == 1 else [(v, v not in to_grad) for v in node.outputs]
        plan.append((node.run, node.inputs, outputs, mode, node.category,
                     node.op, graph.frees.get(node.id, ()), node if node.release_state else None,
                     "forward" if node.phase == "loss" else node.phase, node.kind in ("set_grad", "effect", "module"),
                     node))
    return plan


def run(graph: Graph, arrays: list[Any]) -> list[Any]:
    """The arrays of ``graph.outputs`` for input ``arrays`` (in ``graph.inputs`` order)."""
    plan = graph.__dict__.get("_plan")
    if plan is None:
        plan = graph.__dict__["_plan"] = _plan(graph)
    env: dict[str, Any] = dict(graph.constants)
    keys: dict[str, int] = {}
    for name, array in zip(graph.inputs, arrays):
        env[name] = array
    for vid, t in graph.captured.items():
        env[vid] = t._data
    observed = _hooks.ops_observed
    if observed and not _hooks._step_open:
        _hooks.mark_step_begin()
    phase = _hooks.phase
    register, release, ndarray = _register, _release, np.ndarray
    try:
        for fn, inputs, outputs, mode, category, op, dead, releasing, node_phase, effect, node in plan:
            if node_phase != phase:
                phase = node_phase
                _hooks.set_phase(phase)
            if mode == 2 and node.kind == "set_grad":  # the gradient becomes .grad: no longer a temporary
                key = keys.pop(inputs[0], None)
                if key is not None:
                    release(key)
            if observed and not effect:
                out = _observed(node, [env[v] for v in inputs])
            else:
                out = fn(*[env[v] for v in inputs])
            if mode == 1:
                if type(out) is not ndarray and (np.isscalar(out) or isinstance(out, np.generic)):
                    out = np.asarray(out)
                env[outputs] = out
                keys[outputs] = register(out, category, op)
            elif mode == 0:
                for (vid, registered), array in zip(outputs, out):
                    if array is not None:
                        env[vid] = array
                        if registered:
                            keys[vid] = register(array, category, op)
            if releasing is not None:
                _release_state(releasing)
            for vid in dead:
                env.pop(vid, None)
                key = keys.pop(vid, None)
                if key is not None:
                    release(key)
        return [env[v] for v in graph.outputs]
    finally:
        _hooks.set_phase("forward")
        for key in keys.values():
            release(key)


def _observed(node: Any, ins: list[Any]) -> Any:
    name, module = node.op, node.module
    _hooks.graph_node = node.id
    try:
        if _hooks.op_begin:
            _hooks.emit(_hooks.op_begin, name, module, ins)
        start_ns = _now()
        out = node.run(*ins)
        outs = out if isinstance(out, tuple) else (out,)
        nbytes = sum(getattr(o, "nbytes", 0) for o in outs if o is not None)
        for record in _hooks.op:
            try:
                record(name, module, ins, outs, nbytes, start_ns)
            except _hooks.PropagatingError:
                raise
            except Exception as error:  # noqa: BLE001 - observing must never break training
                _hooks.report_failure(record, error)
        return out
    finally:
        _hooks.graph_node = None


def _release_state(node: Any) -> None:
    """Let go of the arrays the node's op kept for its backward (its forward sets them again next replay). The
    attribute names are found on the first call and kept on the node."""
    state = vars(node.instance)
    keys = node.__dict__.get("_state_keys")
    if keys is None or any(k not in state for k in keys):
        keys = node.__dict__["_state_keys"] = tuple(
            k for k, v in state.items() if hasattr(v, "dtype") and hasattr(v, "shape") and not isinstance(v, np.generic))
    for key in keys:
        state.pop(key, None)
