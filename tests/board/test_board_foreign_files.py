"""Logs written by other tools: tensorboardX, torch.utils.tensorboard, TensorFlow 2-style tensor summaries."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from board.data.store import LogdirStore


def load(logdir: Path) -> LogdirStore:
    store = LogdirStore(logdir)
    store.refresh()
    return store


def test_tensorboardx_scalars_histograms_and_nan(tmp_path: Path) -> None:
    from tensorboardX import SummaryWriter

    data = np.random.default_rng(0).normal(size=1000)
    with SummaryWriter(str(tmp_path / "tbx")) as writer:
        for step in range(0, 50, 7):
            writer.add_scalar("loss", step * 0.5, step)
        writer.add_scalar("loss", float("nan"), 50)
        writer.add_histogram("w", data, 3)
    store = load(tmp_path)
    columns, _ = store.scalars("tbx", "loss")
    assert columns.steps.tolist() == [0, 7, 14, 21, 28, 35, 42, 49, 50]
    assert columns.values[:-1].tolist() == [s * 0.5 for s in range(0, 50, 7)] and np.isnan(columns.values[-1])
    [histogram] = store.histograms("tbx", "w")
    assert histogram.step == 3 and histogram.num == 1000
    assert histogram.min == pytest.approx(data.min()) and histogram.max == pytest.approx(data.max())
    assert float(np.sum(histogram.counts)) == 1000


def test_torch_summary_writer(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "torch" / "rank0"))
    for step in range(20):
        writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    writer.add_histogram("grad/fc.weight", torch.arange(100, dtype=torch.float32), 5)
    writer.close()
    store = load(tmp_path)
    assert [r.name for r in store.runs()] == ["torch/rank0"] and store.runs()[0].group == "torch"
    np.testing.assert_allclose(store.scalars("torch/rank0", "train/loss")[0].values, [1.0 / (s + 1) for s in range(20)],
                               rtol=1e-6)
    [histogram] = store.histograms("torch/rank0", "grad/fc.weight")
    assert (histogram.min, histogram.max, histogram.num) == (0.0, 99.0, 100.0)


def test_tensorflow2_style_tensor_scalars_and_histograms(tmp_path: Path) -> None:
    """TF2 writes scalars as rank-0 tensors and histograms as [k, 3] tensors, tagged with their plugin."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.histogram import summary_v2 as histogram_summary
    from tensorboard.plugins.scalar import summary_v2 as scalar_summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path / "tf2"))
    for step in range(5):
        summary = scalar_summary.scalar_pb("accuracy", np.float64(step / 10))
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
    values = np.linspace(-1.0, 1.0, 101)
    writer.add_event(event_pb2.Event(wall_time=time.time(), step=4,
                                     summary=histogram_summary.histogram_pb("weights", values, buckets=10)))
    writer.close()
    store = load(tmp_path)
    np.testing.assert_allclose(store.scalars("tf2", "accuracy")[0].values, [0.0, 0.1, 0.2, 0.3, 0.4])
    [histogram] = store.histograms("tf2", "weights")
    assert histogram.step == 4 and float(np.sum(histogram.counts)) == pytest.approx(101)
    assert histogram.edges[0] == pytest.approx(-1.0) and histogram.edges[-1] == pytest.approx(1.0)
