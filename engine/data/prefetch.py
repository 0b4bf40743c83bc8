"""Prefetch: a background thread runs the input pipeline ahead of the consumer into a bounded queue."""
from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from engine.data.buffers import Holding, Stage
from engine.data.dataset import AUTOTUNE, Dataset, check_count, close_iterator
from engine.data.structure import Element

AUTOTUNE_BUFFER = 2
_END = object()


class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Prefetch(Dataset):
    """Up to ``buffer_size`` elements produced ahead. An exception in the producer is raised in the consumer
    (the same exception object, so its traceback still shows where it happened); closing or dropping the
    iterator stops and joins the thread. The elements in the queue (and the one the producer waits to put) are
    the stage's buffers in the allocator (``engine.data.buffers``) until the consumer takes them."""

    def __init__(self, input: Dataset, buffer_size: int) -> None:
        self._input = input
        if buffer_size == AUTOTUNE:
            buffer_size = AUTOTUNE_BUFFER
        self._buffer_size = check_count("prefetch", "buffer_size", buffer_size, 1)
        self._stage = Stage(self._describe(), input)

    def _cardinality(self) -> int:
        return self._input._cardinality()

    def _describe(self) -> str:
        return f"prefetch({self._buffer_size})"

    def _elements(self) -> Iterator[Element]:
        buffer: queue.Queue = queue.Queue(maxsize=self._buffer_size)
        stop = threading.Event()
        holding = self._stage.open()
        # NOTE: the thread must not reference this generator, so that dropping the iterator closes it.
        thread = threading.Thread(target=_produce, args=(self._input, buffer, stop, holding), daemon=True,
                                  name="engine.data.prefetch")
        thread.start()
        try:
            while True:
                item = buffer.get()
                if item is _END:
                    return
                if type(item) is _Failure:
                    raise item.error
                element, held = item
                holding.leave(held)
                yield element
        finally:
            stop.set()
            _drain(buffer)  # unblocks a producer waiting on a full queue; it then sees `stop` and returns
            thread.join()
            holding.close()  # what was still queued (the producer's last put came after the drain)


def _produce(dataset: Dataset, buffer: queue.Queue, stop: threading.Event, holding: Holding) -> None:
    upstream = None
    try:
        upstream = dataset._iterate()
        for element in upstream:
            buffer.put((element, holding.hold(element)))
            if stop.is_set():
                return
        buffer.put(_END)
    except BaseException as error:  # noqa: BLE001 - handed to the consumer, which raises it
        buffer.put(_Failure(error))
    finally:
        if upstream is not None:
            close_iterator(upstream)


def _drain(buffer: queue.Queue) -> None:
    while True:
        try:
            buffer.get_nowait()
        except queue.Empty:
            return
