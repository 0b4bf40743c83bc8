"""Shuffle: a tf.data shuffle buffer, reseeded on every pass from (seed, pass number)."""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from engine import random
from engine.data.buffers import Stage
from engine.data.dataset import INFINITE, Dataset, check_count, close_iterator
from engine.data.sources import TensorSlices
from engine.data.structure import Element

_PICKS_PER_DRAW = 1024


class Shuffle(Dataset):
    """Fill a buffer of ``buffer_size`` elements; then, for each new element, emit a random buffered one and
    put the new one in its place; at the end emit the rest of the buffer in random order. With
    ``buffer_size`` at least the dataset length this is a uniform permutation. Over elements (not row indices)
    the buffered elements are the stage's buffers in the allocator (``engine.data.buffers``)."""

    def __init__(self, input: Dataset, buffer_size: int, seed: int | None) -> None:
        self._input = input
        self._buffer_size = check_count("shuffle", "buffer_size", buffer_size, 1)
        self._seed = None if seed is None else check_count("shuffle", "seed", seed, 0)
        self._passes = itertools.count()  # NOTE: next() on a count is atomic under the GIL
        self._stage = Stage(self._describe(), input)

    def _cardinality(self) -> int:
        return self._input._cardinality()

    def _describe(self) -> str:
        return f"shuffle({self._buffer_size}, seed={self._seed})"

    def _plan_source(self) -> TensorSlices | None:
        return self._input._plan_source() if self._input._cardinality() != INFINITE else None

    def _next_generator(self) -> np.random.Generator:
        """The generator of the next pass: seeded from (seed, pass number), or drawn from the engine's generator
        (so ``engine.manual_seed`` alone makes an unseeded shuffle repeatable)."""
        if self._seed is None:
            return np.random.default_rng(random.generator().integers(0, 2**63))
        return np.random.default_rng((self._seed, next(self._passes)))

    def _index_chunks(self) -> Iterator[np.ndarray]:
        chunks = list(self._input._index_chunks())
        indices = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.intp)
        rng = self._next_generator()
        if len(indices) <= self._buffer_size:  # the same result as the buffer below, vectorized
            yield indices[rng.permutation(len(indices))]
        else:
            shuffled = shuffle_buffered(iter(indices.tolist()), self._buffer_size, rng)
            yield np.fromiter(shuffled, dtype=np.intp, count=len(indices))

    def _elements(self) -> Iterator[Element]:
        upstream = self._input._iterate()
        holding = self._stage.open()
        try:
            held = ((element, holding.hold(element)) for element in upstream)
            for element, entry in shuffle_buffered(held, self._buffer_size, self._next_generator()):
                holding.leave(entry)
                yield element
        finally:
            close_iterator(upstream)
            holding.close()


def shuffle_buffered(items: Iterator[Any], buffer_size: int, rng: np.random.Generator) -> Iterator[Any]:
    """The shuffle buffer over any items; it draws from ``rng`` in a way that depends only on the number of
    items, so elements and row indices of the same dataset come out in the same order."""
    buffer = list(itertools.islice(items, buffer_size))
    if len(buffer) == buffer_size:
        drawn: list[int] = []
        for item in items:
            if not drawn:
                drawn = rng.integers(0, buffer_size, size=_PICKS_PER_DRAW).tolist()
            slot = drawn.pop()
            yield buffer[slot]
            buffer[slot] = item
    for slot in rng.permutation(len(buffer)).tolist():
        yield buffer[slot]
