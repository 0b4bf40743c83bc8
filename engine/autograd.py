"""Reverse-mode differentiation over the graph of Function nodes: ``backward`` and ``grad``.

One walk does it all: recorders (``engine.hooks``) observe it — ``backward_begin``, per node ``op_begin``/``op`` and
``backward_node``, each ``gradient_sum`` and each ``leaf_grad`` — and ``engine.function``'s tracer records the graph's
backward from those same calls, so a replay repeats this walk's arithmetic.

Ownership of gradients (no reference counting): a leaf's gradient array becomes its ``.grad`` as it is only when
this walk owns it — a sum the walk computed (``previous + new``), the seed it made, or a new array (not a view) that
an engine op's backward returned for that one input, that is neither the gradient the node was given nor (when
``retain_graph`` keeps the node's state) one of the op's saved attributes. Anything else (a view, an array
returned for two inputs, a user-defined op's result, ``engine.grad``'s results) is copied first, so no two leaves'
``.grad`` share memory. (Engine ops never return an input's own array as its gradient; the ownership tests check
every op family for it.)
"""
from __future__ import annotations

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


class _Pending:
    """Gradient arrays flowing backwards, registered with the allocator as temporaries."""

    __slots__ = ("arrays", "keys")

    def __init__(self) -> None:
        self.arrays: dict[Any, np.ndarray] = {}
        self.keys: dict[Any, int] = {}

    def add(self, node: Any, array: np.ndarray, op: str, module: str = "") -> None:
        previous = self.arrays.get(node)
        if previous is not None:
            array = _sum(previous, array, module)
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
         wanted: dict[int, Tensor] | None, grads: Sequence[Any]) -> dict[int, tuple[Tensor, np.ndarray, bool]]:
    """Propagate ``seeds`` from ``outputs``; returns (tensor, gradient, owned) of leaves (or of ``wanted`` tensors)."""
    if _hooks.backward_begin:
        _hooks.emit(_hooks.backward_begin, list(outputs), list(grads), list(seeds),
                    None if wanted is None else list(wanted.values()))
    pending = _Pending()
    results: dict[int, tuple[Tensor, np.ndarray, bool]] = {}
    wanted_nodes = {id(t._ctx): t for t in wanted.values() if t._ctx is not None} if wanted else {}
    roots = []
    for out, seed in zip(outputs, seeds):
        if out._ctx is None:
            if wanted is None or id(out) in wanted:
                _collect(results, out, seed, True, "")
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
                _collect(results, wanted_nodes[id(fn)], grad, False, fn.module)
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
                    pending.add(parent._ctx, parent_grad, fn.name + "Backward", fn.module)
                elif wanted is None or id(parent) in wanted:
                    _collect(results, parent, parent_grad, _owned(fn, grad, in_grads, parent_grad, retain_graph),
                             fn.module)
            in_grads = parent_grad = None
            pending.pop(fn)
            free(fn, retain_graph)
    except MemoryError as error:  # NumPy could not allocate inside a backward: the engine's error, naming the op
        raise _memory.refused_by_system(error, f"{fn.name}Backward" if fn is not None else "backward", grad)
    finally:
        pending.release_all()
        _hooks.set_phase(previous_phase)
    return results


def _owned(fn: Function, grad: Any, in_grads: Sequence[Any], array: Any, retain_graph: bool) -> bool:
    """Whether ``array``, which ``fn.backward(grad)`` returned for one input, is a new array this walk alone holds
    (the module docstring's rule): only then may a leaf adopt it as its ``.grad`` without a copy."""
    if array is grad or array.base is not None:
        return False
    outside = _outside_engine.get(type(fn))
    if outside is None:
        outside = _defined_outside_engine(type(fn))
    if outside:
        return False
    returned = 0
    for g in in_grads:
        if g is array:
            returned += 1
    if returned > 1:
        return False
    if retain_graph:  # the op keeps what it saved (else the walk frees it right after this node)
        for value in fn.__dict__.values():
            if value is array:
                return False
    return True


def _sum(previous: Any, new: Any, module: str) -> Any:
    """``previous + new``, the one place the walk adds two gradients of one value (recorders see it)."""
    total = previous + new
    if _hooks.gradient_sum:
        _hooks.emit(_hooks.gradient_sum, previous, new, total, module)
    return total


def _defined_outside_engine(cls: type) -> bool:
    """A user-defined op: its backward is user code, whose allocations have sites of their own."""
    outside = _outside_engine.get(cls)
    if outside is None:
        outside = _outside_engine[cls] = not (cls.__module__ == "engine" or cls.__module__.startswith("engine."))
    return outside


