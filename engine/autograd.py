"""Reverse-mode differentiation over the graph of Function nodes: ``backward`` and ``grad``."""
from __future__ import annotations

import sys
import time
from typing import Any, Sequence

import numpy as np

from engine import grad_hooks as _grad_hooks
from engine import hooks as _hooks
from engine import memory as _memory
from engine.backend import get_array_module
from engine.op import Function
from engine.tensor import Tensor

_FREED_MESSAGE = ("trying to backward through the graph a second time (or after its buffers were freed) "
                  "at op '{op}'; pass retain_graph=True to the first backward() or grad() call if you need "
                  "to backward through the same graph again")


def _topological_order(roots: Sequence[Function]) -> list[Function]:
    """Function nodes reachable from ``roots``, each after every node it feeds (consumers first)."""
    order: list[Function] = []
    visited: set[int] = set()
    stack: list[tuple[Function, bool]] = [(fn, False) for fn in roots]
    while stack:
        fn, expanded = stack.pop()
        if expanded:
            order.append(fn)
            continue
        if id(fn) in visited:
            continue
        visited.add(id(fn))
        if fn.freed:
            raise RuntimeError(_FREED_MESSAGE.format(op=fn.name))
        stack.append((fn, True))
        for parent in fn.parents:
            ctx = parent._ctx
            if ctx is not None and id(ctx) not in visited:
                stack.append((ctx, False))
    order.reverse()
    return order


def _seed(output: Tensor, grad: Any) -> np.ndarray:
    if grad is None:
        if output._data.size != 1:
            raise RuntimeError(f"grad can be created implicitly only for scalar outputs; this output has shape "
                               f"{output.shape}: pass grad= (an array of that shape)")
        return get_array_module(output._data).ones_like(output._data)
    array = grad._data if isinstance(grad, Tensor) else get_array_module(output._data).asarray(grad, dtype=output.dtype)
    if array.shape != output.shape:
        raise ValueError(f"grad of shape {array.shape} does not match the output's shape {output.shape}")
    return array.astype(output.dtype, copy=True)


_OWNED_REFS = 3


class _Pending:
    """Gradient arrays flowing backwards, registered with the allocator as temporaries."""

    __slots__ = ("arrays", "keys")

    def __init__(self) -> None:
        self.arrays: dict[Any, np.ndarray] = {}
        self.keys: dict[Any, int] = {}

    def add(self, node: Any, array: np.ndarray, op: str) -> None:
        previous = self.arrays.get(node)
        if previous is not None:
            array = previous + array
            self.release(node)
        self.keys[node] = _memory.register(array, "temporary", op)
        self.arrays[node] = array

    def pop(self, node: Any) -> np.ndarray | None:
        array = self.arrays.pop(node, None)
        if array is not None:
            self.release(node)
        return array

    def release(self, node: Any) -> None:
        key = self.keys.pop(node, None)
        if key is not None:
            _memory.release(key)

    def release_all(self) -> None:
        for key in self.keys.values():
            _memory.release(key)
        self.keys.clear()
        self.arrays.clear()


