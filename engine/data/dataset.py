"""The Dataset base class: an immutable, re-iterable description of an input pipeline (tf.data semantics)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.data.structure import Element

if TYPE_CHECKING:
    from engine.data.iterator import DatasetIterator
    from engine.data.sources import TensorSlices

INFINITE = -1  # cardinality of a dataset that never ends (``repeat()`` without a count)
AUTOTUNE = -1  # ``map(num_parallel_calls=AUTOTUNE)`` / ``prefetch(AUTOTUNE)``: let the pipeline choose


class Dataset:
    """A sequence of elements (numpy arrays, or tuples / dicts of them) built from chained transformations.

    Every transformation returns a new Dataset; a Dataset can be iterated any number of times, and
    ``iter(dataset)`` gives the user-facing iterator that reports input waits to ``engine.hooks``.

    Subclasses implement ``_cardinality`` and ``_elements``. Datasets whose elements are rows of one
    ``from_tensor_slices`` source in some order (slices, shuffle, take, repeat, cache) also describe a pass
    as index arrays into that source (``_plan_source`` / ``_index_chunks``), so that ``batch`` gathers a
    whole batch with one numpy indexing per component instead of stacking rows one by one.
    """

    _input: Dataset | None = None

    # --- what subclasses implement ----------------------------------------------------------------------

    def _cardinality(self) -> int:
        """Number of elements, or ``INFINITE``."""
        raise NotImplementedError

    def _elements(self) -> Iterator[Element]:
        """One pass over the elements, element by element."""
        raise NotImplementedError

    def _plan_source(self) -> TensorSlices | None:
        """The slices source whose rows this dataset yields, when a pass can be described by indices."""
        return None

    def _index_chunks(self) -> Iterator[np.ndarray]:
        """One pass as consecutive arrays of row indices into ``_plan_source()`` (only when it is not None)."""
        raise NotImplementedError

    def _describe(self) -> str:
        raise NotImplementedError

    # --- iteration -----------------------------------------------------------------------------------------

    def _iterate(self) -> Iterator[Element]:
        """One pass for internal use (downstream datasets, the prefetch thread): reports nothing to hooks."""
        source = self._plan_source()
        if source is None:
            return self._elements()
        return source.rows(self._index_chunks())

    def __iter__(self) -> DatasetIterator:
        from engine.data.iterator import DatasetIterator
        return DatasetIterator(self._iterate())

    def __len__(self) -> int:
        count = self._cardinality()
        if count == INFINITE:
            raise TypeError(f"len() is undefined for an infinite dataset (repeat() without a count): {self!r}")
        return count

    def __bool__(self) -> bool:
        return True  # NOTE: without this, `if dataset:` would call __len__ (and fail for infinite datasets)

    def __repr__(self) -> str:
        steps, dataset = [], self
        while dataset is not None:
            steps.append(dataset._describe())
            dataset = dataset._input
        return f"<Dataset {' -> '.join(reversed(steps))}>"

    # --- construction and transformations --------------------------------------------------------------

    @staticmethod
    def from_tensor_slices(elements: Any) -> Dataset:
        """Slice ``elements`` (an array, a tuple/list of arrays or a dict of arrays) along its first axis."""
        from engine.data.sources import TensorSlices
        return TensorSlices(elements)

    def shuffle(self, buffer_size: int, seed: int | None = None) -> Dataset:
        """Shuffle through a buffer of ``buffer_size`` elements, reshuffling on every pass; use before batch."""
        from engine.data.shuffle import Shuffle
        return Shuffle(self, buffer_size, seed)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        """Stack ``batch_size`` consecutive elements (component-wise for tuples and dicts)."""
        from engine.data.batching import Batch
        return Batch(self, batch_size, drop_remainder)

    def map(self, fn: Callable[..., Any], num_parallel_calls: int | None = None) -> Dataset:
        """Apply ``fn`` to each element (tuples unpacked as arguments), in order, optionally on threads."""
        from engine.data.mapping import Map
        return Map(self, fn, num_parallel_calls)

    def prefetch(self, buffer_size: int) -> Dataset:
        """Produce up to ``buffer_size`` elements ahead on a background thread."""
        from engine.data.prefetch import Prefetch
        return Prefetch(self, buffer_size)

    def prefetch_to_device(self, device: Any, buffer_size: int = 1) -> Dataset:
        """Produce up to ``buffer_size`` elements ahead on a background thread, their arrays already copied to
        ``device`` ("cpu", "cuda", "cuda:N"); use as the last stage. "cuda" without CUDA raises saying why."""
        from engine.data.device import prefetch_to_device
        return prefetch_to_device(self, device, buffer_size)

    def cache(self) -> Dataset:
        """Keep the elements of the first complete pass in memory and replay them on later passes."""
        from engine.data.cache import Cache
        return Cache(self)

    def repeat(self, count: int | None = None) -> Dataset:
        """Repeat the dataset ``count`` times (forever when None or -1); each pass reshuffles upstream."""
        from engine.data.ordering import Repeat
        return Repeat(self, count)

    def shard(self, num_shards: int, index: int) -> Dataset:
        """Every ``num_shards``-th element starting at ``index``: element ``i`` goes to shard ``i % num_shards``
        (tf.data's semantics; in a data-parallel job: ``shard(world_size(), rank())``, before shuffle and batch)."""
        from engine.data.sharding import Shard
        return Shard(self, num_shards, index)

    def take(self, count: int) -> Dataset:
        """The first ``count`` elements (all of them when -1)."""
        from engine.data.ordering import Take
        return Take(self, count)


def close_iterator(iterator: Iterator[Any]) -> None:
    """Close a generator now (running its ``finally`` blocks: threads stop, pools shut down)."""
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


def check_count(what: str, name: str, value: Any, minimum: int) -> int:
    """``value`` as an int ≥ ``minimum``, or a ValueError naming the transformation and the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{what}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