_outside_engine: dict[type, bool] = {}


def _collect(results: dict[int, tuple[Tensor, np.ndarray, bool]], tensor: Tensor, array: np.ndarray, owned: bool,
             module: str) -> None:
    previous = results.get(id(tensor))
    if previous is None:
        results[id(tensor)] = (tensor, array, owned)
    else:
        results[id(tensor)] = (tensor, _sum(previous[1], array, module), True)


def _call_backward(fn: Function, grad: np.ndarray) -> tuple[Any, ...]:
    """``fn.backward(grad)`` through the dispatch core (``op_begin`` / ``op`` as ``<Op>Backward``, input the
    gradient, outputs the input gradients; then ``backward_node``): the one observed path of a backward op. A
    user-defined op's backward runs outside the site scope (its allocations have sites of their own)."""
    cls = type(fn)
    name = _backward_names.get(cls) or _backward_names.setdefault(cls, cls.__name__ + "Backward")
    module, inputs = fn.module, (grad,)
    if _hooks.op_begin:
        _hooks.record_op_begin(name, module, inputs)
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
    _hooks.record_op(name, module, inputs, in_grads, start_ns)
    if _hooks.backward_node:
        _hooks.emit(_hooks.backward_node, fn, grad, in_grads)
    return in_grads


_backward_names: dict[type, str] = {}  # op class -> its backward op's name ("Linear" -> "LinearBackward")
_now = time.perf_counter_ns


def _free(fn: Function, retain_graph: bool) -> None:
    if not retain_graph:
        fn.__dict__.clear()
        fn.freed = True


def backward(output: Tensor, grad: Any = None, retain_graph: bool = False) -> None:
    """``output.backward(grad)``: accumulate gradients into the ``.grad`` of every leaf that requires them."""
    if not output.requires_grad:
        raise RuntimeError(f"backward() on a tensor that does not require grad (shape {output.shape}, dtype "
                           f"{output.dtype}): no input of the computation had requires_grad=True, or it ran "
                           "under no_grad()")
    if output._ctx is not None and output._ctx.freed:
        raise RuntimeError(_FREED_MESSAGE.format(op=output._ctx.name))
    seed = _seed(output, grad)
    previous_scope = _hooks.enter_site_scope()  # every allocation below is this call's: one stack walk
    try:
        _backward(output, seed, retain_graph, grad)
    finally:
        _hooks.exit_site_scope(previous_scope)


def _backward(output: Tensor, seed: np.ndarray, retain_graph: bool, grad: Any) -> None:
    results = _run([output], [seed], retain_graph, None, [grad])
    hooked = [leaf for leaf, _, _ in results.values() if id(leaf) in _grad_hooks.registered] \
        if _grad_hooks.registered else ()  # leaves whose last consumer was not counted (an output that is a leaf)
    # New .grad buffers are allocated before any existing .grad is added to, so that an OutOfMemoryError
    # leaves every .grad as it was (the ones created by this call are dropped again).
    created: list[Tensor] = []
    try:
        for key in [key for key, (leaf, _, _) in results.items() if leaf.grad is None]:
            leaf, array, owned = results.pop(key)
            _accumulate(leaf, array, owned)
            created.append(leaf)
    except _memory.OutOfMemoryError:
        for leaf in created:
            leaf.grad = None
        raise
    while results:
        leaf, array, owned = results.popitem()[1]
        _accumulate(leaf, array, owned)
    for leaf in hooked:
        _grad_hooks.run_hooks(leaf)


def _accumulate(leaf: Tensor, array: Any, owned: bool) -> None:
    """``array`` into ``leaf.grad``: adopted as the new ``.grad`` when ``owned`` (the module docstring's rule), else
    a copy; added in place to an existing one."""
    if _hooks.leaf_grad:
        _hooks.emit(_hooks.leaf_grad, leaf, array, owned)
    if array.dtype != leaf._data.dtype:
        array, owned = array.astype(leaf._data.dtype), True
    if leaf.grad is None:
        if isinstance(array, np.generic):  # a NumPy scalar from a full reduction: a fresh 0-d array of our own
            array, owned = np.asarray(array), True
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
    results = _run(outputs, seeds, retain_graph, {id(t): t for t in inputs}, grad_outputs)
    grads = []
    for t in inputs:
        found = results.get(id(t))
        xp = get_array_module(t._data)
        array = xp.zeros_like(t._data) if found is None else xp.array(found[1], dtype=t.dtype, copy=True)
        grads.append(Tensor._wrap_array(array, "gradient", "grad"))
    return grads

