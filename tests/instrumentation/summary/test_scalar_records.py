"""The one scalar encoder (``scalar``/``scalar_row``) and a run's batch of them against the protobuf runtime (byte for
byte, framed) and TensorBoard's own reader."""
from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from scalar_oracle import protobuf_event, protobuf_records
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util

from instrumentation.format.metadata import event_file_name
from instrumentation.format.records import frame_records
from instrumentation.summary.builders import file_version_event
from instrumentation.summary.run_batch import RunBatch
from instrumentation.summary.scalar_records import scalar, scalar_row

TAGS = (*(f"grad_norm/layer{i}.weight" for i in range(12)), "é/ü ☃", "x" * 300, "loss")
SPECIAL = [float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 1e-50, 1e-45, 0.0, -0.0, 3.4028235e38,
           3.4028236e38]
EDGE_STEPS = [0, 1, 127, 128, 16383, 16384, 2**21, 2**35, 2**56 - 1, 2**56, 2**62, 2**63 - 1, -1, -(2**40), -(2**63)]
EDGE_WALLS = [1.7e9, 0.0, -0.0, 12.5, float("nan"), 5e-324, float("inf")]


@pytest.mark.parametrize("step", EDGE_STEPS)
@pytest.mark.parametrize("wall", EDGE_WALLS)
def test_scalar_is_the_event_protobuf_serializes(step, wall):
    for value in [1.5, -2.0, *SPECIAL]:
        assert scalar("loss", value, step, wall) == protobuf_event(["loss"], [value], step, wall)
    assert scalar_row(TAGS[:3], [1.5, -2.0, 0.25], step, wall) == protobuf_event(TAGS[:3], [1.5, -2.0, 0.25], step,
                                                                                  wall)


def test_scalar_rows_of_every_tag_kind_are_the_events_protobuf_serializes():
    rng = random.Random(0)
    for step in range(100, 400):  # crosses the 1- to 2-byte varint boundary at 128
        values = [rng.choice(SPECIAL) if rng.random() < 0.1 else rng.gauss(0, 100) for _ in TAGS]
        assert scalar_row(TAGS, values, step, 1.7e9 + step * 0.01) == protobuf_event(TAGS, values, step,
                                                                                     1.7e9 + step * 0.01)
    assert scalar_row(("a", "b", "a"), [1.0, 2.0, 3.0], 5, 1.0) == protobuf_event(["a", "b", "a"], [1.0, 2.0, 3.0],
                                                                                  5, 1.0)


def test_a_step_beyond_int64_is_refused_as_protobuf_refuses_it():
    for step in (2**63, 2**64, -(2**63) - 1):
        with pytest.raises(ValueError, match="int64"):
            scalar("a", 1.0, step, 5.0)
        with pytest.raises(ValueError):
            protobuf_event(["a"], [1.0], step, 5.0)


def test_scalar_without_a_wall_time_takes_now():
    event = scalar("a", 1.0, 3)
    assert event[0] == 0x09 and struct.unpack("<d", event[1:9])[0] > 1.7e9


def test_tensorboard_reads_the_encoder_s_events(tmp_path):
    """Our bytes through TensorBoard's own loader and accumulator: every value, step and wall time as written."""
    rng = random.Random(1)
    events = []
    for step in range(1, 301):
        events.append(("single", [rng.gauss(0, 1)], step, 1.7e9 + step))
        events.append((TAGS[:4], [rng.choice(SPECIAL[3:]) for _ in range(4)], step, 1.7e9 + step + 0.5))
    path = tmp_path / event_file_name(0, "")
    path.write_bytes(frame_records([file_version_event(1.7e9)] + [
        scalar(tags, *values, step, wall) if tags == "single" else scalar_row(tags, values, step, wall)
        for tags, values, step, wall in events]))
    loaded = list(EventFileLoader(str(path)).Load())
    assert loaded[0].file_version == "brain.Event:2"
    # NOTE: the loader migrates simple_value to TensorBoard 2's form: a float tensor with plugin "scalars"
    assert {v.metadata.plugin_data.plugin_name for e in loaded[1:] for v in e.summary.value} == {"scalars"}
    read = [(tuple(v.tag for v in e.summary.value),
             [tensor_util.make_ndarray(v.tensor).item() for v in e.summary.value], e.step, e.wall_time)
            for e in loaded[1:]]
    with np.errstate(over="ignore"):  # beyond float32: inf, as protobuf stores it
        expected = [(("single",) if tags == "single" else tags, np.float32(values).tolist(), step, wall)
                    for tags, values, step, wall in events]
    assert read == expected
    accumulator = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    accumulator.Reload()
    assert sorted(accumulator.Tags()["scalars"]) == sorted(["single", *TAGS[:4]])
    assert [s.step for s in accumulator.Scalars(TAGS[3])] == list(range(1, 301))


def _run_batch(items: list[tuple]) -> tuple[bytes, int]:
    """Items as the writer thread adds them to a run's batch: ("one", tag, value, step, wall) or ("rows", ...)."""
    batch = RunBatch()
    for kind, *fields in items:
        if kind == "one":
            batch.bodies.append(scalar(*fields))
        else:
            batch.add_rows(*fields)
    return batch.framed()


def test_a_batch_keeps_the_order_of_single_events_and_rows():
    rng = random.Random(1)
    items, events = [], []
    for step in range(200):
        kind = rng.random()
        if kind < 0.6:
            values = [rng.random() for _ in TAGS]
            items.append(("rows", TAGS, [values], [step], [1e9 + step]))
            events.append((TAGS, values, step, 1e9 + step))
        elif kind < 0.8:
            values = [rng.choice(SPECIAL) for _ in TAGS]
            items.append(("rows", TAGS[::-1], np.array([values]), [step], [1e9 + step]))
            events.append((TAGS[::-1], values, step, 1e9 + step))
        else:
            value = rng.random()
            items.append(("one", "single", value, step, 1e9 + step))
            events.append((["single"], [value], step, 1e9 + step))
    framed, count = _run_batch(items)
    assert count == len(events) and framed == protobuf_records(events)


def test_interleaved_tag_lists_keep_their_order():
    """What watch() writes: per step the watched scalars, the loss on its own, the memory tracker's scalars."""
    items, events = [], []
    mem_tags = ("mem/cpu/allocated_bytes", "mem/cpu/peak_bytes")
    for step in range(1, 300):
        for tags, values, wall in [(TAGS, [step * 0.5 + i for i in range(len(TAGS))], 1e9 + step),
                                   (("train/loss",), [1.0 / step], 1e9 + step + 0.1),
                                   (mem_tags, [float(step), float(2 * step)], 1e9 + step + 0.2)]:
            items.append(("rows", tags, [values], [step], [wall]))
            events.append((tags, values, step, wall))
    framed, count = _run_batch(items)
    assert count == len(events) and framed == protobuf_records(events)
