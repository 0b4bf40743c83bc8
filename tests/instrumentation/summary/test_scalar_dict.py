"""add_scalar_dict: the same events as add_scalar per key, read back by our reader and by TensorBoard."""
from __future__ import annotations

import math

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from instrumentation import SummaryWriter
from instrumentation.format.records import iter_records
from event_helpers import event_files, read_run


def _records(run_dir) -> list[bytes]:
    """The raw event records after the file-version event."""
    return list(iter_records(event_files(run_dir)[0]))[1:]


def test_add_scalar_dict_writes_exactly_what_add_scalar_writes(tmp_path):
    values = {"grad_norm/0.weight": 0.5, "act/1/dead_fraction": np.float32(0.25), "perf/n": 3, "odd": math.nan}
    with SummaryWriter(tmp_path / "dict") as writer:
        for step in range(3):
            writer.add_scalar_dict(values, step, walltime=100.0 + step)
    with SummaryWriter(tmp_path / "single") as writer:
        for step in range(3):
            for tag, value in values.items():
                writer.add_scalar(tag, value, step, walltime=100.0 + step)
    assert _records(tmp_path / "dict") == _records(tmp_path / "single")
    events = read_run(tmp_path / "dict")
    assert [(e.step, v.tag) for e in events for v in e.values] == [(s, t) for s in range(3) for t in values]
    accumulator = EventAccumulator(str(tmp_path / "dict"), size_guidance={"scalars": 0})
    accumulator.Reload()
    assert [(s.step, s.value) for s in accumulator.Scalars("act/1/dead_fraction")] == [(s, 0.25) for s in range(3)]


def test_add_scalar_dict_checks_on_the_calling_thread_naming_the_tag(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="'bad'"):
            writer.add_scalar_dict({"good": 1.0, "bad": "x"}, 0)
        with pytest.raises(ValueError, match="tag must be a str"):
            writer.add_scalar_dict({3: 1.0}, 0)
        with pytest.raises(ValueError, match="dict of tag"):
            writer.add_scalar_dict([("a", 1.0)], 0)
        with pytest.raises(ValueError, match="global_step"):
            writer.add_scalar_dict({"a": 1.0}, "x")
        writer.add_scalar_dict({}, 0)
    assert read_run(tmp_path) == [] or all(not e.values for e in read_run(tmp_path))


def test_caller_may_change_its_dict_after_the_call(tmp_path):
    values = {"a": 1.0}
    with SummaryWriter(tmp_path, flush_secs=60) as writer:
        writer.add_scalar_dict(values, 0)
        values["a"] = 2.0
        values["b"] = 3.0
    assert [(v.tag, v.value) for e in read_run(tmp_path) for v in e.values] == [("a", 1.0)]
