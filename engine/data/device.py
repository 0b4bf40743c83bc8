"""prefetch_to_device: the prefetch thread also copies each element's arrays to a device, ahead of use."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from engine import backend as _backend
from engine.backend import cuda_backend as _cuda
from engine.data.dataset import Dataset, close_iterator
from engine.data.prefetch import Prefetch
from engine.data.structure import Element, flatten, pack


class DeviceStage(Dataset):
    """Each element with every array leaf copied to ``device`` (CuPy arrays on a GPU; unchanged for "cpu").

    On a GPU the copies are queued on a stream of this stage's own and waited for on the thread that iterates
    (the prefetch producer), so the consumer gets arrays whose copy has finished and its stream never waits.
    """

    def __init__(self, input: Dataset, device: _backend.Device) -> None:
        self._input, self._device = input, device

    def _cardinality(self) -> int:
        return self._input._cardinality()

    def _describe(self) -> str:
        return f"to_device({self._device})"

    def _elements(self) -> Iterator[Element]:
        upstream = self._input._iterate()
        try:
            if self._device.type == "cpu":
                yield from upstream
                return
            stream = _cuda.new_stream()
            for element in upstream:
                with stream:
                    moved = [_backend.to_device(leaf, self._device) for leaf in flatten(element)]
                stream.synchronize()
                yield pack(element, iter(moved))
        finally:
            close_iterator(upstream)


def prefetch_to_device(dataset: Dataset, device: Any, buffer_size: int = 1) -> Dataset:
    """``dataset`` with up to ``buffer_size`` elements already copied to ``device`` by a background thread
    (``tf.data.experimental.prefetch_to_device``). "cuda" without CUDA is a RuntimeError saying why."""
    return Prefetch(DeviceStage(dataset, _backend.resolve(device)), buffer_size)
