"""The scalar encoder against protobuf + frame_record (byte for byte) and TensorBoard's own reader."""
from __future__ import annotations

import random

import numpy as np
import pytest

from instrumentation.format.records import frame_records
from instrumentation.summary.builders import ScalarEventBuilder
from instrumentation.summary.scalar_records import ScalarRecordEncoder

TAGS = [f"grad_norm/layer{i}.weight" for i in range(12)] + ["é/ü ☃", "x" * 300, "loss"]
SPECIAL = [float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 1e-50, 0.0, -0.0, 3.4028235e38, 3.4028236e38]


def _expected(events: list[tuple[list[str], list[float], int, float]]) -> bytes:
    """Protobuf's serialization of each event (one Event holding a simple_value per tag), framed."""
    build = ScalarEventBuilder()
    return frame_records([build.many(*event) for event in events])


def _add(encoder: ScalarRecordEncoder, events: list, tags: list[str], values: list[float], step: int, wall: float):
    encoder.add_many(tags, values, step, wall)
    events.append((list(tags), list(values), step, wall))


@pytest.mark.parametrize("steps", [1, 5, 300])
def test_runs_of_steps_are_byte_identical_to_protobuf_events(steps):
    rng = random.Random(steps)
    encoder, events = ScalarRecordEncoder(), []
    for step in range(100, 100 + steps):  # crosses the 1- to 2-byte varint boundary at 128 inside the longer runs
        values = [rng.choice(SPECIAL) if rng.random() < 0.1 else rng.gauss(0, 100) for _ in TAGS]
        _add(encoder, events, TAGS, values, step, 1.7e9 + step * 0.01)
    assert len(encoder) == steps
    assert encoder.take() == _expected(events)
    assert encoder.take() == b"" and len(encoder) == 0


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("step", [0, 1, 127, 128, 16383, 16384, 2**21, 2**35, 2**62, -1, -(2**40)])
@pytest.mark.parametrize("wall", [1.7e9, 0.0, -0.0, 12.5, float("nan")])
def test_every_step_varint_length_and_wall_time_presence(rows, step, wall):
    encoder, events = ScalarRecordEncoder(), []
    for _ in range(rows):
        _add(encoder, events, TAGS[:3], [1.5, -2.0, 0.25], step, wall)
    assert encoder.take() == _expected(events)


def test_mixed_items_keep_their_order():
    rng = random.Random(1)
    encoder, events = ScalarRecordEncoder(), []
    for step in range(200):
        kind = rng.random()
        if kind < 0.6:
            _add(encoder, events, TAGS, [rng.random() for _ in TAGS], step, 1e9 + step)
        elif kind < 0.7:
            _add(encoder, events, ["a", "b", "a"], [1.0, 2.0, 3.0], step, 1e9 + step)  # a tag twice in one event
        elif kind < 0.8:
            _add(encoder, events, TAGS[::-1], [rng.choice(SPECIAL) for _ in TAGS], step, 1e9 + step)
        else:
            value = rng.random()
            encoder.add("single", value, step, 1e9 + step)
            events.append((["single"], [value], step, 1e9 + step))
    assert encoder.take() == _expected(events)


def test_a_step_beyond_int64_is_dropped_like_the_protobuf_path_drops_it():
    for rows in (3, 100):
        encoder = ScalarRecordEncoder()
        for step in range(rows):
            encoder.add_many(["a", "b"], [1.0, 2.0], step + 1, 5.0)
        encoder.add("c", 1.0, 2**64, 5.0)
        assert encoder.take() == _expected([(["a", "b"], [1.0, 2.0], step + 1, 5.0) for step in range(rows)])


def test_tensorboard_reads_the_events_of_add_scalar_dict(tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    from instrumentation import SummaryWriter
    values = np.random.default_rng(0).normal(size=(500, len(TAGS)))
    with SummaryWriter(tmp_path) as writer:
        for step in range(500):
            writer.add_scalar_dict(dict(zip(TAGS, values[step].tolist())), step)
    accumulator = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={event_accumulator.SCALARS: 0})
    accumulator.Reload()
    assert set(accumulator.Tags()["scalars"]) == set(TAGS)
    for column, tag in enumerate(TAGS):
        read = accumulator.Scalars(tag)
        assert [e.step for e in read] == list(range(500))
        np.testing.assert_array_equal([e.value for e in read], values[:, column].astype(np.float32))


def test_interleaved_tag_lists_keep_their_order():
    """What watch() writes: per step the watched scalars, the loss on its own, the memory tracker's scalars."""
    encoder, events = ScalarRecordEncoder(), []
    mem_tags = ["mem/cpu/allocated_bytes", "mem/cpu/peak_bytes"]
    for step in range(1, 300):
        _add(encoder, events, TAGS, [step * 0.5 + i for i in range(len(TAGS))], step, 1e9 + step)
        _add(encoder, events, ["train/loss"], [1.0 / step], step, 1e9 + step + 0.1)
        _add(encoder, events, list(mem_tags), [float(step), float(2 * step)], step, 1e9 + step + 0.2)
    assert encoder.take() == _expected(events)
