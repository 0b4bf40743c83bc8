"""How watch() samples: on a step it does not sample it is one recorder method (step_end) and nothing else — no
optimizer hook points, no forward hooks; the steps it samples are armed the step before (sampler and forward
hooks), disarmed after; a held condition short of its patience is confirmed at the next steps."""
from __future__ import annotations

from typing import Any

import numpy as np

import engine
from engine import hooks
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader

from dynamics_helpers import mlp, read_scalars


def run(tmp_path, steps: int, on_step=None, **options: Any) -> tuple[Any, list[dict[str, Any]]]:
    """A hand-written loop; per step, what the engine and the model held for the watch while the step ran."""
    rng = np.random.default_rng(0)
    engine.manual_seed(0)
    model = mlp(16)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = rng.standard_normal((32, 64)).astype(np.float32), rng.integers(0, 10, 32)
    seen: list[dict[str, Any]] = []
    hooks.reset_step(0)
    options = {"memory": False, "capture_requests": False, **options}
    with SummaryWriter(tmp_path) as writer, watch(model, writer, optimizer=optimizer, **options) as handle:
        for step in range(steps):
            if on_step is not None:
                on_step(step, model, handle)
            hooks.mark_step_begin()
            seen.append({"step": hooks.current_step(), "recorders": [type(r).__name__ for r in hooks.recorders],
                         "forward_hooks": sum(len(m._forward_hooks) for m in model.modules()),
                         "optimizer_observed": hooks.optimizer_observed})
            optimizer.zero_grad()
            loss = F.cross_entropy(model(engine.tensor(x)), engine.tensor(y))
            loss.backward()
            optimizer.step()
            handle.log_loss(loss.item())
    return handle, seen


def test_an_unsampled_step_holds_only_the_step_end_recorder(tmp_path):
    handle, seen = run(tmp_path, 40, every=10)
    sampled = [s["step"] for s in seen if s["forward_hooks"]]
    assert sampled == [0, 10, 20, 30]
    for s in seen:
        if s["step"] % 10:
            assert s["recorders"] == ["Watch"] and not s["optimizer_observed"], s
        else:  # armed at the end of the step before
            assert s["recorders"] == ["Watch", "_Sampler"] and s["optimizer_observed"], s
            assert s["forward_hooks"] == 4  # three watched layers and the batch-size hook on the model
    scalars = read_scalars(tmp_path)
    assert sorted(scalars["update_ratio/0.weight"]) == sorted(scalars["act/1/dead_fraction"]) == [0, 10, 20, 30]
    assert sorted(scalars["grad_norm/0.weight"]) == [0, 10, 20, 30, 39]  # + close(): the gradients the last step left
    assert sorted(scalars["train/loss"]) == list(range(40))  # the loss: every step
    assert sorted(scalars["perf/step_time_ms"]) == [0, 10, 20, 30]


def test_every_one_keeps_the_sampler_armed(tmp_path):
    handle, seen = run(tmp_path, 12, every=1)
    assert all(s["recorders"] == ["Watch", "_Sampler"] and s["forward_hooks"] == 4 for s in seen)
    assert sorted(read_scalars(tmp_path)["grad_norm/0.weight"]) == list(range(12))


def test_a_held_condition_is_confirmed_at_the_next_steps_not_the_next_checks(tmp_path):
    """Dead units planted after the warm-up: once a check sees them, every step is checked until the episode
    reaches its patience (10 checks): the alert comes 9 steps after the first check, whatever the interval."""
    def kill_layer_0(step: int, model: Any, handle: Any) -> None:
        if step == 100:
            with engine.no_grad():
                model[0].bias.data[...] = -50.0

    handle, seen = run(tmp_path, 400, on_step=kill_layer_0, budget=0.05)
    alerts = [a for a in AlertReader(tmp_path / ALERTS_RELPATH).read() if a.kind == "dead_units"]
    assert alerts and alerts[0].subject == "1"
    first = alerts[0].evidence["first_step"]
    assert first >= 100 and alerts[0].step == first + 9
    scalars = read_scalars(tmp_path)
    assert set(range(first, first + 10)) <= set(scalars["act/1/dead_fraction"])  # ten checks in a row
    in_effect = [k for step, k in sorted(scalars["perf/interval/watch"].items()) if step < 100][-1]
    assert in_effect > 1  # the pathology was planted while the budget thinned the checks


