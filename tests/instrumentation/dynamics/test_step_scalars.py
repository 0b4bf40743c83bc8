"""watch() hands a step's scalars to the writer in one call: same tags, steps and values as one add_scalar each."""
from __future__ import annotations

import numpy as np

import engine
from engine import hooks
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.dynamics.step_scalars import StepScalars
from dynamics_helpers import mlp


class ScalarLog:
    """A writer with add_scalar only (what watch accepts from any duck-typed writer)."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.calls: list[tuple[str, float, int]] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.calls.append((tag, value, step))

    def add_histogram(self, *args, **kwargs) -> None:
        pass


class RowsLog(ScalarLog):
    def __init__(self, log_dir: str) -> None:
        super().__init__(log_dir)
        self.batches: list[tuple[list, int]] = []  # ([(tag, value), ...], step) per row

    def add_scalar_rows(self, tags: tuple, rows, steps, walltimes=None) -> None:
        assert tags.__class__ is tuple
        for row, step in zip(rows, steps):
            self.batches.append(([(tag, float(value)) for tag, value in zip(tags, row)], step))
            self.calls.extend((tag, float(value), step) for tag, value in zip(tags, row))


def test_one_call_per_step_and_a_new_step_flushes_the_last(tmp_path):
    log = RowsLog(str(tmp_path))
    scalars = StepScalars(log)
    scalars.add("a", 1.0, 0)
    scalars.add("b", 2.0, 0)
    scalars.add("a", 3.0, 1)  # a new step: step 0 goes out first
    assert log.batches == [([("a", 1.0), ("b", 2.0)], 0)]
    scalars.flush()
    scalars.flush()
    assert log.batches == [([("a", 1.0), ("b", 2.0)], 0), ([("a", 3.0)], 1)]


def test_a_repeated_tag_stays_in_the_row_and_a_plain_writer_gets_one_add_scalar_per_value(tmp_path):
    log = RowsLog(str(tmp_path))
    scalars = StepScalars(log)
    for value in (1.0, 2.0):  # a layer called twice in one step: two points at step 4, as add_scalar gives
        scalars.add("act/0/mean_abs", value, 4)
    scalars.flush()
    assert log.batches == [([("act/0/mean_abs", 1.0), ("act/0/mean_abs", 2.0)], 4)]
    assert log.calls == [("act/0/mean_abs", 1.0, 4), ("act/0/mean_abs", 2.0, 4)]
    plain = ScalarLog(str(tmp_path))
    scalars = StepScalars(plain)
    scalars.add("x", 1.0, 0)
    scalars.flush()
    assert plain.calls == [("x", 1.0, 0)]


def _train(writer, steps: int = 6) -> list:
    engine.manual_seed(0)
    hooks.reset_step(0)
    model = mlp()
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    (x, y), _ = engine.datasets.load_digits(seed=0)
    handle = watch(model, writer, optimizer=optimizer, memory=False, capture_requests=False)  # RSS varies
    try:
        for step in range(steps):
            hooks.mark_step_begin()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(engine.tensor(x[step * 32:(step + 1) * 32])),
                                   engine.tensor(y[step * 32:(step + 1) * 32]))
            loss.backward()
            optimizer.step()
            handle.log_loss(loss.item())
    finally:
        handle.close()
    return handle


def test_watch_writes_the_same_scalars_through_either_writer_path(tmp_path):
    plain, batched = ScalarLog(str(tmp_path / "plain")), RowsLog(str(tmp_path / "batched"))
    _train(plain)
    _train(batched)
    # one row per step (step 0's scalars also before its histograms); the losses in one batch at close()
    is_loss = lambda row: row[0][0] == "train/loss"  # noqa: E731
    assert [step for row, step in batched.batches if not is_loss(row)] == [0, 0, 1, 2, 3, 4, 5]
    assert [step for row, step in batched.batches if is_loss(row)] == [0, 1, 2, 3, 4, 5]
    drop_timing = lambda calls: [(t, v, s) for t, v, s in calls if not t.startswith("perf/")]  # noqa: E731
    assert drop_timing(batched.calls) == drop_timing(plain.calls)
    tags = {tag for tag, _, _ in plain.calls}
    assert {"grad_norm/0.weight", "update_ratio/2.bias", "act/1/dead_fraction", "train/learning_rate",
            "train/loss", "perf/step_time_ms"} <= tags
    with SummaryWriter(tmp_path / "real") as writer:
        _train(writer)
    from event_helpers import read_run
    written = [(v.tag, e.step) for e in read_run(tmp_path / "real") for v in e.values]
    histograms = [i for i, (tag, _) in enumerate(written) if tag.startswith(("weight/", "grad/"))]
    assert written[histograms[0] - 1] == ("train/learning_rate", 0)  # after step 0's scalars
    assert sorted({written[i][1] for i in histograms}) == [0, 5] and len(histograms) == 16  # 5: the last, at close()
    # the same points; the losses go in batches of steps (one add_scalar_rows) with the real writer
    not_loss = lambda pairs: [pair for pair in pairs if pair[0] != "train/loss"]  # noqa: E731
    in_file = [pair for i, pair in enumerate(written) if i not in histograms]
    assert not_loss([(t, s) for t, _, s in plain.calls]) == not_loss(in_file)
    assert sorted((t, s) for t, _, s in plain.calls) == sorted(in_file)
    values = {(v.tag, e.step): v.value for e in read_run(tmp_path / "real") for v in e.values if hasattr(v, "value")}
    for tag, value, step in drop_timing(plain.calls):
        assert values[(tag, step)] == np.float32(value) or np.isnan(value), (tag, step)
