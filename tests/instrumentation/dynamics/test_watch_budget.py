"""watch()'s overhead budget on real steps: the share of step time its hooks and its memory tracker take (timed
by the test around their work, as a ratio to the same run's step time), the interval, every=k, the perf/ tags,
and pathologies planted after the warm-up, found with the interval the budget picked.

A share is the median over blocks of 50 steps of (time inside the observers) / (the block's time without it): on
this shared machine a span of a few microseconds that happens to include a preemption counts milliseconds, and the
median leaves out the blocks where that happened. (CPU-time clocks cost ~2 us a call here: too dear to wrap hooks.)"""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import engine
from engine import hooks
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.budget import WARMUP_STEPS
from instrumentation.dynamics import watcher as watcher_module
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader

from dynamics_helpers import mlp, read_scalars

BUDGET = 0.05


HOOKS = ("step_end", "optimizer_step_begin", "optimizer_step_end", "log_loss", "_layer_stats")


BLOCK_STEPS = 50


class HookClock:
    """Sums, from the test's own clock, the time spent in watch()'s hook methods, in the activation statistics its
    forward hooks compute and in its memory tracker's batch processing, while ``on``; ``block()`` closes a block."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.spent_ns, self.on = 0, False
        self.shares: list[float] = []
        self._block_began = self._block_spent = 0
        for name in HOOKS:  # NOTE: on the class, before watch() subscribes its bound methods
            monkeypatch.setattr(watcher_module.Watch, name, self._timed(getattr(watcher_module.Watch, name)))

    def _timed(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter_ns()
            try:
                return function(*args, **kwargs)
            finally:
                if self.on:
                    self.spent_ns += time.perf_counter_ns() - began
        return timed

    def block(self, now_ns: int, excluded_ns: int = 0) -> None:
        """Close a block of steps at ``now_ns`` (``excluded_ns``: time in it that is no step time) and open the next."""
        if self._block_began:
            spent = self.spent_ns - self._block_spent
            self.shares.append(spent / (now_ns - self._block_began - excluded_ns - spent))
        self._block_began, self._block_spent = now_ns, self.spent_ns

    def share(self) -> float:
        return statistics.median(self.shares)

    def time_tracker(self, tracker: Any) -> None:
        tracker._steps.on_batch = self._timed(tracker._steps.on_batch)


def train_loop(digits: Any, logdir: Path, steps: int, *, sleep_s: float = 0.0, clock: HookClock | None = None,
               measure_from: int = 0, on_step: Callable[[int, Any, Any], None] | None = None,
               lr: float = 0.05, **options: Any) -> tuple[Any, float]:
    """A hand-written loop (steps opened with mark_step_begin) on the digits MLP under watch(); returns the closed
    handle and the wall time (ns) of the steps from ``measure_from`` on; the clock's blocks start there."""
    (x, y), _ = digits
    engine.manual_seed(0)
    model = mlp()
    optimizer = engine.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    batches = [(engine.tensor(x[i:i + 64]), engine.tensor(y[i:i + 64])) for i in range(0, len(x) - 64, 64)]
    hooks.reset_step(0)
    with SummaryWriter(logdir) as writer, watch(model, writer, optimizer=optimizer, **options) as handle:
        if clock is not None and handle._components:
            clock.time_tracker(handle._components[0])
        began = 0
        for step in range(steps):
            if step == measure_from:
                writer.flush()
                began = time.perf_counter_ns()
                if clock is not None:
                    clock.on = True
            if clock is not None and step >= measure_from and (step - measure_from) % BLOCK_STEPS == 0:
                clock.block(time.perf_counter_ns())
            hooks.mark_step_begin()
            xb, yb = batches[step % len(batches)]
            if sleep_s:
                time.sleep(sleep_s)
            if on_step is not None:
                on_step(step, model, optimizer)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            handle.log_loss(loss.item())
        elapsed = time.perf_counter_ns() - began
        if clock is not None:
            clock.block(time.perf_counter_ns())
        if clock is not None:
            clock.on = False
    return handle, elapsed


def test_on_a_tiny_step_the_measured_share_stays_within_the_budget(digits, tmp_path, monkeypatch):
    clock = HookClock(monkeypatch)
    handle, _ = train_loop(digits, tmp_path / "run", 1300, clock=clock, measure_from=300, budget=BUDGET)
    share = clock.share()
    assert handle.every > 1  # the statistics were thinned ...
    assert share <= BUDGET, f"watch() took {share:.1%} of a tiny step"  # ... to fit the budget


