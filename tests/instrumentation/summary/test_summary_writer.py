"""SummaryWriter round trips in tmp_path for every method, read back by our reader and by TensorBoard itself."""
from __future__ import annotations

import math
import os
import threading

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import engine
from instrumentation import SummaryWriter
from instrumentation.format import EventFileReader, HistogramValue, ScalarValue, TextValue
from instrumentation.summary.bucketing import tensorflow_edges
from event_helpers import event_files, read_run, values_of


def _accumulator(run_dir) -> EventAccumulator:
    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def test_add_scalar_round_trip_and_tensorboard_reads_every_point(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        for step in range(2000):
            writer.add_scalar("loss/train", 1.0 / (step + 1), step, walltime=1000.0 + step)
        writer.add_scalar("weird", float("nan"), 1)
        writer.add_scalar("weird", float("inf"), 2)
        writer.add_scalar("weird", np.float64(-np.inf), 3)
    ours = values_of(read_run(tmp_path), "loss/train")
    assert [(v.step, v.wall_time) for v in ours] == [(step, 1000.0 + step) for step in range(2000)]
    assert [v.value for v in ours] == [float(np.float32(1.0 / (step + 1))) for step in range(2000)]
    weird = [v.value for v in values_of(read_run(tmp_path), "weird")]
    assert math.isnan(weird[0]) and weird[1:] == [math.inf, -math.inf]
    scalars = _accumulator(tmp_path).Scalars("loss/train")
    assert [(s.step, s.value) for s in scalars] == [(v.step, v.value) for v in ours]


def test_scalar_inputs_of_every_kind(tmp_path):
    torch = pytest.importorskip("torch")
    with SummaryWriter(tmp_path) as writer:
        for step, value in enumerate([3, True, np.float32(0.5), np.array(2.5), torch.tensor(4.5),
                                      torch.tensor([6.5], requires_grad=True)]):
            writer.add_scalar("x", value, np.int64(step))
    assert [v.value for v in values_of(read_run(tmp_path), "x")] == [3.0, 1.0, 0.5, 2.5, 4.5, 6.5]


@pytest.mark.parametrize("bad", ["1.5", None, [1.0, 2.0], np.array(["a"]), object(), 1 + 2j])
def test_non_numeric_scalar_raises_on_the_calling_thread_naming_the_tag(tmp_path, bad):
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="my/tag"):
            writer.add_scalar("my/tag", bad)


@pytest.mark.parametrize("method", ["add_scalar", "add_histogram", "add_text"])
def test_non_string_tag_raises(tmp_path, method):
    argument = {"add_scalar": 1.0, "add_histogram": [1.0], "add_text": "t"}[method]
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="tag must be a str"):
            getattr(writer, method)(7, argument)


