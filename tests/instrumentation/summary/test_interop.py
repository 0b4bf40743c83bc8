"""Interoperability both ways: files from torch.utils.tensorboard and tensorboardX read by our reader; our hparams
records parsed by TensorBoard's HParams plugin exactly as it parses torch's."""
from __future__ import annotations

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from event_helpers import read_run, values_of
from instrumentation import SummaryWriter
from instrumentation.format import HistogramValue, PluginValue, ScalarValue

torch_tensorboard = pytest.importorskip("torch.utils.tensorboard")
tensorboardX = pytest.importorskip("tensorboardX")

WRITERS = {"torch": torch_tensorboard.SummaryWriter, "tensorboardX": tensorboardX.SummaryWriter}


@pytest.mark.parametrize("library", sorted(WRITERS))
def test_reader_reads_what_peer_writers_write(tmp_path, library):
    rng = np.random.default_rng(2)
    data = rng.normal(size=1000)
    writer = WRITERS[library](str(tmp_path))
    for step in range(300):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
    writer.add_scalar("nan", float("nan"), 1)
    writer.add_histogram("weights", data, 5)
    writer.add_text("notes", "hello from " + library, 6)
    writer.close()
    events = read_run(tmp_path)
    assert events[0].file_version == "brain.Event:2"
    losses = values_of(events, "loss")
    assert [(v.step, v.value) for v in losses] == [(s, float(np.float32(1.0 / (s + 1)))) for s in range(300)]
    assert all(isinstance(v, ScalarValue) for v in losses) and np.isnan(values_of(events, "nan")[0].value)
    (histogram,) = values_of(events, "weights")
    assert isinstance(histogram, HistogramValue) and histogram.step == 5
    assert histogram.num == 1000 and histogram.counts.sum() == 1000
    # torch and tensorboardX lead with an empty bucket whose right limit is the data's left edge: it stays, with
    # zero width, and the next bucket holds the minimum
    first = int(np.flatnonzero(histogram.counts)[0])
    assert histogram.edges[first] <= data.min() <= histogram.edges[first + 1]
    assert histogram.max == pytest.approx(data.max()) and histogram.edges[-1] == pytest.approx(data.max())
    assert len(histogram.edges) == len(histogram.counts) + 1 and np.all(np.diff(histogram.edges) >= 0)
    assert values_of(events, "notes/text_summary")[0].text == "hello from " + library


def _hparams_records(run_dir):
    from tensorboard.plugins.hparams import metadata

    accumulator = EventAccumulator(str(run_dir))
    accumulator.Reload()
    content = accumulator.PluginTagToContent(metadata.PLUGIN_NAME)  # what the HParams dashboard starts from
    return (metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG]),
            metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG]),
            metadata.parse_session_end_info_plugin_data(content[metadata.SESSION_END_INFO_TAG]),
            [(s.step, s.value) for s in accumulator.Scalars("hparam/accuracy")])


def test_hparams_are_what_tensorboard_parses_from_torch(tmp_path):
    hparam_dict = {"lr": 0.01, "batch": 32, "optimizer": "adam", "nesterov": True, "unused": None}
    metric_dict = {"hparam/accuracy": 0.75}
    with torch_tensorboard.SummaryWriter(str(tmp_path / "torch")) as writer:
        writer.add_hparams(hparam_dict, metric_dict, run_name="trial")
    with SummaryWriter(tmp_path / "ours") as writer:
        writer.add_hparams(hparam_dict, metric_dict, run_name="trial")
    theirs = _hparams_records(tmp_path / "torch" / "trial")
    ours = _hparams_records(tmp_path / "ours" / "trial")
    experiment, start, end, metric = ours
    assert [(info.name, info.type) for info in experiment.hparam_infos] == \
        [("lr", 3), ("batch", 3), ("optimizer", 1), ("nesterov", 2)]
    assert [info.name.tag for info in experiment.metric_infos] == \
        [info.name.tag for info in theirs[0].metric_infos] == ["hparam/accuracy"]
    assert dict(start.hparams) == {k: v for k, v in theirs[1].hparams.items() if k != "nesterov"} | \
        {"nesterov": start.hparams["nesterov"]}
    assert start.hparams["nesterov"].bool_value is True  # torch stores bools as 1.0 (bool is an int to it)
    assert end.status == theirs[2].status == 1
    assert metric == theirs[3] == [(0, pytest.approx(0.75))]
    hparams_values = values_of(read_run(tmp_path / "ours" / "trial"), "_hparams_/experiment")
    assert isinstance(hparams_values[0], PluginValue) and hparams_values[0].plugin_name == "hparams"


def test_bad_hparams_raise_on_the_calling_thread(tmp_path):
    with SummaryWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match="hparam"):
            writer.add_hparams({"lr": object()}, {"m": 1.0})
        with pytest.raises(ValueError, match="'m'"):
            writer.add_hparams({"lr": 0.1}, {"m": "high"})
