"""Cache: the first complete pass is kept in memory and replayed by later passes."""
from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from engine.data.buffers import Stage
from engine.data.dataset import INFINITE, Dataset, close_iterator
from engine.data.sources import TensorSlices
from engine.data.structure import Element


class Cache(Dataset):
    """Replays the first pass that ran to the end; an abandoned pass stores nothing. Over a slices source
    (e.g. ``shuffle().cache()``) it stores the pass's row indices rather than copies of the rows. What it stores
    (and records during the first pass) is the stage's buffers in the allocator until the dataset is dropped."""

    def __init__(self, input: Dataset) -> None:
        if input._cardinality() == INFINITE:
            raise ValueError(f"cache(): the input is infinite and would fill memory; put cache() before "
                             f"repeat(): {input!r}")
        self._input = input
        self._stored: list[Any] | None = None
        self._lock = threading.Lock()
        self._stage = Stage(self._describe(), input)

    def _cardinality(self) -> int:
        return self._input._cardinality()

    def _describe(self) -> str:
        return "cache()"

    def _plan_source(self) -> TensorSlices | None:
        return self._input._plan_source()

    def _index_chunks(self) -> Iterator[np.ndarray]:
        return self._replay_or_record(self._input._index_chunks)

    def _elements(self) -> Iterator[Element]:
        return self._replay_or_record(self._input._iterate)

    def _replay_or_record(self, start_pass: Any) -> Iterator[Any]:
        stored = self._stored
        if stored is not None:
            yield from stored
            return
        recorded, holding = [], self._stage.open()
        upstream = start_pass()
        try:
            for item in upstream:
                recorded.append(item)
                holding.hold(item)
                yield item
        except BaseException:
            holding.close()  # an abandoned or failed pass stores nothing
            raise
        finally:
            close_iterator(upstream)
        with self._lock:
            if self._stored is None:
                self._stored = recorded
                weakref.finalize(self, holding.close).atexit = False  # the stored elements leave with the dataset
                return
        holding.close()  # another pass stored first
