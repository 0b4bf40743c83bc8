"""The slices source: ``Dataset.from_tensor_slices`` over in-memory arrays, with row and batch gathering."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from engine.data.dataset import Dataset
from engine.data.structure import Element, flatten, leaf_names, packer, to_structure


class TensorSlices(Dataset):
    """Rows of one or more arrays that share their first dimension."""

    def __init__(self, elements: Any) -> None:
        structure = to_structure(elements)
        leaves, names = flatten(structure), leaf_names(structure)
        for name, leaf in zip(names, leaves):
            if leaf.ndim == 0:
                raise ValueError(f"from_tensor_slices: component {name or '(the array)'} is a scalar "
                                 f"({leaf!r}); every component needs a first dimension to slice")
        lengths = [len(leaf) for leaf in leaves]
        if len(set(lengths)) > 1:
            listed = ", ".join(f"{name}: {length}" for name, length in zip(names, lengths))
            raise ValueError(f"from_tensor_slices: all components need the same first dimension, got {listed}")
        self._leaves = [_read_only(leaf) for leaf in leaves]
        self._names = names
        self._pack = packer(structure)
        self._length = lengths[0]

    def _cardinality(self) -> int:
        return self._length

    def _plan_source(self) -> TensorSlices:
        return self

    def _index_chunks(self) -> Iterator[np.ndarray]:
        yield np.arange(self._length)

    def _describe(self) -> str:
        parts = (f"{name}{' ' if name else ''}{leaf.dtype}{list(leaf.shape)}"
                 for name, leaf in zip(self._names, self._leaves))
        return f"from_tensor_slices({', '.join(parts)})"

    def rows(self, index_chunks: Iterator[np.ndarray]) -> Iterator[Element]:
        """The rows named by ``index_chunks``, one element each (read-only views of the source arrays)."""
        leaves, pack = self._leaves, self._pack
        for chunk in index_chunks:
            for index in chunk.tolist():
                yield pack([leaf[index, ...] for leaf in leaves])

    def gather(self, indices: np.ndarray) -> Element:
        """The rows at ``indices`` stacked into one element (new arrays, one numpy take per component)."""
        return self._pack([leaf[indices] for leaf in self._leaves])


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view