def pausing(pause_at: int, resume_at: int) -> Any:
    """An ``on_step`` that pauses the watch before step ``pause_at`` (twice: idempotent) and resumes it before
    ``resume_at``."""
    def on_step(step: int, model: Any, handle: Any) -> None:
        if step == pause_at:
            handle.pause()
            handle.pause()
        if step == resume_at:
            handle.resume()
    return on_step


def test_a_paused_watch_leaves_the_engine_and_resumes_at_the_next_due_step(tmp_path):
    """pause() takes every recorder, sampler and forward hook out (the memory tracker pauses too) and the
    statistics of the paused steps are not written; resume() samples the next due step again."""
    handle, seen = run(tmp_path, 30, on_step=pausing(10, 20), every=5, check_numerics=True, memory=True)
    held = {s["step"]: (tuple(s["recorders"]), s["forward_hooks"]) for s in seen}
    # the tracker's peak catcher stays armed (it is called only at a new all-time high)
    assert all(held[step] == (("_PeakCatcher",), 0) for step in range(10, 20)), held
    assert "Watch" in held[9][0] and "MemoryTracker" in held[9][0] and "NumericsObserver" in held[9][0]
    assert held[20][1] == 4 and "Watch" in held[20][0] and "MemoryTracker" in held[20][0]  # step 20 is due
    assert held[21][1] == 0 and "Watch" in held[21][0]
    scalars = read_scalars(tmp_path)
    assert sorted(scalars["grad_norm/0.weight"]) == [0, 5, 20, 25, 29]  # 29: the gradients at close()
    assert sorted(scalars["train/loss"]) == list(range(30))  # log_loss logs what it is given, paused or not
    memory_steps = sorted(scalars["mem/cpu/allocated_bytes"])
    assert memory_steps and not [s for s in memory_steps if 10 <= s < 20]
    assert handle.closed and not hooks.recorders


def test_resuming_between_due_steps_arms_the_step_before_the_next_due_one(tmp_path):
    handle, seen = run(tmp_path, 40, on_step=pausing(3, 13), every=10)
    assert [s["step"] for s in seen if s["forward_hooks"]] == [0, 20, 30]
    assert sorted(read_scalars(tmp_path)["update_ratio/0.weight"]) == [0, 20, 30]
    assert sorted(read_scalars(tmp_path)["grad_norm/0.weight"]) == [0, 20, 30, 39]  # 39: at close()


def test_a_spike_between_steps_gets_the_next_steps_statistics_even_if_it_is_armed_for_histograms_only(tmp_path):
    """The next step may already be armed for its histograms alone (the two pacers' intervals differ): a loss spike
    logged between steps must still get that step's statistics (the evidence of what goes wrong)."""
    spikes: list[int] = []

    def on_step(step: int, model: Any, handle: Any) -> None:
        if step == 60:  # past the warm-up: statistics rare, histograms at every step (the pacers decide no more)
            for pace, interval in ((handle._pace, 1000), (handle._histogram_pace, 1)):
                pace.interval, pace.record = interval, lambda *args, **kwargs: False
            handle._wake_step = min(handle._wake_step, step)  # this step's end arms the next by these intervals
        if step == 64:  # between steps 63 and 64: step 64 is armed (histograms), not for statistics
            assert handle._armed_step == 64 and handle._stats_step == -1
            handle.log_loss(1e6, 63)
            spikes.append(step)

    handle, seen = run(tmp_path, 66, on_step=on_step, budget=0.05, histograms_every=1)
    assert spikes == [64] and [a.kind for a in handle.alerts] == ["loss_spike"]
    scalars = read_scalars(tmp_path)
    assert 64 in scalars["grad_norm/0.weight"] and 65 in scalars["grad_norm/0.weight"]  # the burst's steps


def test_a_spike_logged_while_paused_is_reported_and_arms_nothing(tmp_path):
    pause = pausing(10, 20)

    def on_step(step: int, model: Any, handle: Any) -> None:
        pause(step, model, handle)
        if step == 15:
            handle.log_loss(1e6, 14)

    handle, seen = run(tmp_path, 25, on_step=on_step, budget=0.05)
    assert [a.kind for a in handle.alerts] == ["loss_spike"]
    assert all(s["recorders"] == [] and s["forward_hooks"] == 0 for s in seen if 10 <= s["step"] < 20), seen
