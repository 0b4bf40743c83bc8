"""The async writer's queue: plain tuples that say what they hold (an ``Item``), read by kind on the writer thread."""
from __future__ import annotations

import logging

import numpy as np

from instrumentation import SummaryWriter
from instrumentation.summary.event_file import BUILD, ROWS, SCALAR, Item
from event_helpers import read_run


def test_every_add_queues_plain_data_that_says_what_it_is(tmp_path):
    writer = SummaryWriter(tmp_path, flush_secs=3600, max_queue=1 << 20)
    try:
        queue = writer._async.queue
        queue.clear()
        writer.add_scalar("loss", np.float32(0.5), np.int64(3), walltime=7.0)
        writer.add_scalar_rows(("a", "b"), [[1, 2.0]], [4], [8.0])
        writer.add_scalars("lr", {"x": 1.0}, 5, walltime=9.0)
        writer.add_histogram("w", np.arange(4.0), 6)
        items = list(queue)
        assert [item[0] for item in items] == [SCALAR, ROWS, SCALAR, BUILD]
        assert all(isinstance(item[0], Item) for item in items)
        assert items[0] == (SCALAR, None, "loss", 0.5, 3, 7.0)
        assert type(items[0][3]) is float and type(items[0][4]) is int  # converted on the calling thread
        assert items[1] == (ROWS, None, ("a", "b"), [[1.0, 2.0]], [4], [8.0])
        assert items[2][1].endswith("lr_x") and items[2][2:] == ("lr", 1.0, 5, 9.0)
    finally:
        writer.close()
    written = [(v.tag, e.step) for e in read_run(tmp_path) for v in e.values]
    assert written == [("loss", 3), ("a", 4), ("b", 4), ("w", 6)]


def test_an_item_that_fails_is_dropped_counted_and_reported_and_the_writer_goes_on(tmp_path, caplog):
    def broken_builder() -> bytes:
        raise RuntimeError("no such event")

    with caplog.at_level(logging.WARNING, logger="instrumentation.summary"):
        with SummaryWriter(tmp_path, flush_secs=3600) as writer:
            writer.add_scalar("before", 1.0, 1)
            writer._async.put((BUILD, None, broken_builder, ()))
            writer._async.put((ROWS, None, ("a",), [[1.0], [2.0], [3.0]], [1, 2, 2**64], [1.0, 1.0, 1.0]))
            writer.add_scalar("after", 2.0, 2)
            writer.flush()
            assert writer.dropped_events == 2  # the builder's event, and the row whose step protobuf refuses too
    assert "no such event" in caplog.text and "int64" in caplog.text
    assert [(v.tag, e.step) for e in read_run(tmp_path) for v in e.values] == [
        ("before", 1), ("a", 1), ("a", 2), ("after", 2)]
