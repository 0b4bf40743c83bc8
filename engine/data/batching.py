"""Batch: stacks consecutive elements; over a slices source it gathers whole batches by index."""
from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from engine.data.dataset import INFINITE, Dataset, check_count, close_iterator
from engine.data.structure import Element, stack


class Batch(Dataset):
    """Elements stacked ``batch_size`` at a time; the last, smaller batch is kept unless ``drop_remainder``."""

    def __init__(self, input: Dataset, batch_size: int, drop_remainder: bool) -> None:
        self._input = input
        self._batch_size = check_count("batch", "batch_size", batch_size, 1)
        self._drop_remainder = bool(drop_remainder)

    def _cardinality(self) -> int:
        inner = self._input._cardinality()
        if inner == INFINITE:
            return INFINITE
        return inner // self._batch_size if self._drop_remainder else -(-inner // self._batch_size)

    def _describe(self) -> str:
        return f"batch({self._batch_size}{', drop_remainder=True' if self._drop_remainder else ''})"

    def _elements(self) -> Iterator[Element]:
        source = self._input._plan_source()
        if source is not None:
            batches = rechunk(self._input._index_chunks(), self._batch_size, self._drop_remainder)
            try:
                for indices in batches:
                    yield source.gather(indices)
            finally:
                close_iterator(batches)
            return
        upstream = self._input._iterate()
        what = self._describe()
        try:
            while elements := list(itertools.islice(upstream, self._batch_size)):
                if len(elements) < self._batch_size and self._drop_remainder:
                    return
                yield stack(elements, what)
        finally:
            close_iterator(upstream)


def rechunk(chunks: Iterator[np.ndarray], size: int, drop_remainder: bool) -> Iterator[np.ndarray]:
    """Regroup index arrays of any lengths into arrays of ``size`` (the last one shorter unless dropped)."""
    carry = np.empty(0, dtype=np.intp)
    try:
        for chunk in chunks:
            if len(carry):
                chunk = np.concatenate((carry, chunk))
            full = len(chunk) - len(chunk) % size
            for start in range(0, full, size):
                yield chunk[start:start + size]
            carry = chunk[full:]
    finally:
        close_iterator(chunks)
    if len(carry) and not drop_remainder:
        yield carry
