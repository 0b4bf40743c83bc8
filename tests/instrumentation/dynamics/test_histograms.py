"""watch()'s histograms, bucketed on the training thread: the events TensorBoard reads are add_histogram's."""
from __future__ import annotations

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import HISTOGRAMS, EventAccumulator

from instrumentation import SummaryWriter
from instrumentation.dynamics.histograms import write_histogram

VALUES = {"normal": np.random.default_rng(0).standard_normal(8192).astype(np.float32),
          "with nan and inf": np.array([1.0, np.nan, np.inf, -2.0]), "integers": np.arange(100) % 5,
          "zeros": np.zeros(10, np.float16), "one value": np.array([3.5])}


def histograms(run_dir) -> dict:
    accumulator = EventAccumulator(str(run_dir), size_guidance={HISTOGRAMS: 0})
    accumulator.Reload()
    return {tag: accumulator.Histograms(tag)[0] for tag in accumulator.Tags()["histograms"]}


def test_write_histogram_gives_the_events_add_histogram_gives(tmp_path):
    with SummaryWriter(tmp_path / "writer") as writer:
        for step, (tag, values) in enumerate(VALUES.items()):
            writer.add_histogram(tag, values, step)
    with SummaryWriter(tmp_path / "watch") as writer:
        for step, (tag, values) in enumerate(VALUES.items()):
            write_histogram(writer, tag, values, step)
    expected, got = histograms(tmp_path / "writer"), histograms(tmp_path / "watch")
    assert sorted(got) == sorted(VALUES)
    for tag in VALUES:
        assert got[tag].step == expected[tag].step
        fields = ("min", "max", "num", "sum", "sum_squares", "bucket_limit", "bucket")
        np.testing.assert_equal([getattr(got[tag].histogram_value, f) for f in fields],
                                [getattr(expected[tag].histogram_value, f) for f in fields], tag)


def test_the_callers_array_is_left_as_it_was_and_bad_values_name_the_tag(tmp_path):
    values = np.array([3.0, 1.0, 2.0], np.float32)
    with SummaryWriter(tmp_path) as writer:
        write_histogram(writer, "w", values, 0)
        with pytest.raises(ValueError, match="'empty'"):
            write_histogram(writer, "empty", np.array([]), 0)
    assert values.tolist() == [3.0, 1.0, 2.0]  # bucketed from a copy (sorted in place)


def test_a_writer_without_add_histogram_raw_gets_add_histogram(tmp_path):
    calls = []

    class Plain:
        def add_histogram(self, tag, values, step):
            calls.append((tag, step))

    write_histogram(Plain(), "w", np.ones(3), 7)
    assert calls == [("w", 7)]
