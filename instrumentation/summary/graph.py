"""add_graph: one forward pass of an engine model recorded op by op (a recorder) into TensorBoard's GraphDef."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import engine
from engine import hooks
from instrumentation.format import protos
from instrumentation.format.graph_def import AttrValue, GraphDef


def _shape(shape: Sequence[int]) -> Any:
    return protos.TensorShapeProto(dim=[protos.TensorShapeProto.Dim(size=int(size)) for size in shape])


class _OpTracer(hooks.Recorder):
    """Records each forward op with the ids of its input and output arrays (keeping the arrays alive, so ids are
    not reused while tracing)."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, str, list[int], Any]] = []
        self.kept: list[Any] = []
        self.opened_step = False  # the traced forward pass opened a training step (the engine does on a first op)

    def step_begin(self, event: hooks.StepEvent) -> None:
        self.opened_step = True

    def op(self, op: str, module: str, inputs: Any, outputs: Any, output_bytes: int, start_ns: int) -> None:
        self.kept += [*inputs, *outputs]
        self.ops.append((op, module, [id(array) for array in inputs], outputs[0]))


def _scope(root: str, module: str) -> str:
    return f"{root}/{module.replace('.', '/')}" if module else root


def trace_graph(model: Any, inputs: Sequence[Any]) -> Any:
    """The GraphDef of `model(*inputs)`: an input node per input, a node per parameter (under its module's scope),
    a node per op named `<Model>/<module path>/<Op>_<n>` with `_output_shapes`, its inputs linked by array
    identity, and an output node."""
    tracer = _OpTracer()
    hooks.add_recorder(tracer)
    try:
        with engine.no_grad():
            model(*inputs)
    finally:
        hooks.remove_recorder(tracer)
        if tracer.opened_step:  # NOTE: tracing is not a training step: the next step opens with the real one
            hooks.cancel_step_begin()
    graph = GraphDef()
    graph.versions.producer = 22
    names: dict[int, str] = {}

    def node(name: str, op: str, array: Any, sources: Sequence[str] = ()) -> None:
        entry = graph.node.add(name=name, op=op, input=list(sources))
        shape = np.shape(array)
        entry.attr["_output_shapes"].CopyFrom(AttrValue(list=AttrValue.ListValue(shape=[_shape(shape)])))
        entry.attr["dtype"].CopyFrom(AttrValue(s=str(getattr(array, "dtype", "")).encode()))
        names[id(array)] = name

    for index, value in enumerate(inputs):
        node(f"input/input_{index}", "IO Node", value.data)
    root = type(model).__name__
    for name, parameter in model.named_parameters():
        node(f"{root}/{name.replace('.', '/')}", "Parameter", parameter.data)
    counts: dict[str, int] = {}
    for op, module, input_ids, output in tracer.ops:
        scope = _scope(root, module)
        number = counts[f"{scope}/{op}"] = counts.get(f"{scope}/{op}", -1) + 1
        name = f"{scope}/{op}_{number}"
        sources = [names[array_id] for array_id in input_ids if array_id in names]
        node(name, op, output, sources)
    if tracer.ops:
        graph.node.add(name="output/output_0", op="IO Node", input=[names[id(tracer.ops[-1][3])]])
    return graph


def graph_event(graph_def_bytes: bytes, wall_time: float) -> bytes:
    """An Event holding `graph_def` (what torch's add_graph writes, and TensorBoard's graph plugin reads)."""
    return protos.Event(wall_time=wall_time, step=0, graph_def=graph_def_bytes).SerializeToString()
