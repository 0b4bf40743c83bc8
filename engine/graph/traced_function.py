"""``engine.function``: trace a step once per input signature, optimise the graph, replay it afterwards.

The signature is each Tensor argument's shape, dtype and device plus the value of every other argument (static
Python arguments). The first call with a new signature runs ``fn`` eagerly while the tracer records it (so its
Python side effects — prints, appends, counters — happen then only); later calls replay the optimised graph and
return fresh results. Reading a traced tensor's value inside ``fn`` raises ``TracingError`` naming the line.
"""
from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Iterable

import numpy as np

from engine.graph import replay as _replay
from engine.graph import trace as _trace
from engine.graph.ir import Graph
from engine.graph.passes import DEFAULT_PASSES, optimise
from engine.tensor import Tensor

RETRACE_WARNING_AFTER = 5  # traces of one function before retracing warns (as TensorFlow)


class _Entry:
    __slots__ = ("graph", "unoptimised", "structure", "index")

    def __init__(self, graph: Graph, unoptimised: Graph, structure: Any, index: int) -> None:
        self.graph, self.unoptimised, self.structure, self.index = graph, unoptimised, structure, index


class TracedFunction:
    """The callable ``engine.function`` returns; ``trace_count`` is how many signatures it has traced."""

    def __init__(self, fn: Callable, passes: Iterable[str] | None = None, logdir: Any = None) -> None:
        self.fn = fn
        self.passes = tuple(DEFAULT_PASSES if passes is None else passes)
        unknown = [p for p in self.passes if p not in DEFAULT_PASSES]
        if unknown:
            raise ValueError(f"engine.function: unknown pass(es) {unknown}; known: {list(DEFAULT_PASSES)}")
        self.logdir = logdir
        self._signature = inspect.signature(fn)
        self._cache: dict[Any, _Entry] = {}
        self._seen: list[dict[str, Any]] = []
        positional = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                         for p in self._signature.parameters.values())
        self._fast = tuple(self._signature.parameters) if positional else None
        self._fast_keys: dict[Any, _Entry] = {}  # the signature of a positional call, found quickly -> its entry
        self.trace_ms: list[float] = []
        functools.update_wrapper(self, fn)

    @property
    def trace_count(self) -> int:
        return len(self._cache)

    def graphs(self) -> list[tuple[Graph, Graph]]:
        """(unoptimised, optimised) graph per traced signature, in tracing order."""
        return [(e.unoptimised, e.graph) for e in self._cache.values()]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs and self._fast is not None and len(args) == len(self._fast):
            try:
                key = tuple([_fast_part(a) for a in args])  # positional call: the signature without inspect
            except TypeError:  # an unhashable static argument: the full path below
                key = None
            entry = self._fast_keys.get(key) if key is not None else None
            if entry is not None:
                outs = _replay.run_tensors(entry.graph, [a._data for a in args if isinstance(a, Tensor)])
                return _rebuild(entry.structure, outs)
        bound = self._signature.bind(*args, **kwargs)
        key_parts, tensors, names, described = [], [], [], []
        for name, value in bound.arguments.items():
            if isinstance(value, Tensor):
                part = (name, "T", value.shape, str(value.dtype), str(value.device))
                tensors.append(value)
                names.append(name)
                described.append(f"{name}: {value.dtype}{list(value.shape)} {value.device}")
            elif isinstance(value, np.ndarray) or (hasattr(value, "__cuda_array_interface__")
                                                   and hasattr(value, "shape")):
                raise TypeError(f"engine.function '{getattr(self.fn, '__qualname__', '?')}': argument '{name}' is an "
                                f"array ({type(value).__name__} of shape {value.shape}); pass engine.tensor(...) so "
                                "that it is a graph input (an array would be a constant of the graph)")
            else:
                try:
                    hash(value)
                    part = (name, "S", type(value).__name__, value)
                except TypeError:
                    part = (name, "S", type(value).__name__, repr(value))
                described.append(f"{name}={value!r}")
            key_parts.append(part)
        key = tuple(key_parts)
        entry = self._cache.get(key)
        if entry is None:
            result = self._trace(key, bound, tensors, names, "; ".join(described))
            if not kwargs and len(args) == len(bound.arguments) and self._fast is not None:
                try:
                    self._fast_keys[tuple([_fast_part(a) for a in args])] = self._cache[key]
                except TypeError:
                    pass
            return result
        outs = _replay.run_tensors(entry.graph, [t._data for t in tensors])
        return _rebuild(entry.structure, outs)

    def _trace(self, key: Any, bound: Any, tensors: list[Tensor], names: list[str], described: str) -> Any:
        qualname = getattr(self.fn, "__qualname__", "function")
        tracer = _trace.Tracer(qualname)
        for name, t in zip(names, tensors):
            tracer.add_input(name, t)
        context = _trace.tracing(tracer)
        try:
            with context:
                result = self.fn(*bound.args, **bound.kwargs)
                structure, outputs = _flatten(result, tracer)
        except BaseException:
            tracer.close()
            raise
        graph = tracer.graph(names, outputs, {n: (t.shape, str(t.dtype)) for n, t in zip(names, tensors)})
        for node in graph.nodes:  # the trace's tensors are not needed by replay: let them go
            if node.instance is not None:
                node.instance.parents = ()
        tracer.close()
        graph.signature, graph.trace_ms = described, context.trace_ms
        optimised = optimise(graph.copy(), self.passes)
        entry = self._cache[key] = _Entry(optimised, graph, structure, len(self._cache))
        self.trace_ms.append(context.trace_ms)
        self._seen.append(dict((part[0], part) for part in key))
        self._warn_retracing()
        if self.logdir is not None:
            from engine.graph.export import write_graphs
            write_graphs(self.logdir, qualname, entry.index, graph, optimised)
        return result

    def _warn_retracing(self) -> None:
        if len(self._seen) < RETRACE_WARNING_AFTER:
            return
        changing = {}
        for name in self._seen[0]:
            values = {s.get(name) for s in self._seen}
            if len(values) > 1:
                changing[name] = len(values)
        worst = max(changing, key=changing.get) if changing else "?"
        warnings.warn(f"engine.function '{getattr(self.fn, '__qualname__', '?')}' has been traced {len(self._seen)} "
                      f"times: argument '{worst}' keeps changing ({changing.get(worst, 0)} different values/shapes). "
                      "Each new value of a Python argument or tensor shape retraces: pass numbers as tensors, or "
                      "keep shapes fixed.", RuntimeWarning, stacklevel=3)


