"""Recording a step into the graph IR while it runs eagerly once (``engine.function``'s first call per signature).

The tracer is a recorder (``engine.hooks``) in the list only while ``tracing()`` runs: the engine reaches it through
the dispatch core like any other recorder — ``call_begin``/``call`` (each forward op, with its ``Function``
instance), ``module_begin``/``module_call``, ``optimizer_call``, ``zero_grad`` and the backward walk's
``backward_begin``, ``backward_node``, ``gradient_sum`` and ``leaf_grad``. Backward is recorded from the one walk
``engine.autograd`` makes (each gradient array it hands on is named by the node result it came from), so replay
repeats the eager arithmetic by construction; op instances keep their saved state, as each replay's forward
refreshes it. What a graph cannot replay raises ``TracingError`` (a ``PropagatingError``) from these methods.
"""
from __future__ import annotations

import functools
import os
import sys
import time
from typing import Any, Callable

import numpy as np

from engine import hooks as _hooks
from engine.backend import get_array_module
from engine.graph.ir import Graph, Node
from engine.tensor import Tensor, set_read_guard

_active: "Tracer | None" = None  # the tracer recording now (only to refuse nesting)
_ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACCUMULATE_UFUNC = (np.add, 2)  # the backward sum of two gradients of one value (a node of the trace, not an op)


class TracingError(_hooks.PropagatingError, RuntimeError):
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


def _recording(method: Callable[..., None]) -> Callable[..., None]:
    """A recorder method of the tracer: a failure stops the trace (a graph missing a node would replay wrongly)."""

    @functools.wraps(method)
    def record(self: Any, *args: Any) -> None:
        try:
            method(self, *args)
        except TracingError:
            raise
        except Exception as error:
            raise TracingError(f"engine.function: recording '{self.function}' failed in Tracer.{method.__name__} "
                               f"({type(error).__name__}: {error})") from error
    return record


class Tracer(_hooks.Recorder):
    recorder_order = -2  # before every other recorder: a replay's records follow the graph it builds

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
        self.attrs: dict[int, tuple] = {}  # id(op instance) -> attrs_of() it had before forward ran
        # id(op instance) -> (it, its attributes once called): the eager backward frees what replay needs
        self.construction: dict[int, tuple[Any, dict[str, Any]]] = {}
        self.grad_ids: dict[int, str] = {}  # id(gradient array of the backward walk) -> value id
        self.grad_leaves: list[Tensor] = []  # leaves whose .grad a SetGrad node of this trace sets

    # --- the recorder methods (engine.hooks calls these while tracing) ------------------------------------
    @_recording
    def call_begin(self, function: Any, inputs: tuple) -> None:
        self.attrs[id(function)] = self.attrs_of(function)

    @_recording
    def call(self, function: Any, inputs: tuple, result: Any) -> None:
        self.record_op(function, inputs, result, self.attrs.pop(id(function)))
        self.construction[id(function)] = (function, dict(vars(function)))

    @_recording
    def module_begin(self, event: Any) -> None:
        self.record_module_begin(event.path, event.module_type)

    @_recording
    def module_call(self, module: Any, args: tuple, output: Any) -> None:
        self.record_module(module, args, output)

    @_recording
    def optimizer_call(self, optimizer: Any, closure: Any) -> None:
        if closure is not None:
            raise TracingError(f"optimizer.step(closure) is not supported inside engine.function (at {user_frame()})")
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        inputs = [self.value_of(p) for p in params]
        self._emit(type(optimizer).__name__ + "Step", "effect", _optimizer_run(optimizer), inputs, [], "optimizer", "")

    @_recording
    def zero_grad(self, optimizer: Any, set_to_none: bool) -> None:
        self._emit("ZeroGrad", "effect", lambda *a: optimizer.zero_grad(set_to_none), [], [], "optimizer", "")

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

    # --- backward: the walk of engine.autograd, observed ------------------------------------------------------
    @_recording
    def backward_begin(self, outputs: list, grads: list, seeds: list, inputs: Any) -> None:
        if inputs is not None:
            raise TracingError(f"engine.grad() is not supported inside engine.function (at {user_frame()}); "
                               "use loss.backward()")
        if any(grad is not None for grad in grads):
            raise TracingError(f"backward(grad=...) is not supported while tracing (at {user_frame()})")
        for seed in seeds:
            vid = self._emit("Seed", "seed", _ones(get_array_module(seed), seed.shape, seed.dtype), [], [seed],
                             "backward", "")
            self._name_grad(seed, vid)

    @_recording
    def backward_node(self, function: Any, grad: Any, input_grads: tuple) -> None:
        nid = self.new_id()
        outs = [nid if i == 0 else f"{nid}.{i}" for i in range(len(input_grads))]
        self.nodes.append(Node(nid, type(function).__name__ + "Backward", "backward", function.backward,
                               [self.grad_ids[id(grad)]], outs, [getattr(a, "shape", ()) for a in input_grads],
                               [str(getattr(a, "dtype", "")) for a in input_grads], function.module, "backward",
                               ctx=self.by_instance.get(id(function)), instance=function, category="temporary",
                               kept=self.constructed.get(id(function), ())))
        for vid, array in zip(outs, input_grads):
            if array is not None:
                self._name_grad(array, vid)

    @_recording
    def gradient_sum(self, previous: Any, new: Any, total: Any, module: str) -> None:
        vid = self._emit("Accumulate", "accumulate", np.add, [self.grad_ids[id(previous)], self.grad_ids[id(new)]],
                         [total], "backward", module)
        self.nodes[-1].ufunc = ACCUMULATE_UFUNC
        self._name_grad(total, vid)

    @_recording
    def leaf_grad(self, leaf: Any, array: Any, owned: bool) -> None:
        fresh = leaf.grad is None
        run = _set_grad(leaf, self.grad_leaves, owned) if fresh else _add_grad(leaf, self.grad_leaves, owned)
        self._emit("SetGrad" if fresh else "AccumulateGrad", "set_grad", run, [self.grad_ids[id(array)],
                   self.value_of(leaf)], [], "backward", "")
        if fresh:
            self.grad_leaves.append(leaf)

    def _name_grad(self, array: Any, vid: str) -> None:
        """``array`` (a gradient the walk hands on) is the value ``vid`` of the graph (kept: ids must stay unique)."""
        self.grad_ids[id(array)] = vid
        self.keep.append(array)

    def _emit(self, op: str, kind: str, run: Any, inputs: list[str], results: list[Any], phase: str,
              module: str) -> str:
        nid = self.new_id()
        self.nodes.append(Node(nid, op, kind, run, inputs, [nid] if results else [],
                               [r.shape for r in results], [str(r.dtype) for r in results], module, phase,
                               category="temporary"))
        return nid

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
        self.attrs.clear()
        self.construction.clear()
        self.grad_ids.clear()
        self.grad_leaves = []

    def graph(self, inputs: list[str], outputs: list[str], meta: dict) -> Graph:
        """The recorded graph; its op instances get back the attributes they had after their call (the traced step's
        backward freed them, as eager does; each replay's forward sets its saved state again)."""
        for op, attributes in self.construction.values():
            if op.freed:
                vars(op).clear()
                vars(op).update(attributes)
        return Graph(self.function, "", self.nodes, inputs, dict(self.captured), outputs, meta, dict(self.constants))


