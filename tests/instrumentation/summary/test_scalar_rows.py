"""add_scalar_rows: one Event per row holding a value per tag, read back by our reader and by TensorBoard as
add_scalar per value reads; checked on the calling thread."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scalar_oracle import protobuf_event
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from instrumentation import SummaryWriter
from instrumentation.format.records import iter_records
from event_helpers import event_files, read_run


def _records(run_dir) -> list[bytes]:
    """The raw event records after the file-version event."""
    return list(iter_records(event_files(run_dir)[0]))[1:]


def test_a_row_is_one_event_that_reads_as_add_scalar_per_tag(tmp_path):
    values = {"grad_norm/0.weight": 0.5, "act/1/dead_fraction": np.float32(0.25), "perf/n": 3, "odd": math.nan}
    tags = tuple(values)
    with SummaryWriter(tmp_path / "rows") as writer:
        for step in range(1, 4):
            writer.add_scalar_rows(tags, [list(values.values())], [step], [100.0 + step])
    with SummaryWriter(tmp_path / "single") as writer:
        for step in range(1, 4):
            for tag, value in values.items():
                writer.add_scalar(tag, value, step, walltime=100.0 + step)
    records = _records(tmp_path / "rows")
    assert records == [protobuf_event(tags, [float(v) for v in values.values()], step, 100.0 + step)
                       for step in range(1, 4)]
    assert len(_records(tmp_path / "single")) == 3 * len(values)
    rows_events, single_events = read_run(tmp_path / "rows"), read_run(tmp_path / "single")
    assert [len(e.values) for e in rows_events if e.values] == [len(values)] * 3
    as_points = lambda events: [(v.tag, v.step, v.wall_time, v.value) for e in events for v in e.values]  # noqa: E731
    assert repr(as_points(rows_events)) == repr(as_points(single_events))  # repr: NaN == NaN
    for run in ("rows", "single"):
        accumulator = EventAccumulator(str(tmp_path / run), size_guidance={"scalars": 0})
        accumulator.Reload()
        points = [(s.step, s.value) for s in accumulator.Scalars("act/1/dead_fraction")]
        assert points == [(s, 0.25) for s in range(1, 4)]
        assert sorted(accumulator.Tags()["scalars"]) == sorted(values)


def test_many_rows_read_columnar_like_add_scalar(tmp_path):
    """Long runs take the reader's columnar path: multi-value events spread into a row per value."""
    from instrumentation.format.reader import EventFileReader
    rng = np.random.default_rng(0)
    tags = tuple(f"t{i}" for i in range(7))
    with SummaryWriter(tmp_path / "rows") as writer, SummaryWriter(tmp_path / "single") as single:
        for step in range(1, 2001):
            row = rng.normal(size=len(tags)).tolist()
            writer.add_scalar_rows(tags, [row], [step], [1e9 + step])
            for tag, value in zip(tags, row):
                single.add_scalar(tag, value, step, walltime=1e9 + step)
    batches = [EventFileReader(event_files(tmp_path / run)[0]).read_columns() for run in ("rows", "single")]
    assert len(batches[0]) == len(batches[1]) == 2000 * len(tags)
    assert batches[0].tags == batches[1].tags
    for name in ("steps", "wall_times", "values"):
        np.testing.assert_array_equal(getattr(batches[0], name), getattr(batches[1], name))
    events = EventFileReader(event_files(tmp_path / "rows")[0]).read()
    assert [len(e.values) for e in events if e.values] == [len(tags)] * 2000


def test_rows_as_lists_or_an_array_write_the_same_bytes_and_are_copied(tmp_path):
    tags = ("mem/cpu/allocated_bytes", "mem/cpu/peak_bytes", "odd")
    rows = [[float(step), 2.0 * step, np.float32(0.5)] for step in range(1, 40)]
    array = np.array(rows, dtype=np.float32)
    with SummaryWriter(tmp_path / "lists", flush_secs=60) as writer:
        writer.add_scalar_rows(tags, rows[:1], [1], [51.0])
        writer.add_scalar_rows(tags, rows[1:], [2, np.int64(3), *range(4, 40)], [50.0 + s for s in range(2, 40)])
        rows[1][0] = -1.0  # the writer copied them
    with SummaryWriter(tmp_path / "array", flush_secs=60) as writer:
        writer.add_scalar_rows(tags, array[:1], [1], [51.0])
        writer.add_scalar_rows(tags, array[1:], list(range(2, 40)), [50.0 + s for s in range(2, 40)])
        array[1, 0] = -1.0
    with SummaryWriter(tmp_path / "single") as writer:
        for step in range(1, 40):
            for tag, value in zip(tags, [float(step), 2.0 * step, 0.5]):
                writer.add_scalar(tag, value, step, walltime=50.0 + step)
    assert _records(tmp_path / "lists") == _records(tmp_path / "array") == [
        protobuf_event(tags, [float(step), 2.0 * step, 0.5], step, 50.0 + step) for step in range(1, 40)]
    as_points = lambda run: [(v.tag, v.step, v.value) for e in read_run(tmp_path / run) for v in e.values]  # noqa: E731
    assert as_points("lists") == as_points("single")


