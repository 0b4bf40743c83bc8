"""Blocks of scalar events framed at once (add_rows / add_column, SummaryWriter.add_scalar_column) against protobuf +
frame_record byte for byte, TensorBoard's own reader, and the file cut short mid-block."""
from __future__ import annotations

import glob
import os
import random

import numpy as np
import pytest

from instrumentation.format.reader import EventFileReader
from instrumentation.format.records import frame_records
from instrumentation.summary.builders import ScalarEventBuilder
from instrumentation.summary.scalar_records import BLOCK_MIN_ROWS, ScalarRecordEncoder

TAGS = ("grad_norm/layer0.weight", "é/ü ☃", "x" * 300)  # a tag over 127 bytes: a 2-byte length varint
SPECIAL = [float("nan"), -float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 1e39, 1e-50, 1e-45, 0.0, -0.0,
           3.4028235e38, 3.4028236e38, 3.40282357e38]
EDGE_STEPS = [0, 1, 127, 128, 129, 16383, 16384, 2**21 - 1, 2**21, 2**35, 2**56 - 1, 2**56, 2**62, 2**63 - 1, -1,
              -(2**40), -(2**63)]
EDGE_WALLS = [1.7e9, 0.0, -0.0, 12.5, float("nan"), 5e-324]


def _expected(events: list[tuple[list[str], list[float], int, float]]) -> bytes:
    """Protobuf's serialization of each event, framed: the oracle."""
    build = ScalarEventBuilder()
    return frame_records([build.many(*event) for event in events])


def _rows(rng: random.Random, count: int, width: int) -> list[list[float]]:
    return [[rng.choice(SPECIAL) if rng.random() < 0.2 else rng.gauss(0, 1e3) for _ in range(width)]
            for _ in range(count)]


def test_a_block_of_every_step_length_and_wall_time_is_byte_identical_to_protobuf():
    rng = random.Random(0)
    steps = [rng.choice(EDGE_STEPS) for _ in range(300)]  # layouts change from row to row: many runs
    walls = [rng.choice(EDGE_WALLS) for _ in steps]
    rows = _rows(rng, len(steps), len(TAGS))
    encoder = ScalarRecordEncoder()
    encoder.add_rows(TAGS, rows, steps, walls)
    assert len(encoder) == len(steps)
    assert encoder.take() == _expected([(list(TAGS), row, step, wall) for row, step, wall in zip(rows, steps, walls)])
    assert encoder.take() == b"" and len(encoder) == 0


@pytest.mark.parametrize("start", [1, 100, 16300, 2**40])
def test_a_column_of_rising_steps_is_byte_identical_to_one_add_per_value(start):
    rng = random.Random(start)
    steps = list(range(start, start + 200))  # from 100 and 16300: crosses a varint length inside the block
    values = [row[0] for row in _rows(rng, len(steps), 1)]
    walls = [1.7e9 + 0.01 * i for i in range(len(steps))]
    encoder = ScalarRecordEncoder()
    encoder.add_column("train/loss", values, steps, walls)
    assert encoder.take() == _expected([(["train/loss"], [value], step, wall)
                                        for value, step, wall in zip(values, steps, walls)])


def test_blocks_keep_their_place_among_single_events():
    rng = random.Random(2)
    encoder, events = ScalarRecordEncoder(), []
    step = 1
    for _ in range(60):
        kind = rng.random()
        if kind < 0.4:
            values = [rng.random() for _ in TAGS]
            encoder.add_many(list(TAGS), values, step, 1e9 + step)
            events.append((list(TAGS), values, step, 1e9 + step))
            step += 1
        else:
            count = rng.choice([1, BLOCK_MIN_ROWS - 1, BLOCK_MIN_ROWS, 70])  # below the block size: one by one
            steps = list(range(step, step + count))
            rows = _rows(rng, count, 2)
            walls = [1e9 + s for s in steps]
            if kind < 0.7:
                encoder.add_rows(TAGS[:2], rows, steps, walls)
                events += [(list(TAGS[:2]), row, s, w) for row, s, w in zip(rows, steps, walls)]
            else:
                encoder.add_column("loss", [row[0] for row in rows], steps, walls)
                events += [(["loss"], [row[0]], s, w) for row, s, w in zip(rows, steps, walls)]
            step += count
    assert encoder.take() == _expected(events)


