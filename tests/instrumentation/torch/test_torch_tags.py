"""What a torch watch() writes: the tags engine watch() writes on the same architecture, read by TensorBoard too."""
from __future__ import annotations

import numpy as np
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import engine
from event_helpers import read_run
from instrumentation import SummaryWriter, watch
from torch_helpers import DigitsCNN, batches, train

OPTIONS = {"every": 1, "histograms_every": 2, "memory": False, "capture_requests": False}


def tags_of(run) -> set[str]:
    return {value.tag for event in read_run(run) for value in event.values}


def engine_run(digits, run, steps: int) -> None:
    """engine.nn.DigitsCNN under engine watch(), on the same batches."""
    engine.hooks.reset_step(0)
    engine.manual_seed(0)
    model = engine.nn.DigitsCNN()
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with SummaryWriter(run) as writer, watch(model, writer, optimizer=optimizer, **OPTIONS) as handle:
        for x, y in batches(digits, steps):
            engine.hooks.mark_step_begin()
            optimizer.zero_grad()
            loss = engine.nn.functional.cross_entropy(model(engine.tensor(x.numpy())), engine.tensor(y.numpy()))
            loss.backward()
            optimizer.step()
            handle.log_loss(loss)


def torch_run(digits, run, steps: int) -> None:
    model = DigitsCNN()
    train(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), batches(digits, steps), run, **OPTIONS)


def test_a_torch_model_gets_the_tags_engine_watch_writes_on_the_same_architecture(digits, tmp_path):
    engine_run(digits, tmp_path / "engine", 6)
    torch_run(digits, tmp_path / "torch", 6)
    engine_tags, torch_tags = tags_of(tmp_path / "engine"), tags_of(tmp_path / "torch")
    assert {tag.split("/")[0] for tag in torch_tags} >= {"grad_norm", "update_ratio", "act", "perf", "train", "weight",
                                                        "grad"}
    assert torch_tags == engine_tags, (sorted(torch_tags - engine_tags), sorted(engine_tags - torch_tags))


def test_tensorboard_reads_every_tag_a_torch_watch_writes(digits, tmp_path):
    torch_run(digits, tmp_path / "torch", 6)
    accumulator = EventAccumulator(str(tmp_path / "torch"), size_guidance={"scalars": 0, "histograms": 0})
    accumulator.Reload()
    read = accumulator.Tags()
    events = read_run(tmp_path / "torch")
    scalar_tags = {v.tag for e in events for v in e.values if type(v).__name__ == "ScalarValue"}
    histogram_tags = {v.tag for e in events for v in e.values if type(v).__name__ == "HistogramValue"}
    assert scalar_tags and histogram_tags
    assert set(read["scalars"]) == scalar_tags
    assert set(read["histograms"]) == histogram_tags
    ours = {(e.step, v.value) for e in events for v in e.values if v.tag == "update_ratio/features.0.weight"}
    theirs = {(s.step, s.value) for s in accumulator.Scalars("update_ratio/features.0.weight")}
    assert len(theirs) == 6 and theirs == ours
    [weights] = [np.asarray(h.histogram_value.bucket).sum() for h in accumulator.Histograms("weight/classifier.weight")
                 if h.step == 0]
    assert weights == 10 * 32 * 2 * 2  # every weight counted in TensorBoard's reading of the histogram