def _run(outputs: Sequence[Tensor], seeds: Sequence[np.ndarray], retain_graph: bool,
         wanted: dict[int, Tensor] | None) -> dict[int, tuple[Tensor, np.ndarray]]:
    """Propagate ``seeds`` from ``outputs``; returns (tensor, gradient) of leaves (or of ``wanted`` tensors)."""
    pending = _Pending()
    results: dict[int, tuple[Tensor, np.ndarray]] = {}
    wanted_nodes = {id(t._ctx): t for t in wanted.values() if t._ctx is not None} if wanted else {}
    roots = []
    for out, seed in zip(outputs, seeds):
        if out._ctx is None:
            if wanted is None or id(out) in wanted:
                _collect(results, out, seed)
            continue
        roots.append(out._ctx)
        pending.add(out._ctx, seed, "seed")
    previous_phase = _hooks.set_phase("backward")
    observed = _hooks.ops_observed
    fn = grad = None
    free = _free
    try:
        order = _topological_order(roots)
        if _grad_hooks.registered and wanted is None:  # some leaf may have post-accumulate-grad hooks
            remaining = _grad_hooks.consumers(order)
            if remaining:
                free = _grad_hooks.finishing_free(_free, remaining, results, _accumulate)
        for fn in order:
            grad = pending.arrays.get(fn)
            if grad is None:
                free(fn, retain_graph)
                continue
            if id(fn) in wanted_nodes:
                _collect(results, wanted_nodes[id(fn)], grad)
            if observed or (_hooks.site_scope is not None and _defined_outside_engine(type(fn))):
                in_grads = _call_backward(fn, grad)
            else:
                in_grads = fn.backward(grad)
            for parent, parent_grad, needed in zip(fn.parents, in_grads, fn.needs_input_grad):
                if parent_grad is None or not needed:
                    continue
                if parent_grad.shape != parent._data.shape:
                    raise RuntimeError(f"{fn.name}.backward returned a gradient of shape {parent_grad.shape} "
                                       f"for an input of shape {parent._data.shape}")
                if parent._ctx is not None:
                    pending.add(parent._ctx, parent_grad, fn.name + "Backward")
                elif wanted is None or id(parent) in wanted:
                    _collect(results, parent, parent_grad)
            in_grads = parent_grad = None  # (a gradient finished by free() below is then owned: no copy)
            pending.pop(fn)
            free(fn, retain_graph)
    except MemoryError as error:  # NumPy could not allocate inside a backward: the engine's error, naming the op
        raise _memory.refused_by_system(error, f"{fn.name}Backward" if fn is not None else "backward", grad)
    finally:
        pending.release_all()
        _hooks.set_phase(previous_phase)
    return results


def _defined_outside_engine(cls: type) -> bool:
    """A user-defined op: its backward is user code, whose allocations have sites of their own."""
    outside = _outside_engine.get(cls)
    if outside is None:
        outside = _outside_engine[cls] = not (cls.__module__ == "engine" or cls.__module__.startswith("engine."))
    return outside


_outside_engine: dict[type, bool] = {}


def _collect(results: dict[int, tuple[Tensor, np.ndarray]], tensor: Tensor, array: np.ndarray) -> None:
    previous = results.get(id(tensor))
    results[id(tensor)] = (tensor, array if previous is None else previous[1] + array)


def _call_backward(fn: Function, grad: np.ndarray) -> tuple[Any, ...]:
    """``fn.backward(grad)`` with recorders (``op_begin`` / ``op`` as ``<Op>Backward``, input the gradient, outputs
    the input gradients): the one observed path of a backward op. A user-defined op's backward runs outside the site
    scope (its allocations have sites of their own)."""
    cls = type(fn)
    name = _backward_names.get(cls) or _backward_names.setdefault(cls, cls.__name__ + "Backward")
    module, inputs = fn.module, (grad,)
    if _hooks.op_begin:
        _hooks.emit(_hooks.op_begin, name, module, inputs)
    scope = _hooks.site_scope
    outside = scope is not None and _defined_outside_engine(cls)
    if outside:
        _hooks.site_scope = None
    try:
        start_ns = _now()
        in_grads = fn.backward(grad)
    finally:
        if outside:
            _hooks.site_scope = scope
    records = _hooks.op
    if records:
        nbytes = 0
        for g in in_grads:
            if g is not None:
                nbytes += g.nbytes
        for record in records:
            try:
                record(name, module, inputs, in_grads, nbytes, start_ns)
            except _PropagatingError:
                raise
            except Exception as error:  # noqa: BLE001 - observing must never break training
                _hooks.report_failure(record, error)
    return in_grads


_backward_names: dict[type, str] = {}  # op class -> its backward op's name ("Linear" -> "LinearBackward")
_now = time.perf_counter_ns
_PropagatingError = _hooks.PropagatingError


def _free(fn: Function, retain_graph: bool) -> None:
    if not retain_graph:
        fn.__dict__.clear()
        fn.freed = True


