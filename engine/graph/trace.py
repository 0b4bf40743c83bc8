"""Recording a step into the graph IR while it runs eagerly once (``engine.function``'s first call per signature).

The tracer is switched on by ``tracing()``; the engine's hot paths call it only from their observed branches
(``Function._call_observed``, ``autograd.backward``, ``Optimizer.step``/``zero_grad``), so eager code pays nothing.
Backward is recorded by walking the autograd graph here (same order and same accumulation as ``autograd._run``,
so replay gives the same bits); op instances keep their saved state, as each replay's forward refreshes it.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

from engine import autograd as _autograd
from engine import hooks as _hooks
from engine import tensor as _tensor_module
from engine.backend import get_array_module
from engine.graph.ir import Graph, Node
from engine.tensor import Tensor

active: "Tracer | None" = None
_ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACCUMULATE_UFUNC = (np.add, 2)  # the backward sum of two gradients of one value (a node of the trace, not an op)


class TracingError(RuntimeError):
    """A traced function did something a graph cannot replay (e.g. read a tensor's value)."""


def user_frame() -> str:
    """``file:line`` (and the source line) of the innermost frame outside the engine."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_ENGINE_DIR):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    import linecache
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" + (f": `{line}`" if line else "")


class _Observer(_hooks.Recorder):
    """Makes the ops take their observed path (where the tracer is called) while tracing."""

    recorder_order = -2

    def op(self, op: str, module: str, inputs: Any, outputs: Any, output_bytes: int, start_ns: int) -> None:
        pass

    def module_begin(self, event: Any) -> None:
        if active is not None:
            active.record_module_begin(event.path, event.module_type)

    def module_end(self, event: Any) -> None:
        pass


class Tracer:
    def __init__(self, function: str) -> None:
        self.function = function
        self.nodes: list[Node] = []
        self.ids: dict[int, str] = {}  # id(tensor) -> value id
        self.keep: list[Any] = []  # everything whose id is a key above (ids must not be reused while tracing)
        self.captured: dict[str, Tensor] = {}
        self.constants: dict[str, Any] = {}
        self.graph_values: set[int] = set()  # ids of tensors whose value changes per replay (inputs, op results)
        self.by_instance: dict[int, str] = {}  # id(op instance) -> forward node id
        self.counter = 0
        self.param_names: dict[int, str] = {}
        self.array_ids: dict[int, str] = {}  # id(array) -> value id, for arrays ops keep as attributes
        self.constructed: dict[int, tuple[str, ...]] = {}  # id(op instance) -> its attributes before forward ran

    # --- values -----------------------------------------------------------------------------------------
    def new_id(self) -> str:
        self.counter += 1
        return f"n{self.counter}"

    def add_input(self, name: str, t: Tensor) -> None:
        self.ids[id(t)] = name
        self.array_ids[id(t._data)] = name
        self.keep.append(t)
        self.graph_values.add(id(t))

    def value_of(self, t: Tensor) -> str:
        vid = self.ids.get(id(t))
        if vid is not None:
            return vid
        if t.requires_grad and t._ctx is None:
            name = self.param_names.get(id(t)) or t.name or str(len(self.captured))
            vid = f"p:{name}"
            while vid in self.captured:
                vid += "'"
            self.captured[vid] = t
        elif t._ctx is None and t._data.ndim == 0 and type(t._data) is np.ndarray:
            vid = f"k:{len(self.constants)}"
            self.constants[vid] = t._data.copy()
            self.constants[vid].flags.writeable = False
        else:
            vid = f"c:{len(self.captured)}"
            self.captured[vid] = t
        self.ids[id(t)] = vid
        self.keep.append(t)
        return vid

    def check_read(self, t: Tensor, what: str) -> None:
        if id(t) in self.graph_values:
            raise TracingError(f"reading a tensor's value ({what}) while tracing '{self.function}' is not possible: "
                               f"the value differs on every replay of the graph (at {user_frame()}). Return the "
                               "tensor and read it after the call, or compute with tensor ops (engine.where).")

    # --- forward ops --------------------------------------------------------------------------------------
    def attrs_of(self, op: Any) -> tuple:
        """(hashable static attributes, [(attribute, value id)] for array attributes that are graph values)."""
        items, bindings = [], []
        self.constructed[id(op)] = tuple(vars(op))
        for key, value in vars(op).items():
            vid = self.array_ids.get(id(value))
            if vid is not None:
                bindings.append((key, vid))
                continue
            try:
                hash(value)
                if not isinstance(value, (int, float, str, bool, type(None), tuple)):
                    raise TypeError
            except TypeError:  # an array or object the key cannot compare: this op is never merged with another
                items.append(("opaque", id(op)))
                continue
            items.append((key, value))
        return tuple(sorted(items, key=repr)), bindings

    def record_op(self, op: Any, inputs: tuple[Tensor, ...], result: Tensor, attrs_bindings: tuple) -> None:
        name = type(op).__name__
        nid = self.new_id()
        attrs, bindings = attrs_bindings
        in_ids = [self.value_of(t) for t in inputs]
        run = op.forward
        if bindings:  # array arguments held by the op (labels, a condition): rebound to this replay's values
            run = _bound_forward(op, len(in_ids), [key for key, _ in bindings])
            in_ids += [vid for _, vid in bindings]
            attrs = attrs + (("bound", tuple(key for key, _ in bindings)),)
        node = Node(nid, name, "forward", run, in_ids, [nid], [result.shape], [str(result.dtype)],
                    _hooks.module_stack[-1], _hooks.phase if _hooks.phase != "backward" else "forward", instance=op,
                    attrs=(name,) + attrs, deterministic=not op.random,
                    ufunc=op.ufunc, kept=self.constructed.get(id(op), ()))
        self.nodes.append(node)
        self.ids[id(result)] = nid
        self.array_ids[id(result._data)] = nid
        self.keep.append(result)
        self.graph_values.add(id(result))
        self.by_instance[id(op)] = nid

    def record_plain(self, name: str, ufunc: Any, inputs: tuple[Tensor, ...], result: Tensor) -> None:
        """A result computed without an op instance (a comparison): ``ufunc`` on the inputs' arrays."""
        nid = self.new_id()
        node = Node(nid, name, "forward", ufunc, [self.value_of(t) for t in inputs], [nid], [result.shape],
                    [str(result.dtype)], _hooks.module_stack[-1], "forward", attrs=(name,))
        self.nodes.append(node)
        self.ids[id(result)] = nid
        self.array_ids[id(result._data)] = nid
        self.keep.append(result)
        self.graph_values.add(id(result))

    def record_module_begin(self, path: str, kind: str) -> None:
        """Where a module call begins: on replay this node emits module_begin (the call's end is ``record_module``)."""
        self._emit(f"ModuleBegin[{path or kind}]", "module", _module_begin_run(path, kind), [], [], "forward", path)

    def record_module(self, module: Any, args: tuple, out: Any) -> None:
        """A module call's end: on replay it emits module_end and calls the module's forward hooks (those registered
        then) with the replayed arguments and output."""
        tensor_args = [self.ids.get(id(a)) if isinstance(a, Tensor) else None for a in args]
        out_id = self.ids.get(id(out)) if isinstance(out, Tensor) else None
        inputs = [v for v in tensor_args if v is not None] + ([out_id] if out_id is not None else [])
        self._emit(f"Module[{module._path or type(module).__name__}]", "module", _module_run(module, tensor_args, args,
                   out_id is not None, out), inputs, [], "forward", module._path)
        self.nodes[-1].instance = module

    def unguarded(self) -> Any:
        return _Unguarded()

    # --- backward -----------------------------------------------------------------------------------------
    def backward(self, output: Tensor, grad: Any) -> None:
        if grad is not None:
            raise TracingError(f"backward(grad=...) is not supported while tracing (at {user_frame()})")
        if not output.requires_grad:
            _autograd.backward(output)  # raises the eager error
        xp = get_array_module(output._data)
        seed_array = xp.ones_like(output._data)
        seed = self._emit("Seed", "seed", _ones(xp, output._data.shape, output._data.dtype), [], [seed_array],
                          "backward", "")
        pending: dict[int, str] = {}
        arrays: dict[str, Any] = {seed: seed_array}
        leaves: dict[int, tuple[Tensor, str]] = {}
        if output._ctx is None:
            leaves[id(output)] = (output, seed)
        else:
            pending[id(output._ctx)] = seed
        previous = _hooks.set_phase("backward")
        try:
            roots = [output._ctx] if output._ctx is not None else []
            for fn in _autograd._topological_order(roots):
                g = pending.pop(id(fn), None)
                if g is None:
                    continue
                cls = type(fn)
                in_grads = _autograd._call_backward(fn, arrays[g])  # with the op records eager backward emits
                ctx = self.by_instance.get(id(fn))
                nid = self.new_id()
                outs = [nid if i == 0 else f"{nid}.{i}" for i in range(len(in_grads))]
                node = Node(nid, cls.__name__ + "Backward", "backward", fn.backward, [g], outs,
                            [getattr(a, "shape", ()) for a in in_grads],
                            [str(getattr(a, "dtype", "")) for a in in_grads], fn.module, "backward", ctx=ctx,
                            instance=fn, category="temporary", kept=self.constructed.get(id(fn), ()))
                self.nodes.append(node)
                for parent, parent_grad, needed, vid in zip(fn.parents, in_grads, fn.needs_input_grad, outs):
                    if parent_grad is None or not needed:
                        continue
                    if parent_grad.shape != parent._data.shape:
                        raise RuntimeError(f"{fn.name}.backward returned a gradient of shape {parent_grad.shape} "
                                           f"for an input of shape {parent._data.shape}")
                    arrays[vid] = parent_grad
                    if parent._ctx is not None:
                        pending[id(parent._ctx)] = self._accumulate(pending.get(id(parent._ctx)), vid, arrays, fn.module)
                    elif parent.requires_grad:
                        known = leaves.get(id(parent))
                        leaves[id(parent)] = (parent, self._accumulate(known[1] if known else None, vid, arrays,
                                                                       fn.module))
        finally:
            _hooks.set_phase(previous)
        created = [(t, v) for t, v in leaves.values() if t.grad is None]
        accumulated = [(t, v) for t, v in leaves.values() if t.grad is not None]
        siblings = [t for t, _ in created]
        for t, v in created + accumulated:
            pid = self.value_of(t)
            fresh = t.grad is None
            run = _set_grad(t, siblings) if fresh else _add_grad(t)
            self._emit("SetGrad" if fresh else "AccumulateGrad", "set_grad", run, [v, pid], [], "backward", "")
            run(arrays[v], t._data)

    def _accumulate(self, previous: str | None, new: str, arrays: dict[str, Any], module: str) -> str:
        if previous is None:
            return new
        out = arrays[previous] + arrays[new]
        vid = self._emit("Accumulate", "accumulate", np.add, [previous, new], [out], "backward", module)
        self.nodes[-1].ufunc = ACCUMULATE_UFUNC
        arrays[vid] = out
        return vid

    def _emit(self, op: str, kind: str, run: Any, inputs: list[str], results: list[Any], phase: str,
              module: str) -> str:
        nid = self.new_id()
        self.nodes.append(Node(nid, op, kind, run, inputs, [nid] if results else [],
                               [r.shape for r in results], [str(r.dtype) for r in results], module, phase,
                               category="temporary"))
        return nid

    # --- optimizer ----------------------------------------------------------------------------------------
    def optimizer_step(self, optimizer: Any) -> None:
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        inputs = [self.value_of(p) for p in params]
        self._emit(type(optimizer).__name__ + "Step", "effect", _optimizer_run(optimizer), inputs, [], "optimizer", "")

    def zero_grad(self, optimizer: Any, set_to_none: bool) -> None:
        self._emit("ZeroGrad", "effect", lambda *a: optimizer.zero_grad(set_to_none), [], [], "optimizer", "")

    def close(self) -> None:
        """Drop the trace's tensors now (they would otherwise wait for the garbage collector)."""
        for t in self.keep:
            if isinstance(t, Tensor):
                t._ctx = None
        self.keep.clear()
        self.ids.clear()
        self.array_ids.clear()
        self.graph_values.clear()
        self.constructed.clear()

    def graph(self, inputs: list[str], outputs: list[str], meta: dict) -> Graph:
        return Graph(self.function, "", self.nodes, inputs, dict(self.captured), outputs, meta, dict(self.constants))


class _Unguarded:
    def __enter__(self) -> None:
        self.previous, _tensor_module._read_guard = _tensor_module._read_guard, None

    def __exit__(self, *exc: Any) -> None:
        _tensor_module._read_guard = self.previous


def _module_run(module: Any, tensor_args: list[str | None], args: tuple, has_out: bool, out: Any) -> Any:
    kind = type(module).__name__
    static_out = None if has_out or isinstance(out, Tensor) else out
    args = tuple(None if isinstance(a, Tensor) else a for a in args)  # the trace's tensors are not kept

    def run(*arrays: Any) -> None:
        if _hooks.module_end:
            _hooks.emit(_hooks.module_end, _hooks.ModuleEvent(module._path, kind, _hooks._step, time.perf_counter_ns()))
        if module._forward_hooks:
            values = iter(arrays)
            call_args = tuple(Tensor._wrap_array(next(values), "activation", "graph") if vid is not None else a
                              for vid, a in zip(tensor_args, args))
            output = Tensor._wrap_array(next(values), "activation", "graph") if has_out else static_out
            module._apply_forward_hooks(call_args, output)
    return run


def _module_begin_run(path: str, kind: str) -> Any:
    def run() -> None:
        if _hooks.module_begin:
            _hooks.emit(_hooks.module_begin, _hooks.ModuleEvent(path, kind, _hooks._step, time.perf_counter_ns()))
    return run


def _bound_forward(op: Any, n_inputs: int, keys: list[str]) -> Any:
    def run(*arrays: Any) -> Any:
        for key, array in zip(keys, arrays[n_inputs:]):
            setattr(op, key, array)
        return op.forward(*arrays[:n_inputs])
    return run


def _ones(xp: Any, shape: tuple, dtype: Any) -> Any:
    def run() -> Any:
        ones = xp.ones(shape, dtype)
        if xp is np:
            ones.flags.writeable = False  # folded into a constant shared by every replay
        return ones
    return run


def _set_grad(t: Tensor, siblings: list[Tensor] | None = None) -> Any:
    """``t.grad = array`` as eager ``_accumulate`` does: a fresh array the graph made is adopted as is; a view, a
    constant (read-only) or an array another parameter adopted in this step is copied first."""
    others = [q for q in siblings or () if q is not t]

    def run(array: Any, _param: Any = None) -> None:
        if array.dtype != t._data.dtype:
            array = array.astype(t._data.dtype)
        elif array.base is not None or not array.flags.writeable:
            array = array.copy()
        else:
            for q in others:
                if q.grad is not None and q.grad._data is array:
                    array = array.copy()
                    break
        t.grad = Tensor._wrap_array(array, "gradient", "grad")
    return run


def _add_grad(t: Tensor) -> Any:
    def run(array: Any, _param: Any = None) -> None:
        if t.grad is None:
            _set_grad(t)(array)
        else:
            t.grad._data += array
    return run


def _optimizer_run(optimizer: Any) -> Any:
    def run(*_params: Any) -> None:
        if _hooks.optimizer_observed:
            optimizer._update_observed()
        else:
            optimizer._update()
        _hooks.mark_step_end()
    run.optimizer = optimizer  # type: ignore[attr-defined]  # (replay kernels specialise the update)
    return run


class tracing:
    """Context: record ops into ``tracer``; reading a graph value raises ``TracingError``."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.observer = _Observer()

    def __enter__(self) -> Tracer:
        global active
        if active is not None:
            raise TracingError(f"engine.function: '{self.tracer.function}' called while tracing "
                               f"'{active.function}'; nested traced functions are not supported")
        active = self.tracer
        _tensor_module._read_guard = self.tracer.check_read
        _hooks.add_recorder(self.observer)
        self.start = time.perf_counter()
        return self.tracer

    def __exit__(self, *exc: Any) -> None:
        global active
        active = None
        _tensor_module._read_guard = None
        _hooks.remove_recorder(self.observer)
        self.trace_ms = (time.perf_counter() - self.start) * 1e3