def test_add_scalar_rows_checks_naming_what_is_wrong(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="tuple of str"):
            writer.add_scalar_rows(["a"], [[1.0]], [0])
        with pytest.raises(ValueError, match="a row of 2 values for 1 tags"):
            writer.add_scalar_rows(("a",), [[1.0, 2.0]], [0])
        with pytest.raises(ValueError, match="a row of 1 values for 0 tags"):
            writer.add_scalar_rows((), [[1.0]], [0])
        with pytest.raises(ValueError, match="a row of 0 values for 1 tags"):
            writer.add_scalar_rows(("a",), [[1.0], []], [0, 1])
        with pytest.raises(ValueError, match=r"rows of shape \(2,\) for 1 tags"):
            writer.add_scalar_rows(("a",), np.ones(2), [0, 1])
        with pytest.raises(ValueError, match="2 rows, 1 steps"):
            writer.add_scalar_rows(("a",), [[1.0], [2.0]], [0])
        with pytest.raises(ValueError, match="tag must be a str"):
            writer.add_scalar_rows(("a", 3), [[1.0, 2.0]], [0])
        with pytest.raises(ValueError, match="'b'"):
            writer.add_scalar_rows(("a", "b"), [[1.0, "x"]], [0])
        with pytest.raises(ValueError, match="'b'"):
            writer.add_scalar_rows(("a", "b"), np.array([[1.0, "x"]], dtype=object), [0])
        with pytest.raises(ValueError, match="global_step"):
            writer.add_scalar_rows(("a",), [[1.0]], ["x"])
        with pytest.raises(ValueError, match="int64"):
            writer.add_scalar_rows(("a",), [[1.0], [2.0]], [1, 2**63])
        writer.add_scalar_rows(("a",), [], [])  # nothing to write: no event, no error
        writer.add_scalar_rows(("a",), [[1.0]], [1])
    assert [(v.tag, v.value) for e in read_run(tmp_path) for v in e.values] == [("a", 1.0)]


def test_a_step_beyond_int64_is_refused_on_the_calling_thread(tmp_path):
    """As torch's add_scalar refuses it (protobuf cannot store it), rather than lost on the writer thread."""
    with SummaryWriter(tmp_path) as writer:
        for step in (2**63, -(2**63) - 1, np.uint64(2**63)):
            with pytest.raises(ValueError, match="int64"):
                writer.add_scalar("a", 1.0, step)
            with pytest.raises(ValueError, match="int64"):
                writer.add_scalars("main", {"a": 1.0}, step)
        writer.add_scalar("a", 2.0, 2**63 - 1)
        writer.add_scalar("a", 3.0, -(2**63))
    assert writer.dropped_events == 0
    assert [(v.step, v.value) for e in read_run(tmp_path) for v in e.values] == [(2**63 - 1, 2.0), (-(2**63), 3.0)]


def test_flush_callbacks_run_before_flush_and_close(tmp_path, caplog):
    writer = SummaryWriter(tmp_path, flush_secs=60)
    calls = []

    def late_source():
        calls.append("source")
        writer.add_scalar("late", 1.0, len(calls))

    def broken():
        raise RuntimeError("boom")

    writer.add_flush_callback(late_source)
    writer.add_flush_callback(broken)
    writer.flush()
    assert [v.tag for e in read_run(tmp_path) for v in e.values] == ["late"]  # handed over before the flush
    writer.flush()
    writer.remove_flush_callback(broken)
    writer.close()
    assert calls == ["source"] * 3
    assert caplog.text.count("boom") == 1
    assert [v.step for e in read_run(tmp_path) for v in e.values] == [1, 2, 3]