def test_on_a_20_ms_step_every_step_is_observed_within_the_budget(digits, tmp_path, monkeypatch):
    clock = HookClock(monkeypatch)
    handle, _ = train_loop(digits, tmp_path / "run", 210, sleep_s=0.02, clock=clock, measure_from=60,
                           budget=BUDGET)
    share = clock.share()
    assert share <= BUDGET, f"watch() took {share:.1%} of a 20 ms step"
    assert handle.every <= 3  # a step this long affords (nearly) every step's statistics
    scalars = read_scalars(tmp_path / "run")
    assert len(scalars["grad_norm/0.weight"]) >= 200 // 3


def test_every_overrides_the_budget(digits, tmp_path):
    handle, _ = train_loop(digits, tmp_path / "run", 120, every=3)
    assert handle.every == 3
    scalars = read_scalars(tmp_path / "run")
    assert sorted(scalars["grad_norm/0.weight"]) == list(range(0, 120, 3))
    assert set(scalars["perf/interval/watch"].values()) == {3.0}
    assert set(scalars["perf/interval/watch_histograms"].values()) == {100.0}
    assert len(scalars["train/loss"]) == 120  # the loss is never thinned


def test_the_pace_tags_are_written_and_tensorboard_reads_them(digits, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    handle, _ = train_loop(digits, tmp_path / "run", 400, budget=BUDGET)
    accumulator = EventAccumulator(str(tmp_path / "run"), size_guidance={"scalars": 0})
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    for observer in ("watch", "watch_histograms", "memory"):
        for stat in ("perf/instrumentation_ms", "perf/instrumentation_share", "perf/interval"):
            assert f"{stat}/{observer}" in tags, (stat, observer, sorted(t for t in tags if t.startswith("perf/")))
    intervals = [event.value for event in accumulator.Scalars("perf/interval/watch")]
    assert intervals[0] == 1 and intervals[-1] == handle.every > 1  # observed every step at first, then thinned
    costs = [event.value for event in accumulator.Scalars("perf/instrumentation_ms/watch")]
    assert all(cost > 0 for cost in costs)
    grad_steps = [event.step for event in accumulator.Scalars("grad_norm/0.weight")]
    assert grad_steps[:WARMUP_STEPS] == list(range(WARMUP_STEPS))  # the warm-up observes every step
    assert len(grad_steps) < 400 // 2


def test_intervals_logged_by_the_watch_settle_within_200_steps(digits, tmp_path):
    train_loop(digits, tmp_path / "run", 700, budget=BUDGET)
    intervals = read_scalars(tmp_path / "run")["perf/interval/watch"]
    settled = [k for step, k in sorted(intervals.items()) if step >= 200]
    typical = statistics.median(settled)
    near = [k for k in settled if typical / 2 <= k <= 2 * typical]
    assert len(near) >= 0.8 * len(settled), sorted(intervals.items())  # settled, but for a spike of load


def test_dead_units_planted_after_the_warm_up_are_found_with_the_interval_the_budget_picked(digits, tmp_path):
    picked: list[int] = []

    def kill_layer_0(step: int, model: Any, optimizer: Any) -> None:
        if step == 300:
            with engine.no_grad():
                model[0].bias.data[...] = -50.0
            picked.append(handles[0].every if handles else 0)

    handles: list[Any] = []
    original = watcher_module.Watch.__init__

    def remember(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        handles.append(self)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(watcher_module.Watch, "__init__", remember)
        train_loop(digits, tmp_path / "run", 300 + 2500, on_step=kill_layer_0, lr=1e-3, budget=BUDGET)
    assert picked and picked[0] > 1, picked
    alerts = AlertReader(tmp_path / "run" / ALERTS_RELPATH).read()
    dead = [a for a in alerts if a.kind == "dead_units"]
    assert dead, (handles[0].every, read_scalars(tmp_path / "run")["perf/interval/watch"])
    assert [a.subject for a in dead] == ["1"] and dead[0].evidence["first_step"] >= 300
    assert dead[0].evidence["dead_fractions"] == [1.0] * 10


def test_an_exploding_update_planted_after_the_warm_up_is_found(digits, tmp_path):
    def raise_lr(step: int, model: Any, optimizer: Any) -> None:
        if step == 300:
            for group in optimizer.param_groups:
                group["lr"] = 50.0

    train_loop(digits, tmp_path / "run", 600, on_step=raise_lr, budget=BUDGET)
    alerts = AlertReader(tmp_path / "run" / ALERTS_RELPATH).read()
    exploding = [a for a in alerts if a.kind == "exploding_gradient"]
    assert exploding and all(a.step >= 300 for a in exploding)
    assert max(exploding[0].evidence["update_ratios"]) > 1.0
