"""Shard: every ``num_shards``-th element of the input, starting at ``index`` (tf.data's ``Dataset.shard``)."""
from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from engine.data.dataset import INFINITE, Dataset, check_count, close_iterator
from engine.data.sources import TensorSlices
from engine.data.structure import Element


class Shard(Dataset):
    """Element ``i`` of each pass of the input belongs to shard ``i % num_shards``; this is shard ``index``."""

    def __init__(self, input: Dataset, num_shards: int, index: int) -> None:
        self._input = input
        self._num_shards = check_count("shard", "num_shards", num_shards, 1)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < num_shards:
            raise ValueError(f"shard: index must be an integer in [0, num_shards) = [0, {num_shards}), got {index!r}")
        self._index = int(index)

    def _cardinality(self) -> int:
        inner = self._input._cardinality()
        if inner == INFINITE:
            return INFINITE
        return max(0, (inner - self._index + self._num_shards - 1) // self._num_shards)

    def _describe(self) -> str:
        return f"shard({self._num_shards}, {self._index})"

    def _plan_source(self) -> TensorSlices | None:
        return self._input._plan_source()

    def _index_chunks(self) -> Iterator[np.ndarray]:
        position = 0  # of the chunk's first element in the input's pass
        upstream = self._input._index_chunks()
        try:
            for chunk in upstream:
                first = (self._index - position) % self._num_shards
                yield chunk[first::self._num_shards]
                position += len(chunk)
        finally:
            close_iterator(upstream)

    def _elements(self) -> Iterator[Element]:
        upstream = self._input._iterate()
        try:
            yield from itertools.islice(upstream, self._index, None, self._num_shards)
        finally:
            close_iterator(upstream)
