"""engine.fit's loop contract: callbacks and what they receive, history, modes, step boundaries, errors, output."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks
from engine.nn import Linear, Module
from engine.nn import functional as F
from engine.optim import SGD
from engine.training import FitState, History, StopTraining, evaluate, fit


def _batches(n_batches=3, batch_size=4, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch_size, 5)).astype("float32"), rng.integers(0, 3, batch_size))
            for _ in range(n_batches)]


class Recorder(Module):
    """A linear classifier that records its mode and the grad mode at every call."""

    def __init__(self):
        super().__init__()
        self.fc = Linear(5, 3)
        self.calls = []

    def forward(self, x):
        self.calls.append((self.training, engine.is_grad_enabled(), x.shape[0]))
        return self.fc(x)


class EventLog:
    def __init__(self):
        self.events = []

    def on_train_begin(self, state):
        self.events.append(("train_begin", state))

    def on_step_begin(self, state):
        self.events.append(("step_begin", state))

    def on_step_end(self, state):
        self.events.append(("step_end", state))

    def on_epoch_end(self, state):
        self.events.append(("epoch_end", state))

    def on_train_end(self, state):
        self.events.append(("train_end", state))


def test_callbacks_see_every_event_in_order_with_their_state():
    model = Recorder()
    optimizer = SGD(model.parameters(), lr=0.1)
    log = EventLog()
    history = fit(model, F.cross_entropy, optimizer, _batches(), epochs=2, val_data=_batches(2, seed=1),
                  callbacks=[log], verbose=False)
    names = [name for name, _ in log.events]
    per_epoch = ["step_begin", "step_end"] * 3 + ["epoch_end"]
    assert names == ["train_begin"] + per_epoch * 2 + ["train_end"]
    step_ends = [s for name, s in log.events if name == "step_end"]
    assert [s.step for s in step_ends] == list(range(6))
    assert [s.epoch for s in step_ends] == [0, 0, 0, 1, 1, 1]
    assert all(isinstance(s, FitState) and s.model is model and s.optimizer is optimizer for s in step_ends)
    assert all(s.batch_size == 4 and s.epochs == 2 for s in step_ends)
    assert [s.loss for s in step_ends] == history.step_losses
    assert all(s.logs["loss"] == s.loss and 0.0 <= s.logs["accuracy"] <= 1.0 for s in step_ends)
    assert [g2.global_step - g1.global_step for g1, g2 in zip(step_ends, step_ends[1:])] == [1] * 5
    epoch_end = [s for name, s in log.events if name == "epoch_end"]
    assert set(epoch_end[0].logs) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert epoch_end[1].logs["val_loss"] == history.val_loss[1]
    assert log.events[-1][1].logs == epoch_end[-1].logs
    with pytest.raises(AttributeError):
        step_ends[0].loss = 0.0  # frozen


def test_history_holds_sample_weighted_epoch_means():
    data = _batches(3, batch_size=4) + [_batches(1, batch_size=2, seed=9)[0]]
    model = Recorder()
    history = fit(model, F.cross_entropy, SGD(model.parameters(), lr=0.0), data, epochs=2, verbose=False)
    assert isinstance(history, History) and history.epochs == 2
    assert len(history.step_losses) == 8 and history.val_loss == [] and history.val_accuracy == []
    first = history.step_losses[:4]
    assert history.loss[0] == pytest.approx((4 * sum(first[:3]) + 2 * first[3]) / 14)
    assert history.loss[0] == pytest.approx(history.loss[1])  # lr 0: nothing changes between epochs


def test_training_in_train_mode_with_grad_and_validation_in_eval_mode_without():
    model = Recorder()
    fit(model, F.cross_entropy, SGD(model.parameters(), lr=0.1), _batches(2), epochs=1, val_data=_batches(1, seed=3),
        verbose=False)
    assert model.calls == [(True, True, 4), (True, True, 4), (False, False, 4)]
    assert model.training is True and engine.is_grad_enabled()


def test_the_model_learns():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 5)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    data = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    engine.manual_seed(0)
    model = Recorder()
    history = fit(model, F.cross_entropy, engine.optim.Adam(model.parameters(), lr=0.05), data, epochs=30,
                  verbose=False)
    assert history.loss[-1] < 0.5 * history.loss[0] and history.accuracy[-1] > 0.9


def test_each_batch_is_one_engine_step_and_waits_are_reported():
    seen = {"begin": 0, "end": 0, "waits": 0}

    class StepCounter:
        def step_begin(self, event):
            seen["begin"] += 1

        def step_end(self, event):
            seen["end"] += 1

        def data_wait(self, event):
            seen["waits"] += 1

    model = Recorder()
    before = hooks.current_step()
    observer = hooks.subscribe(StepCounter())
    try:
        fit(model, F.cross_entropy, SGD(model.parameters(), lr=0.1), _batches(3), epochs=2, verbose=False)
    finally:
        hooks.unsubscribe(observer)
    assert hooks.current_step() == before + 6
    assert seen["end"] == 6 and seen["waits"] == 6
    assert seen["begin"] >= 6  # NOTE: the fetch that finds the data exhausted opens a step too


def test_a_dataset_pipeline_feeds_fit():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((20, 5)).astype("float32"), rng.integers(0, 3, 20)
    data = engine.data.Dataset.from_tensor_slices((x, y)).shuffle(20, seed=1).batch(8)
    model = Recorder()
    history = fit(model, F.cross_entropy, SGD(model.parameters(), lr=0.1), data, epochs=2, verbose=False)
    assert len(history.step_losses) == 6 and [c[2] for c in model.calls] == [8, 8, 4] * 2


def test_a_failing_callback_ends_fit_with_its_own_error():
    class Broken:
        def on_step_end(self, state):
            raise RuntimeError("user bug in a callback")

    model = Recorder()
    with pytest.raises(RuntimeError, match="user bug in a callback"):
        fit(model, F.cross_entropy, SGD(model.parameters(), lr=0.1), _batches(), epochs=1, callbacks=[Broken()],
            verbose=False)


def test_stop_training_ends_early_and_still_calls_train_end():
    class StopAfterTwoSteps(EventLog):
        def on_step_end(self, state):
            super().on_step_end(state)
            if state.step == 1:
                raise StopTraining

    log = StopAfterTwoSteps()
    model = Recorder()
    history = fit(model, F.cross_entropy, SGD(model.parameters(), lr=0.1), _batches(), epochs=3, callbacks=[log],
                  verbose=False)
    assert len(history.step_losses) == 2 and history.loss == []
    assert log.events[-1][0] == "train_end"


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    (dict(callbacks=[object()]), TypeError, "has none of the methods"),
    (dict(metrics=("f1",)), ValueError, "unknown metric"),
    (dict(epochs=-1), ValueError, "epochs"),
    (dict(train_data=[np.ones((2, 5))]), TypeError, r"must yield \(x, y\) pairs"),
])
def test_invalid_arguments(kwargs, error, message):
    model = Recorder()
    arguments = dict(model=model, loss_fn=F.cross_entropy, optimizer=SGD(model.parameters(), lr=0.1),
                     train_data=_batches(), epochs=1, verbose=False)
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        fit(**arguments)


def test_progress_bar_goes_to_stderr_only_when_verbose(capsys):
    model = Recorder()
    fit(model, F.cross_entropy, SGD(model.parameters(), lr=0.1), _batches(), epochs=1, val_data=_batches(1),
        verbose=False)
    assert capsys.readouterr() == ("", "")
    fit(model, F.cross_entropy, SGD(model.parameters(), lr=0.1), _batches(), epochs=1, val_data=_batches(1))
    out, err = capsys.readouterr()
    assert out == "" and "epoch 1/1" in err and "val_accuracy" in err and "3/3" in err


def test_evaluate_restores_the_mode():
    model = Recorder()
    model.eval()
    result = evaluate(model, F.cross_entropy, _batches(2), metrics=())
    assert set(result) == {"loss"} and model.training is False
