"""The user-facing iterator: marks the step begin, reports how long each fetch blocked to engine.hooks and brings
the allocator's view of the pipeline's buffers up to date (``engine.data.buffers``)."""
from __future__ import annotations

import time
from collections.abc import Iterator

from engine import hooks
from engine.data.buffers import settle_here
from engine.data.dataset import close_iterator
from engine.data.structure import Element


class DatasetIterator:
    """What ``iter(dataset)`` returns. Only this outermost iterator reports to the hooks; ``close()`` (or
    garbage collection) stops the pass, which stops prefetch threads and map thread pools upstream. Its thread
    owns the pipeline's accounting: each fetch first registers and releases what the stages' threads held and let
    go of since the previous one."""

    __slots__ = ("_elements", "__weakref__")

    def __init__(self, elements: Iterator[Element]) -> None:
        self._elements = elements

    def __iter__(self) -> DatasetIterator:
        return self

    def __next__(self) -> Element:
        opened = not hooks._step_open
        hooks.mark_step_begin()
        settle_here()
        start_ns = time.perf_counter_ns()
        try:
            element = next(self._elements)
        except StopIteration:
            if opened:
                hooks.cancel_step_begin()  # the pass is over: no step begins here
            raise
        hooks.report_data_wait(time.perf_counter_ns() - start_ns)
        return element

    def close(self) -> None:
        close_iterator(self._elements)

    def __del__(self) -> None:
        self.close()