def _fast_part(value: Any) -> Any:
    if isinstance(value, Tensor):
        data = value._data
        if type(data) is np.ndarray:
            return (data.shape, data.dtype)
        return (data.shape, data.dtype, type(data), getattr(getattr(data, "device", None), "id", None))
    hash(value)
    return (type(value), value)


def _flatten(result: Any, tracer: _trace.Tracer) -> tuple[Any, list[str]]:
    """(structure with ("value", i) for each tensor, the value ids) of ``fn``'s return value."""
    outputs: list[str] = []

    def walk(value: Any) -> Any:
        if isinstance(value, Tensor):
            vid = tracer.ids.get(id(value))
            if vid is None or vid in tracer.captured:
                return ("same", value)  # a tensor the graph does not produce: returned as it is
            outputs.append(vid)
            return ("value", len(outputs) - 1)
        if isinstance(value, (tuple, list)):
            return (type(value), [walk(v) for v in value])
        if isinstance(value, dict):
            return (dict, {k: walk(v) for k, v in value.items()})
        return ("python", value)

    return walk(result), outputs


def _rebuild(structure: Any, tensors: list[Tensor]) -> Any:
    kind, payload = structure
    if kind == "value":
        return tensors[payload]
    if kind in ("same", "python"):
        return payload
    if kind is dict:
        return {k: _rebuild(v, tensors) for k, v in payload.items()}
    return kind(_rebuild(v, tensors) for v in payload)


def function(fn: Callable | None = None, *, passes: Iterable[str] | None = None, logdir: Any = None) -> Any:
    """Trace ``fn`` into a graph per input signature and replay it (like ``tf.function``); usable as
    ``@engine.function``, ``@engine.function(passes=[...])`` or ``engine.function(fn, logdir=run_dir)``.
    ``passes``: the optimisation passes to run, by name (default: all, see ``engine.graph.passes``)."""
    if fn is None:
        return lambda f: TracedFunction(f, passes, logdir)
    return TracedFunction(fn, passes, logdir)
