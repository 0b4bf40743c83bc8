"""Optimisation passes: each a function graph -> graph (in place on the graph it is given, which it returns)
that appends what it did to ``graph.passes``. ``optimise`` runs the named ones in ``DEFAULT_PASSES`` order."""
from __future__ import annotations

from typing import Callable, Iterable

from engine.graph.ir import Graph
from engine.graph.passes.constant_folding import constant_folding
from engine.graph.passes.cse import common_subexpressions
from engine.graph.passes.dead_code import dead_code
from engine.graph.passes.fusion import elementwise_fusion
from engine.graph.passes.inplace import inplace_updates
from engine.graph.passes.memory_plan import memory_planning

PASSES: dict[str, Callable[[Graph], Graph]] = {
    "constant_folding": constant_folding,
    "common_subexpressions": common_subexpressions,
    "dead_code": dead_code,
    "elementwise_fusion": elementwise_fusion,
    "inplace_updates": inplace_updates,
    "memory_planning": memory_planning,
}
DEFAULT_PASSES = tuple(PASSES)


def optimise(graph: Graph, names: Iterable[str] = DEFAULT_PASSES) -> Graph:
    chosen = set(names)
    for name, apply in PASSES.items():
        if name in chosen:
            graph = apply(graph)
    return graph