def test_add_scalars_writes_one_sub_run_per_key(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        for step in range(5):
            writer.add_scalars("run/loss", {"train": step, "valid": -step}, step)
    for key, sign in (("train", 1), ("valid", -1)):
        run = tmp_path / f"run_loss_{key}"
        assert [(v.step, v.value) for v in values_of(read_run(run), "run/loss")] == [(s, sign * s) for s in range(5)]
        assert len(_accumulator(run).Scalars("run/loss")) == 5


def test_add_histogram_matches_numpy_and_tensorboard(tmp_path):
    rng = np.random.default_rng(1)
    data = rng.normal(size=10_000).astype(np.float32)
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("w", data, 7)
        writer.add_histogram("w30", list(data[:100].astype(float)), 8, bins=30)
    (histogram,) = values_of(read_run(tmp_path), "w")
    reference, _ = np.histogram(data.astype(np.float64), bins=tensorflow_edges())
    nonzero = np.flatnonzero(reference)
    np.testing.assert_array_equal(histogram.counts, reference[nonzero[0]:nonzero[-1] + 1])
    assert histogram.edges[0] == data.min() and histogram.max == data.max() and histogram.num == data.size
    assert histogram.sum == pytest.approx(float(data.astype(np.float64).sum()))
    assert histogram.sum_squares == pytest.approx(float(np.dot(data.astype(np.float64), data.astype(np.float64))))
    (histogram30,) = values_of(read_run(tmp_path), "w30")
    counts30, edges30 = np.histogram(data[:100].astype(float), bins=30)
    np.testing.assert_array_equal(histogram30.counts, counts30)
    np.testing.assert_allclose(histogram30.edges[1:], edges30[1:])
    tb_histogram = _accumulator(tmp_path).Histograms("w")[0]
    assert tb_histogram.step == 7 and tb_histogram.histogram_value.num == data.size
    assert list(tb_histogram.histogram_value.bucket) == list(histogram.counts)


def test_add_histogram_copies_the_array_before_returning(tmp_path):
    data = np.ones(1000)
    with SummaryWriter(tmp_path, flush_secs=60) as writer:
        writer.add_histogram("h", data, 0)
        data[:] = 5.0  # the caller reuses its buffer at once
    (histogram,) = values_of(read_run(tmp_path), "h")
    assert histogram.min == histogram.max == 1.0


def test_add_histogram_of_torch_and_engine_tensors(tmp_path):
    torch = pytest.importorskip("torch")
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("torch", torch.arange(10.0, requires_grad=True), 0)
        writer.add_histogram("bf16", torch.arange(4.0).to(torch.bfloat16), 0)
    assert values_of(read_run(tmp_path), "torch")[0].sum == 45.0
    assert values_of(read_run(tmp_path), "bf16")[0].num == 4


def test_add_histogram_of_an_engine_tensor(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("engine", engine.tensor(np.arange(6.0)), 0)
        writer.add_scalar("engine_scalar", engine.tensor(np.array(2.5)), 0)
    assert values_of(read_run(tmp_path), "engine")[0].sum == 15.0
    assert values_of(read_run(tmp_path), "engine_scalar")[0].value == 2.5


@pytest.mark.parametrize("bad", [[], np.zeros((3, 0)), ["a", "b"], np.array([1 + 1j]), "text"])
def test_bad_histogram_raises_naming_the_tag(tmp_path, bad):
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="grad/w"):
            writer.add_histogram("grad/w", bad)


def test_histogram_with_non_finite_values_shows_them_in_its_moments(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram("h", np.array([1.0, np.nan, 2.0, np.inf]), 0)
        writer.add_histogram("inf", np.array([1.0, np.inf]), 0)
    (histogram,) = values_of(read_run(tmp_path), "h")
    assert math.isnan(histogram.min) and math.isnan(histogram.sum) and histogram.num == 4
    assert histogram.counts.sum() == 2  # the finite values are bucketed
    (with_inf,) = values_of(read_run(tmp_path), "inf")
    assert with_inf.max == math.inf and with_inf.min == 1.0


def test_add_histogram_raw_round_trip(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_histogram_raw("raw", min=0.0, max=3.0, num=6, sum=9.0, sum_squares=17.0,
                                 bucket_limits=[1.0, 2.0, 3.0], bucket_counts=[1, 2, 3], global_step=4)
        with pytest.raises(ValueError, match="raw"):
            writer.add_histogram_raw("raw", 0, 1, 1, 1, 1, [1.0, 2.0], [1.0])
    (histogram,) = values_of(read_run(tmp_path), "raw")
    assert isinstance(histogram, HistogramValue) and histogram.step == 4
    np.testing.assert_array_equal(histogram.edges, [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(histogram.counts, [1, 2, 3])
    assert list(_accumulator(tmp_path).Histograms("raw")[0].histogram_value.bucket_limit) == [1.0, 2.0, 3.0]


def test_add_text_round_trip_and_tensorboard_reads_it(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        writer.add_text("notes", "first **bold**", 1)
        writer.add_text("notes", "second ünïcode", 2)
        with pytest.raises(ValueError, match="notes"):
            writer.add_text("notes", 5)
    texts = values_of(read_run(tmp_path), "notes/text_summary")
    assert texts == [TextValue("notes/text_summary", 1, texts[0].wall_time, "first **bold**"),
                     TextValue("notes/text_summary", 2, texts[1].wall_time, "second ünïcode")]
    tensors = _accumulator(tmp_path).Tensors("notes/text_summary")
    assert [t.tensor_proto.string_val[0].decode() for t in tensors] == ["first **bold**", "second ünïcode"]


def test_purge_step_writes_a_session_start(tmp_path):
    with SummaryWriter(tmp_path, purge_step=50) as writer:
        writer.add_scalar("x", 1.0, 50)
    events = read_run(tmp_path)
    assert [(e.step, e.session_status) for e in events if e.session_status] == [(50, "START")]


def test_default_log_dir_is_under_logs_with_comment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with SummaryWriter(comment="_lr0.1") as writer:
        writer.add_scalar("x", 1.0)
    assert writer.log_dir.startswith("logs" + os.sep) and writer.log_dir.endswith("_lr0.1")
    assert len(event_files(tmp_path / writer.log_dir)) == 1


def test_file_exists_at_construction_and_flush_makes_events_readable(tmp_path):
    writer = SummaryWriter(tmp_path, flush_secs=3600, max_queue=10**6)
    (path,) = event_files(tmp_path)
    reader = EventFileReader(path)
    assert [event.file_version for event in reader.read()] == ["brain.Event:2"]
    writer.add_scalar("x", 1.0, 1)
    writer.flush()
    assert [event.step for event in reader.read()] == [1]
    writer.close()
    writer.close()  # idempotent


def test_append_while_reading_in_two_threads(tmp_path):
    total = 20_000
    writer = SummaryWriter(tmp_path, flush_secs=0.01, max_queue=64)
    (path,) = event_files(tmp_path)
    reader = EventFileReader(path)
    seen: list[ScalarValue] = []
    done = threading.Event()

    def read_until_done() -> None:
        while not done.is_set() or len(seen) < total:
            seen.extend(v for event in reader.read() for v in event.values)

    thread = threading.Thread(target=read_until_done)
    thread.start()
    for step in range(total):
        writer.add_scalar("x", step, step)
    writer.close()
    done.set()
    thread.join()
    assert [v.step for v in seen] == list(range(total)) and reader.corrupt_records == 0
