"""User spans: ``with instrumentation.span("name"):`` or ``@instrumentation.span("name")``, recorded while profiling."""
from __future__ import annotations

import functools
import time
from typing import Any, Callable

from instrumentation.format.trace import CAT_LOG, CAT_USER

# Recorders currently recording (profile() adds and removes its own); spans go to each of them.
_sinks: list[Any] = []
# The same list, for hot paths that test it themselves instead of calling log_start (truthy while any records; it is
# changed in place, never replaced).
recording = _sinks


def add_sink(recorder: Any) -> None:
    if not any(s is recorder for s in _sinks):
        _sinks.append(recorder)


def remove_sink(recorder: Any) -> None:
    _sinks[:] = [s for s in _sinks if s is not recorder]


def log_start() -> int:
    """The start of instrumentation work to record as a ``log`` span: ``perf_counter_ns()`` while a profiler
    records, 0 otherwise (one list check). Pair it with ``log_end``."""
    return time.perf_counter_ns() if _sinks else 0


def log_end(name: str, start_ns: int) -> None:
    """Record the ``log`` span ``name`` begun at ``start_ns`` (``log_start``); nothing when that was 0."""
    if start_ns and _sinks:
        end_ns = time.perf_counter_ns()
        for recorder in _sinks:
            recorder.add_span(CAT_LOG, name, start_ns, end_ns)


class span:
    """Time a block or a function as a named span in the trace (category ``user``; ``log`` marks time spent
    in instrumentation). Costs one list check when nothing is profiling."""

    __slots__ = ("name", "category", "_start_ns")

    def __init__(self, name: str, category: str = CAT_USER) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"span: name must be a non-empty string, got {name!r}")
        if category not in (CAT_USER, CAT_LOG):
            raise ValueError(f"span: category must be {CAT_USER!r} or {CAT_LOG!r}, got {category!r}")
        self.name, self.category, self._start_ns = name, category, 0

    def __enter__(self) -> span:
        if _sinks:
            self._start_ns = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        if _sinks and self._start_ns:
            end_ns = time.perf_counter_ns()
            for recorder in _sinks:
                recorder.add_span(self.category, self.name, self._start_ns, end_ns)
        self._start_ns = 0

    def __call__(self, fn: Callable) -> Callable:
        name, category = self.name, self.category

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with span(name, category):
                return fn(*args, **kwargs)
        return wrapper
