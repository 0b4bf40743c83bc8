"""Running a graph: the graph compiled once into the Python source of one function, which calls each node's callable
on its inputs in order, with the engine's records.

The generated function holds every value in a local variable (no dictionary of values, no per-node dispatch), calls
prebound node callables, and registers node results with the allocator (activation / temporary) and releases them
where the memory plan says they are dead, so the memory tracker sees a traced step as it sees an eager one.
Everything that only recorders or forward hooks need is behind a test of the engine's hook flags, read per replay:
with recorders attached a replayed node emits what the eager op emits (``op_begin``/``op`` under the node's op name —
``<Op>Backward`` for backward nodes, ``Fused[Add+ReLU]`` for fused ones — and its module), ``hooks.graph_node`` names
the node running (None outside replay) so a profiler can join records to nodes, and module nodes emit
``module_begin``/``module_end`` around the module's ops and call its forward hooks. ``source(graph)`` shows the code.
"""
from __future__ import annotations

import linecache
import time
from typing import Any, Callable

import numpy as np

from engine import hooks as _hooks
from engine import memory as _memory
from engine.graph import kernels as _kernels
from engine.graph.ir import Graph
from engine.tensor import Tensor

_now = time.perf_counter_ns


def run(graph: Graph, arrays: list[Any]) -> list[Any]:
    """The arrays of ``graph.outputs`` for input ``arrays`` (in ``graph.inputs`` order)."""
    return [t._data for t in run_tensors(graph, arrays)]


def run_tensors(graph: Graph, arrays: list[Any]) -> list[Any]:
    """``graph.outputs`` as Tensors (each registered with the allocator once, when its node made it)."""
    compiled = graph.__dict__.get("_replay")
    if compiled is None:
        compiled = graph.__dict__["_replay"] = compile_graph(graph)
    return compiled(*arrays)


def source(graph: Graph) -> str:
    """The Python source ``run`` executes for ``graph``."""
    return _generate(graph)[0]


def compile_graph(graph: Graph) -> Callable[..., list[Any]]:
    """The replay of ``graph`` as one function of its input arrays, returning its outputs as Tensors."""
    code, bound = _generate(graph)
    namespace = dict(bound, H=_hooks, register=_memory.register, release=_memory.release, wrap=Tensor._wrap_array,
                     ndarray=np.ndarray, as_array=_as_array, observed_call=_observed, release_all=_release_all)
    filename = f"<replay of {graph.function} {id(graph):#x}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # tracebacks show the line
    exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - our own generated source
    return namespace["replay"]