def backward(output: Tensor, grad: Any = None, retain_graph: bool = False) -> None:
    """``output.backward(grad)``: accumulate gradients into the ``.grad`` of every leaf that requires them."""
    if _trace.active is not None:  # engine.function is recording this step
        return _trace.active.backward(output, grad)
    if not output.requires_grad:
        raise RuntimeError(f"backward() on a tensor that does not require grad (shape {output.shape}, dtype "
                           f"{output.dtype}): no input of the computation had requires_grad=True, or it ran "
                           "under no_grad()")
    if output._ctx is not None and output._ctx.freed:
        raise RuntimeError(_FREED_MESSAGE.format(op=output._ctx.name))
    seed = _seed(output, grad)
    previous_scope = _hooks.enter_site_scope()  # every allocation below is this call's: one stack walk
    try:
        _backward(output, seed, retain_graph)
    finally:
        _hooks.exit_site_scope(previous_scope)


def _backward(output: Tensor, seed: np.ndarray, retain_graph: bool) -> None:
    results = _run([output], [seed], retain_graph, None)
    hooked = [leaf for leaf, _ in results.values() if id(leaf) in _grad_hooks.registered] \
        if _grad_hooks.registered else ()  # leaves whose last consumer was not counted (an output that is a leaf)
    # New .grad buffers are allocated before any existing .grad is added to, so that an OutOfMemoryError
    # leaves every .grad as it was (the ones created by this call are dropped again).
    created: list[Tensor] = []
    try:
        for key in [key for key, (leaf, _) in results.items() if leaf.grad is None]:
            leaf, array = results.pop(key)
            _accumulate(leaf, array)
            del array
            created.append(leaf)
    except _memory.OutOfMemoryError:
        for leaf in created:
            leaf.grad = None
        raise
    while results:
        leaf, array = results.popitem()[1]
        _accumulate(leaf, array)
        del array
    for leaf in hooked:
        _grad_hooks.run_hooks(leaf)


def _accumulate(leaf: Tensor, array: np.ndarray) -> None:
    if array.dtype != leaf._data.dtype:
        array = array.astype(leaf._data.dtype)
    if leaf.grad is None:
        # NOTE: a gradient array nobody else holds (the caller's loop variable, our argument and
        # getrefcount's own) becomes .grad as is; a shared one (Add hands one array to both inputs) is copied.
        if isinstance(array, np.generic):  # a NumPy scalar from a full reduction: a fresh 0-d array of our own
            array = np.asarray(array)
        owned = array.base is None and sys.getrefcount(array) <= _OWNED_REFS  # (CuPy arrays have .base too)
        if not owned:
            array = np.array(array, copy=True) if type(array) is np.ndarray else array.copy()
        leaf.grad = Tensor._wrap_array(array, "gradient", "grad")
    else:
        leaf.grad._data += array


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor], grad_outputs: Any = None,
         retain_graph: bool = False) -> list[Tensor]:
    """Gradients of ``outputs`` with respect to ``inputs`` (like ``torch.autograd.grad``); ``.grad`` untouched.

    An input that the outputs do not depend on gets a zero gradient.
    """
    if _trace.active is not None:
        raise _trace.TracingError(f"engine.grad() is not supported inside engine.function (at {_trace.user_frame()}); "
                                  "use loss.backward()")
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, (Tensor, np.ndarray)):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"grad_outputs has {len(grad_outputs)} entries for {len(outputs)} outputs")
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise RuntimeError(f"input {i} of grad() does not require grad")
    for out in outputs:
        if not out.requires_grad:
            raise RuntimeError(f"an output of grad() (shape {out.shape}) does not require grad")
        if out._ctx is not None and out._ctx.freed:
            raise RuntimeError(_FREED_MESSAGE.format(op=out._ctx.name))
    seeds = [_seed(out, g) for out, g in zip(outputs, grad_outputs)]
    results = _run(outputs, seeds, retain_graph, {id(t): t for t in inputs})
    grads = []
    for t in inputs:
        found = results.get(id(t))
        xp = get_array_module(t._data)
        array = xp.zeros_like(t._data) if found is None else xp.array(found[1], dtype=t.dtype, copy=True)
        grads.append(Tensor._wrap_array(array, "gradient", "grad"))
    return grads


from engine.graph import trace as _trace  # noqa: E402  (the tracer builds on autograd)
