"""Post-accumulate-grad hooks (``Tensor.register_post_accumulate_grad_hook``): a leaf's ``.grad`` is accumulated
and its hooks are called as soon as its gradient is final during ``backward()``, not at the end.

A backward with no hooked leaf pays one dict truth test (``registered``) in ``autograd._run``. With hooked leaves,
``consumers`` counts, in the topological order, the graph nodes that feed each hooked leaf; ``finishing_free``
wraps ``autograd._free`` (called once per node, whether it produced gradients or not) to count them down and
finish a leaf when its count reaches zero.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

registered: dict[int, Any] = {}  # id(leaf) -> a weak reference to that leaf, which has hooks (autograd's test)
HOOKS = "_post_accumulate_grad_hooks"  # the leaf's own list of hooks (so that they die with it, as in PyTorch)


class PostAccumulateGradHookHandle:
    """What ``register_post_accumulate_grad_hook`` returns: ``remove()`` takes the hook out (again: no-op)."""

    def __init__(self, tensor: Any, hook: Callable[[Any], Any]) -> None:
        self._tensor, self._hook = weakref.ref(tensor), hook

    def remove(self) -> None:
        tensor = self._tensor()
        hooks = getattr(tensor, HOOKS, None) if tensor is not None else None
        if not hooks:
            return
        hooks[:] = [h for h in hooks if h is not self._hook]
        if not hooks:
            registered.pop(id(tensor), None)


def register(tensor: Any, hook: Callable[[Any], Any]) -> PostAccumulateGradHookHandle:
    """Register ``hook(tensor)`` to run after ``tensor.grad`` is accumulated in a ``backward()`` (PyTorch's
    semantics: leaf tensors that require grad only; the return value is ignored; not called by ``engine.grad``).
    The hooks are kept by the tensor: a hook that refers to its tensor does not keep it alive."""
    if not callable(hook):
        raise TypeError(f"a post accumulate grad hook must be callable, got {type(hook).__name__}")
    if not tensor.requires_grad:
        raise RuntimeError(f"cannot register a hook on a tensor that doesn't require gradient (shape {tensor.shape})")
    if not tensor.is_leaf:
        raise RuntimeError(f"post accumulate grad hooks cannot be registered on non-leaf tensors (shape "
                           f"{tensor.shape}, made by {tensor._ctx.name})")
    hooks = getattr(tensor, HOOKS, None)
    if hooks is None:
        hooks = []
        setattr(tensor, HOOKS, hooks)
    hooks.append(hook)
    key = id(tensor)
    if key not in registered:
        registered[key] = weakref.ref(tensor, lambda ref, key=key: _forget(key, ref))
    return PostAccumulateGradHookHandle(tensor, hook)


def _forget(key: int, ref: Any) -> None:
    if registered.get(key) is ref:  # (not a later tensor that got the same id)
        del registered[key]


def run_hooks(leaf: Any) -> None:
    for hook in tuple(getattr(leaf, HOOKS, None) or ()):
        hook(leaf)


def consumers(order: list[Any]) -> dict[int, int]:
    """id(hooked leaf) -> how many times a node of ``order`` takes it as an input that needs a gradient."""
    counts: dict[int, int] = {}
    for fn in order:
        for parent, needed in zip(fn.parents, fn.needs_input_grad):
            if needed and parent._ctx is None and id(parent) in registered:
                counts[id(parent)] = counts.get(id(parent), 0) + 1
    return counts


def finishing_free(free: Callable[[Any, bool], None], remaining: dict[int, int], results: dict[int, tuple],
                   accumulate: Callable[[Any, Any, bool], None]) -> Callable[[Any, bool], None]:
    """``free(fn, retain_graph)`` that first counts ``fn`` off its hooked leaves; a leaf whose last consumer this
    was gets its gradient (its ``(leaf, array, owned)`` taken out of ``results``) accumulated into ``.grad`` and
    its hooks run."""

    def finish(fn: Any, retain_graph: bool) -> None:
        ready = []
        for parent, needed in zip(fn.parents, fn.needs_input_grad):
            key = id(parent)
            left = remaining.get(key) if needed else None
            if left is None:
                continue
            if left > 1:
                remaining[key] = left - 1
                continue
            del remaining[key]
            if key in results:
                ready.append(results.pop(key))
        free(fn, retain_graph)
        while ready:
            leaf, array, owned = ready.pop()
            accumulate(leaf, array, owned)
            run_hooks(leaf)

    return finish
