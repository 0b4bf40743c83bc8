"""Replay kernels: the lookup ``engine.graph.replay`` calls for each node of a traced graph.

``for_node(node)`` returns what the node's owner offers for it — the op's ``replay_kernel(node)`` for forward and
backward nodes (``engine.op.Function.replay_kernel``; e.g. ``engine.ops.loss.CrossEntropy``), the optimizer's for
its step node (e.g. ``engine.optim.sgd.SGD``) — or None to replay the node's own callable. A kernel computes what the
op computes with the same NumPy calls in the same order (so the same bits), deciding once, when the replay is
compiled, the branches the trace fixed; what it cannot decide then it checks on every call, handing the call to the
op or optimizer itself when the check fails. Each specialisation lives with the op or optimizer it specialises.
"""
from __future__ import annotations

from typing import Any, Callable


def for_node(node: Any) -> Callable[..., Any] | None:
    owner = node.instance if node.kind in ("forward", "backward") else getattr(node.run, "optimizer", None)
    make = getattr(owner, "replay_kernel", None)
    return make(node) if make is not None else None
