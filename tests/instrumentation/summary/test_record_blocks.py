"""Blocks of scalar events framed at once (``RunBatch.add_rows`` of 24 rows or more, ``add_scalar_rows``) against
protobuf + frame_record byte for byte, TensorBoard's own reader, and the file cut short mid-block."""
from __future__ import annotations

import glob
import os
import random

import numpy as np
import pytest
from scalar_oracle import protobuf_records
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from instrumentation import SummaryWriter
from instrumentation.format.reader import EventFileReader
from instrumentation.summary.record_blocks import BLOCK_MIN_RECORDS
from instrumentation.summary.run_batch import RunBatch
from instrumentation.summary.scalar_records import scalar_row

TAGS = ("grad_norm/layer0.weight", "é/ü ☃", "x" * 300)  # a tag over 127 bytes: a 2-byte length varint
SPECIAL = [float("nan"), -float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 1e39, 1e-50, 1e-45, 0.0, -0.0,
           3.4028235e38, 3.4028236e38, 3.40282357e38]
EDGE_STEPS = [0, 1, 127, 128, 129, 16383, 16384, 2**21 - 1, 2**21, 2**35, 2**56 - 1, 2**56, 2**62, 2**63 - 1, -1,
              -(2**40), -(2**63)]
EDGE_WALLS = [1.7e9, 0.0, -0.0, 12.5, float("nan"), 5e-324]


def _rows(rng: random.Random, count: int, width: int) -> list[list[float]]:
    return [[rng.choice(SPECIAL) if rng.random() < 0.2 else rng.gauss(0, 1e3) for _ in range(width)]
            for _ in range(count)]


def _framed(batch: RunBatch, events: int) -> bytes:
    framed, count = batch.framed()
    assert count == events
    return framed


def test_a_block_of_every_step_length_and_wall_time_is_byte_identical_to_protobuf():
    rng = random.Random(0)
    steps = [rng.choice(EDGE_STEPS) for _ in range(300)]  # layouts change from row to row: many runs
    walls = [rng.choice(EDGE_WALLS) for _ in steps]
    rows = _rows(rng, len(steps), len(TAGS))
    for given in (rows, np.asarray(rows)):
        batch = RunBatch()
        batch.add_rows(TAGS, given, steps, walls)
        assert len(batch) == len(steps)
        assert _framed(batch, len(steps)) == protobuf_records(list(zip([TAGS] * len(steps), rows, steps, walls)))


@pytest.mark.parametrize("start", [1, 100, 16300, 2**40])
def test_a_column_of_rising_steps_is_byte_identical_to_one_event_per_value(start):
    rng = random.Random(start)
    steps = list(range(start, start + 200))  # from 100 and 16300: crosses a varint length inside the block
    rows = _rows(rng, len(steps), 1)
    walls = [1.7e9 + 0.01 * i for i in range(len(steps))]
    batch = RunBatch()
    batch.add_rows(("train/loss",), rows, steps, walls)
    assert _framed(batch, len(steps)) == protobuf_records([(["train/loss"], row, step, wall)
                                                           for row, step, wall in zip(rows, steps, walls)])


def test_blocks_keep_their_place_among_single_events():
    rng = random.Random(2)
    batch, events = RunBatch(), []
    step = 1
    for _ in range(60):
        if rng.random() < 0.4:
            values = [rng.random() for _ in TAGS]
            batch.bodies.append(scalar_row(TAGS, values, step, 1e9 + step))
            events.append((TAGS, values, step, 1e9 + step))
            step += 1
        else:
            count = rng.choice([1, BLOCK_MIN_RECORDS - 1, BLOCK_MIN_RECORDS, 70])  # below the block size: one by one
            steps = list(range(step, step + count))
            tags = rng.choice([TAGS[:2], ("loss",)])
            rows = _rows(rng, count, len(tags))
            walls = [1e9 + s for s in steps]
            batch.add_rows(tags, rows, steps, walls)
            events += [(tags, row, s, w) for row, s, w in zip(rows, steps, walls)]
            step += count
    assert _framed(batch, len(events)) == protobuf_records(events)


def test_tensorboard_reads_batches_of_one_tag_as_it_reads_add_scalar(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.normal(size=1000) * 1e3
    walls = 1.7e9 + np.arange(1000) * 0.25
    with SummaryWriter(tmp_path / "rows") as writer:
        for start in range(0, 1000, 64):
            writer.add_scalar_rows(("train/loss",), values[start:start + 64, None],
                                   [np.int64(step) for step in range(start, min(start + 64, 1000))],
                                   walls[start:start + 64].tolist())
    with SummaryWriter(tmp_path / "scalar") as writer:
        for step in range(1000):
            writer.add_scalar("train/loss", float(values[step]), step, walltime=float(walls[step]))
    read = {}
    for run in ("rows", "scalar"):
        accumulator = EventAccumulator(str(tmp_path / run), size_guidance={"scalars": 0})
        accumulator.Reload()
        read[run] = [(event.wall_time, event.step, event.value) for event in accumulator.Scalars("train/loss")]
    assert read["rows"] == read["scalar"]
    assert [step for _, step, _ in read["rows"]] == list(range(1000))
    np.testing.assert_array_equal([value for _, _, value in read["rows"]], values.astype(np.float32))
    assert _records_of(tmp_path / "rows") == _records_of(tmp_path / "scalar")


def test_a_file_cut_inside_a_block_keeps_every_whole_record(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_scalar_rows(("loss",), [[float(i)] for i in range(500)], list(range(500)))
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


def _records_of(log_dir: object) -> bytes:
    """The file's bytes after its file-version record."""
    data = open(_event_file(log_dir), "rb").read()
    return data[12 + int.from_bytes(data[:8], "little") + 4:]