def _generate(graph: Graph) -> tuple[str, dict[str, Any]]:
    """(source of ``def replay(...)``, the objects its global names stand for)."""
    bound: dict[str, Any] = {}
    names: dict[str, str] = {}  # value id -> the expression that reads it
    for i, vid in enumerate(graph.inputs):
        names[vid] = f"a{i}"
    head = []
    for i, (vid, tensor) in enumerate(graph.captured.items()):
        bound[f"C{i}"] = tensor
        names[vid] = f"c{i}"
        head.append(f"c{i} = C{i}._data")  # read afresh: a parameter's array may be replaced between steps
    for i, (vid, array) in enumerate(graph.constants.items()):
        bound[f"K{i}"] = array
        names[vid] = f"K{i}"
    users = graph.consumers()
    # a gradient only SetGrad reads becomes .grad there (registered as a gradient then, as eager does)
    to_grad = {v for v, readers in users.items() if all(r.kind == "set_grad" for r in readers)}
    keys: dict[str, str] = {}  # value id -> the local holding its allocator key, while registered
    returned: dict[str, str | None] = dict.fromkeys(graph.outputs)  # graph output -> the local of its Tensor
    all_keys: list[str] = []
    body: list[str] = []
    phase, opened = None, 0  # opened: module paths pushed and not popped yet

    def value(vid: str) -> str:
        local = names[vid] = f"v{len(names)}"
        return local

    def registered(vid: str, local: str, node: Any, may_be_none: bool) -> None:
        if vid in returned:  # a result is a tensor from the start: registered once, released when it dies
            tensor = returned[vid] = f"T{list(returned).index(vid)}"
            call = f"wrap({local}, {node.category!r}, {node.op!r})"
            body.append(f"{tensor} = {call} if {local} is not None else None" if may_be_none else f"{tensor} = {call}")
            return
        if vid in to_grad:
            return
        key = keys[vid] = f"k{len(all_keys)}"
        all_keys.append(key)
        call = f"register({local}, {node.category!r}, {node.op!r})"
        body.append(f"{key} = {call} if {local} is not None else None" if may_be_none else f"{key} = {call}")

    def released(vid: str) -> None:
        key = keys.pop(vid, None)
        if key is not None:
            body.append(f"release({key}); {key} = None")

    for j, node in enumerate(graph.nodes):
        node_phase = "forward" if node.phase == "loss" else node.phase
        if node_phase != phase:
            body.append(f"H.phase = {node_phase!r}")
            phase = node_phase
        bound[f"F{j}"], bound[f"N{j}"] = _kernels.for_node(node) or node.run, node
        args = ", ".join(names[v] for v in node.inputs)
        call = f"F{j}({args})"
        watched = f"observed_call(N{j}, F{j}, ({args}{',' if len(node.inputs) == 1 else ''}))"
        if node.kind == "set_grad":  # the gradient becomes .grad: no longer a temporary
            released(node.inputs[0])
            body.append(call)
        elif node.kind == "effect":
            body.append(call)
        elif node.kind == "module":  # the module's path is on the stack in between, as in eager (allocations read it)
            if node.instance is None:  # a module's beginning: only module_begin recorders want more
                body.append(f"modules.append({node.module!r})")
                body.append(f"if H.module_begin: {call}")
                opened += 1
            else:
                bound[f"M{j}"] = node.instance
                if opened:
                    body.append("modules.pop()")
                    opened -= 1
                body.append(f"if M{j}._forward_hooks or H.module_end: {call}")
        elif node.kind == "backward" or len(node.outputs) > 1:
            body.append(f"t = {watched} if observed else {call}")
            for i, vid in enumerate(node.outputs):
                local = value(vid)
                body.append(f"{local} = t[{i}]")
                registered(vid, local, node, True)
            body.append("t = None")
        elif node.outputs:
            local = value(node.outputs[0])
            body.append(f"{local} = {watched} if observed else {call}")
            if not node.shapes or node.shapes[0] == ():  # NumPy reductions may give a scalar, not a 0-d array
                body.append(f"if type({local}) is not ndarray: {local} = as_array({local})")
            registered(node.outputs[0], local, node, False)
        else:
            body.append(f"{watched} if observed else {call}")
        if node.release_state and node.instance is not None:
            bound[f"R{j}"] = _state_release(node.instance, node.kept)
            body.append(f"R{j}()")
        for vid in graph.frees.get(node.id, ()):
            if names.get(vid, "").startswith("v"):
                body.append(f"{names[vid]} = None")
            released(vid)
    results = [returned[v] or f"wrap({names[v]}, 'activation', 'graph')" for v in graph.outputs]
    for vid in list(keys):
        released(vid)
    body.append(f"return [{', '.join(results)}]")
    arguments = ", ".join(f"a{i}" for i in range(len(graph.inputs)))
    lines = [f"def replay({arguments}):"]
    if all_keys:
        lines.append("    " + " = ".join(all_keys) + " = None")
    lines += ["    if not H._step_open:", "        H.mark_step_begin()", "    observed = H.ops_observed"]
    lines += ["    modules = H.module_stack", "    depth = len(modules)"]
    lines += ["    " + line for line in head]
    lines.append("    try:")
    lines += ["        " + line for line in body]
    lines.append("    except BaseException:")
    lines.append(f"        release_all(({''.join(k + ', ' for k in all_keys)}))")
    lines.append("        del modules[depth:]")
    lines += ["        raise", "    finally:", "        H.phase = 'forward'"]
    return "\n".join(lines) + "\n", bound


def _as_array(out: Any) -> Any:
    return np.asarray(out) if np.isscalar(out) or isinstance(out, np.generic) else out


def _release_all(keys: tuple) -> None:
    for key in keys:
        if key is not None:
            _memory.release(key)


def _observed(node: Any, fn: Callable[..., Any], ins: tuple) -> Any:
    """A node run through the dispatch core: ``op_begin`` and ``op`` under the node's op name and module."""
    name, module = node.op, node.module
    _hooks.graph_node = node.id
    try:
        if _hooks.op_begin:
            _hooks.record_op_begin(name, module, list(ins))
        start_ns = _now()
        out = fn(*ins)
        _hooks.record_op(name, module, list(ins), out if isinstance(out, tuple) else (out,), start_ns)
        return out
    finally:
        _hooks.graph_node = None


def _state_release(op: Any, kept: tuple[str, ...]) -> Callable[[], None]:
    """What lets go of the arrays ``op`` saved for its backward (its forward sets them again on the next replay):
    its array attributes but those it had before its first forward (its constructor's: class weights, …), named on
    the first call."""
    state, names = vars(op), None

    def release() -> None:
        nonlocal names
        if names is None:
            names = tuple(k for k, v in state.items() if k not in kept and _is_array(v))
        for name in names:
            state.pop(name, None)
    return release


def _is_array(value: Any) -> bool:
    return (hasattr(value, "__array_interface__") or hasattr(value, "__cuda_array_interface__")) and \
        not isinstance(value, np.generic)
