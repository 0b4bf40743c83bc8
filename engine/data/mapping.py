"""Map: applies a function to each element, in order, sequentially or on a thread pool."""
from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from engine.data.buffers import Holding, Stage
from engine.data.dataset import AUTOTUNE, Dataset, check_count, close_iterator
from engine.data.structure import Element, to_structure


class Map(Dataset):
    """``fn(*element)`` for tuple elements, ``fn(element)`` otherwise; results become numpy structures.

    With ``num_parallel_calls`` > 1 (or ``AUTOTUNE``) up to that many calls run at once on a thread pool
    (numpy releases the GIL in most kernels) and results still come out in input order; the results computed
    ahead are the stage's buffers in the allocator (``engine.data.buffers``) until they are handed on.
    """

    def __init__(self, input: Dataset, fn: Callable[..., Any], num_parallel_calls: int | None) -> None:
        if not callable(fn):
            raise TypeError(f"map: fn must be callable, got {type(fn).__name__}")
        self._input = input
        self._fn = fn
        if num_parallel_calls is None:
            self._workers = 1
        elif num_parallel_calls == AUTOTUNE:
            self._workers = min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's own default
        else:
            self._workers = check_count("map", "num_parallel_calls", num_parallel_calls, 1)
        self._stage = Stage(self._describe(), input) if self._workers > 1 else None

    def _cardinality(self) -> int:
        return self._input._cardinality()

    def _describe(self) -> str:
        name = getattr(self._fn, "__qualname__", type(self._fn).__name__)
        return f"map({name}{f', num_parallel_calls={self._workers}' if self._workers > 1 else ''})"

    def _call(self, element: Element) -> Element:
        result = self._fn(*element) if isinstance(element, tuple) else self._fn(element)
        return to_structure(result)

    def _elements(self) -> Iterator[Element]:
        upstream = self._input._iterate()
        try:
            if self._workers == 1:
                for element in upstream:
                    yield self._call(element)
            else:
                yield from self._parallel(upstream)
        finally:
            close_iterator(upstream)

    def _call_held(self, holding: Holding, element: Element) -> tuple[Element, Any]:
        result = self._call(element)
        return result, holding.hold(result)

    def _parallel(self, upstream: Iterator[Element]) -> Iterator[Element]:
        pending: deque[Future] = deque()
        pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="engine.data.map")
        holding = self._stage.open()
        try:
            for element in upstream:
                pending.append(pool.submit(self._call_held, holding, element))
                if len(pending) >= self._workers:
                    yield _handed_on(holding, pending.popleft())
            while pending:
                yield _handed_on(holding, pending.popleft())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            holding.close()


def _handed_on(holding: Holding, future: Future) -> Element:
    result, held = future.result()
    holding.leave(held)
    return result