def test_columns_of_one_tag_added_in_a_row_are_one_block_in_their_place():
    """The writer thread gets watch()'s losses 64 at a time; the queue's items of one tag in a row are framed as one
    block, and any other event ends it."""
    encoder, events, step = ScalarRecordEncoder(), [], 1
    for tag, count in [("loss", 10), ("loss", 10), ("loss", 10), ("lr", 5), ("loss", 30), (None, 1), ("loss", 3)]:
        steps = list(range(step, step + count))
        if tag is None:
            encoder.add_many(["a", "b"], [1.0, 2.0], step, 7.0)
            events.append((["a", "b"], [1.0, 2.0], step, 7.0))
        else:
            values = [s * 0.5 for s in steps]
            encoder.add_column(tag, values, steps, [7.0] * count)
            events += [([tag], [value], s, 7.0) for value, s in zip(values, steps)]
        step += count
        assert len(encoder) == len(events)
    assert encoder.take() == _expected(events)


def test_a_block_with_a_step_beyond_int64_drops_that_event_like_protobuf():
    encoder = ScalarRecordEncoder()
    steps = list(range(1, BLOCK_MIN_ROWS + 5)) + [2**64]
    encoder.add_column("a", [1.0] * len(steps), steps, [5.0] * len(steps))
    assert encoder.take() == _expected([(["a"], [1.0], step, 5.0) for step in steps[:-1]])


def test_a_failed_take_forgets_the_framed_blocks_too():
    encoder = ScalarRecordEncoder()
    encoder.add_column("a", [1.0] * 40, list(range(40)), [5.0] * 40)
    encoder.discard()
    assert len(encoder) == 0 and encoder.take() == b""


def test_tensorboard_reads_add_scalar_column_as_it_reads_add_scalar(tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    from instrumentation import SummaryWriter
    rng = np.random.default_rng(0)
    values = rng.normal(size=1000) * 1e3
    walls = 1.7e9 + np.arange(1000) * 0.25
    with SummaryWriter(tmp_path / "column") as writer:
        for start in range(0, 1000, 64):
            writer.add_scalar_column("train/loss", values[start:start + 64].tolist(),
                                     [np.int64(step) for step in range(start, min(start + 64, 1000))],
                                     walls[start:start + 64].tolist())
    with SummaryWriter(tmp_path / "scalar") as writer:
        for step in range(1000):
            writer.add_scalar("train/loss", float(values[step]), step, walltime=float(walls[step]))
    read = {}
    for run in ("column", "scalar"):
        accumulator = event_accumulator.EventAccumulator(str(tmp_path / run),
                                                         size_guidance={event_accumulator.SCALARS: 0})
        accumulator.Reload()
        read[run] = [(event.wall_time, event.step, event.value) for event in accumulator.Scalars("train/loss")]
    assert read["column"] == read["scalar"]
    assert [step for _, step, _ in read["column"]] == list(range(1000))
    np.testing.assert_array_equal([value for _, _, value in read["column"]], values.astype(np.float32))


def test_add_scalar_column_checks_naming_what_is_wrong(tmp_path):
    from instrumentation import SummaryWriter
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="3 values, 2 steps and 2 wall times for 'loss'"):
            writer.add_scalar_column("loss", [1.0, 2.0, 3.0], [0, 1], [1.0, 2.0])
        with pytest.raises(ValueError, match="loss"):
            writer.add_scalar_column("loss", [1.0, "high"], [0, 1])
        with pytest.raises(ValueError, match="global_step"):
            writer.add_scalar_column("loss", [1.0, 2.0], [0, "one"])
        with pytest.raises(ValueError, match="tag must be a str"):
            writer.add_scalar_column(7, [1.0], [0])
        writer.add_scalar_column("loss", [], [])  # nothing to write: no event, no error
        writer.add_scalar_column("loss", [np.float32(0.5), 2], [np.int64(4), 5])
    columns = EventFileReader(_event_file(tmp_path)).read_columns()
    assert columns.steps.tolist() == [4, 5] and columns.values.tolist() == [0.5, 2.0]


def test_a_file_cut_inside_a_block_keeps_every_whole_record(tmp_path):
    from instrumentation import SummaryWriter
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar_column("loss", [float(i) for i in range(500)], list(range(500)))
    path = _event_file(tmp_path)
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) - 37)  # killed while the block was being written: the last one torn
    reader = EventFileReader(path)
    columns = reader.read_columns()
    assert columns.steps.tolist() == list(range(499)) and columns.values.tolist() == [float(i) for i in range(499)]
    assert reader.corrupt_records == 0  # a torn tail is a record still being written, not a corrupt one


def _event_file(log_dir: object) -> str:
    (path,) = glob.glob(os.path.join(str(log_dir), "events.out.tfevents.*"))
    return path