def _module_run(module: Any, tensor_args: list[str | None], args: tuple, has_out: bool, out: Any) -> Any:
    kind = type(module).__name__
    static_out = None if has_out or isinstance(out, Tensor) else out
    args = tuple(None if isinstance(a, Tensor) else a for a in args)  # the trace's tensors are not kept

    def run(*arrays: Any) -> None:
        _hooks.record_module_end(module._path, kind)
        if module._forward_hooks:
            values = iter(arrays)
            call_args = tuple(Tensor._wrap_array(next(values), "activation", "graph") if vid is not None else a
                              for vid, a in zip(tensor_args, args))
            output = Tensor._wrap_array(next(values), "activation", "graph") if has_out else static_out
            module._apply_forward_hooks(call_args, output)
    return run


def _module_begin_run(path: str, kind: str) -> Any:
    def run() -> None:
        _hooks.record_module_begin(path, kind)
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


def _set_grad(t: Tensor, siblings: list[Tensor], owned: bool) -> Any:
    """``t.grad = array`` as eager ``autograd._accumulate`` does: adopted as is when the walk owned it (``owned``,
    recorded), else copied; also copied when a graph pass made it a view, a constant (read-only) or the array another
    leaf of ``siblings`` adopted in this step."""

    def run(array: Any, _param: Any = None) -> None:
        if array.dtype != t._data.dtype:
            array = array.astype(t._data.dtype)
        elif not owned or array.base is not None or not array.flags.writeable or \
                any(q is not t and q.grad is not None and q.grad._data is array for q in siblings):
            array = array.copy()
        t.grad = Tensor._wrap_array(array, "gradient", "grad")
    return run


def _add_grad(t: Tensor, siblings: list[Tensor], owned: bool) -> Any:
    def run(array: Any, _param: Any = None) -> None:
        if t.grad is None:
            _set_grad(t, siblings, owned)(array)
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
    """Context: ``tracer`` in the recorder list; reading a graph value raises ``TracingError``."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def __enter__(self) -> Tracer:
        global _active
        if _active is not None:
            raise TracingError(f"engine.function: '{self.tracer.function}' called while tracing "
                               f"'{_active.function}'; nested traced functions are not supported")
        _active = self.tracer
        self.previous_guard = set_read_guard(self.tracer.check_read)
        _hooks.add_recorder(self.tracer)
        self.start = time.perf_counter()
        return self.tracer

    def __exit__(self, *exc: Any) -> None:
        global _active
        _active = None
        set_read_guard(self.previous_guard)
        _hooks.remove_recorder(self.tracer)
        self.trace_ms = (time.perf_counter() - self.start) * 1e3
