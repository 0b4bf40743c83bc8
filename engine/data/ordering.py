"""Repeat and take: transformations that change how many elements a pass has, not the elements."""
from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from engine.data.dataset import INFINITE, Dataset, check_count, close_iterator
from engine.data.sources import TensorSlices
from engine.data.structure import Element


class Repeat(Dataset):
    """``count`` passes over the input (forever when None or -1); every pass re-iterates it (reshuffles)."""

    def __init__(self, input: Dataset, count: int | None) -> None:
        self._input = input
        self._count = INFINITE if count is None else check_count("repeat", "count", count, -1)

    def _cardinality(self) -> int:
        inner = self._input._cardinality()
        if inner == 0 or self._count == 0:
            return 0
        if inner == INFINITE or self._count == INFINITE:
            return INFINITE
        return inner * self._count

    def _describe(self) -> str:
        return f"repeat({'' if self._count == INFINITE else self._count})"

    def _passes(self) -> Iterator[int]:
        if self._input._cardinality() == 0:  # NOTE: an empty input repeated forever is empty, not a busy loop
            return iter(())
        return itertools.count() if self._count == INFINITE else iter(range(self._count))

    def _plan_source(self) -> TensorSlices | None:
        return self._input._plan_source()

    def _index_chunks(self) -> Iterator[np.ndarray]:
        for _ in self._passes():
            yield from self._input._index_chunks()

    def _elements(self) -> Iterator[Element]:
        for _ in self._passes():
            yield from self._input._iterate()


class Take(Dataset):
    """The first ``count`` elements of the input (all when -1); the input is not read further."""

    def __init__(self, input: Dataset, count: int) -> None:
        self._input = input
        self._count = check_count("take", "count", count, -1)

    def _cardinality(self) -> int:
        inner = self._input._cardinality()
        if self._count == -1:
            return inner
        return self._count if inner == INFINITE else min(self._count, inner)

    def _describe(self) -> str:
        return f"take({self._count})"

    def _plan_source(self) -> TensorSlices | None:
        return self._input._plan_source()

    def _index_chunks(self) -> Iterator[np.ndarray]:
        if self._count == -1:
            yield from self._input._index_chunks()
            return
        remaining = self._count
        if remaining == 0:
            return
        upstream = self._input._index_chunks()
        try:
            for chunk in upstream:  # NOTE: stop before asking for the next chunk (it may start a new pass)
                yield chunk[:remaining]
                remaining -= len(chunk)
                if remaining <= 0:
                    return
        finally:
            close_iterator(upstream)

    def _elements(self) -> Iterator[Element]:
        if self._count == -1:
            yield from self._input._iterate()
            return
        upstream = self._input._iterate()
        try:
            yield from itertools.islice(upstream, self._count)
        finally:
            close_iterator(upstream)
