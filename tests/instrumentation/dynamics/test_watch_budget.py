"""watch()'s overhead budget on real steps: the share of step time its hooks and its memory tracker take (timed
by the test around their work, as a ratio to the same run's step time), the interval, every=k, the perf/ tags,
and pathologies planted after the warm-up, found with the interval the budget picked.

A share is the median over blocks of 200 steps of (time inside the observers) / (the block's time without it).
Everything of watch() the engine or the loop calls is timed: the handle's recorder method, its sampler's
optimizer hook points, its forward hooks, ``log_loss``, the capture-request check and the memory tracker's batch.
Spans and blocks are the training thread's CPU time (``time.thread_time_ns``): on this shared machine a wall-clock
span of a microsecond that happens to include a preemption counts milliseconds, and a loaded machine's waits are
not step time. That clock costs ~1-2 us a read here, so its cost — calibrated in the same run on a wrapped empty
function — is taken out of both sides. The 20 ms step is 20 ms of the thread's CPU time (sorting)."""
from __future__ import annotations

import statistics
import time
import types
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import engine
from engine import hooks, memory_recording
from engine.nn import functional as F
from instrumentation import SummaryWriter, watch
from instrumentation.budget import WARMUP_STEPS
from instrumentation.dynamics import watcher as watcher_module
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.memory import MemoryTracker
from instrumentation.memory import tracker as memory_tracker
from instrumentation.profiler import OnDemandCapture

from dynamics_helpers import mlp, read_scalars

BUDGET = 0.05


HOOKS = ("step_end", "_optimizer_step_begin", "_optimizer_step_end", "log_loss", "_layer_output", "_batch_hook")
CAPTURE_HOOKS = ("step_end",)


BUSY_WORK = np.random.default_rng(0).random(20_000)  # about 0.2 ms of a single-threaded sort
BLOCK_STEPS = 200  # several runs of the periodic work in each (a block with or without one would not compare)


class HookClock:
    """Sums the time spent in watch()'s entry points (``HOOKS``, ``CAPTURE_HOOKS``) and in its memory tracker's
    batch processing, while ``on``; ``block()`` closes a block of steps. A span's clock cost (what an empty span
    measures) is taken out of it, measured where it happens: a timed empty function runs right after
    ``log_loss`` and right after watch()'s ``step_end`` (the clock is then a recorder too), and each block's spans
    lose the mean span of that block's probes (a clock read in a loaded machine's cold caches, a GIL handover or a
    descheduled virtual CPU inside a span: as likely in a probe as in a watch() call of that place). Blocks lose
    what the wrappers add per call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.span_now = self.block_now = time.thread_time_ns
        self.spent_ns, self.calls, self.on = 0, 0, False
        self.probe_ns, self.probes = 0, 0
        self.span_ns, self.wrap_ns = self._calibrate()
        self.shares: list[float] = []
        self._block_began = self._block_spent = self._block_calls = self._block_probe_ns = self._block_probes = 0
        self._probe = self._timed(lambda: None, probe=True)
        for owner, names in ((watcher_module.Watch, HOOKS), (OnDemandCapture, CAPTURE_HOOKS)):
            for name in names:  # NOTE: on the class, before watch() registers its bound methods
                monkeypatch.setattr(owner, name, self._timed(getattr(owner, name)))

    def _calibrate(self, calls: int = 20000) -> tuple[float, float]:
        empty = self._timed(lambda: None)
        self.on = True
        began = self.block_now()
        for _ in range(calls):
            empty()
        total = self.block_now() - began
        span, self.spent_ns, self.calls, self.on = self.spent_ns / calls, 0, 0, False
        return span, total / calls

    def _timed(self, function: Callable[..., Any], probe: bool = False) -> Callable[..., Any]:
        now = self.span_now

        def timed(*args: Any, **kwargs: Any) -> Any:
            began = now()
            try:
                return function(*args, **kwargs)
            finally:
                if self.on:
                    if probe:
                        self.probe_ns += now() - began
                        self.probes += 1
                    else:
                        self.spent_ns += now() - began
                        self.calls += 1
        return timed

    def probe(self) -> None:
        self._probe()

    def step_end(self, event: Any) -> None:
        """A recorder's step_end next to watch()'s (added after it): a probe where that hook runs."""
        self._probe()

    def block(self) -> None:
        """Close a block of steps now and open the next."""
        now = self.block_now()
        if self._block_began:
            calls, probes = self.calls - self._block_calls, self.probes - self._block_probes
            span_ns = (self.probe_ns - self._block_probe_ns) / probes if probes else self.span_ns
            spent = self.spent_ns - self._block_spent - calls * span_ns
            total = now - self._block_began - (calls + probes) * self.wrap_ns
            self.shares.append(spent / (total - spent))
        self._block_began, self._block_spent, self._block_calls = self.block_now(), self.spent_ns, self.calls
        self._block_probe_ns, self._block_probes = self.probe_ns, self.probes

    def share(self) -> float:
        return statistics.median(self.shares)

    def time_tracker(self, tracker: Any) -> None:
        tracker._steps.on_batch = self._timed(tracker._steps.on_batch)


def train_loop(digits: Any, logdir: Path, steps: int, *, busy_cpu_s: float = 0.0, clock: HookClock | None = None,
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
        if clock is not None:
            hooks.add_recorder(clock)
        trackers = [c for c in handle._components if isinstance(c, MemoryTracker)]
        if clock is not None and trackers:
            clock.time_tracker(trackers[0])
        began = 0
        for step in range(steps):
            if step == measure_from:
                writer.flush()
                began = time.perf_counter_ns()
                if clock is not None:
                    clock.on = True
            if clock is not None and step >= measure_from and (step - measure_from) % BLOCK_STEPS == 0:
                clock.block()
            hooks.mark_step_begin()
            xb, yb = batches[step % len(batches)]
            if busy_cpu_s:  # a long step in CPU time (a sleep would be one the CPU clock cannot see)
                until = time.thread_time() + busy_cpu_s
                while time.thread_time() < until:
                    np.sort(BUSY_WORK)
            if on_step is not None:
                on_step(step, model, optimizer)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            handle.log_loss(loss.item())
            if clock is not None:
                clock.probe()
        elapsed = time.perf_counter_ns() - began
        if clock is not None:
            hooks.remove_recorder(clock)
            clock.block()
            clock.on = False
    return handle, elapsed


def tiny_step_share(digits: Any, logdir: Path, **options: Any) -> tuple[Any, float]:
    with pytest.MonkeyPatch.context() as patch:
        observers_on_the_cpu_clock(patch)
        clock = HookClock(patch)
        handle, _ = train_loop(digits, logdir, 3300, clock=clock, measure_from=300, **options)
    return handle, clock.share()


def test_on_a_tiny_step_the_budget_thins_the_statistics_to_a_fraction_of_their_cost(digits, tmp_path):
    every_step = tiny_step_share(digits, tmp_path / "every", every=1, memory=False)[1]
    handle, share = tiny_step_share(digits, tmp_path / "budget", budget=BUDGET, memory=False)
    assert handle.every > 1
    assert share <= every_step / 3, (share, every_step)
    assert share <= 2 * BUDGET, f"watch() took {share:.1%} of a tiny step"


def test_on_a_tiny_step_the_measured_share_stays_within_the_budget(digits, tmp_path):
    _, share = tiny_step_share(digits, tmp_path / "run", budget=BUDGET, memory=False)
    assert share <= BUDGET, f"watch() took {share:.1%} of a tiny step"


# NOTE: with its memory tracker, whose step log runs at every step end: its share was 5.7-5.8 % (an expected failure)
# until the tracker charged that log to its pacer, ended its step peak at logged steps only and took 256-step
# batches; 3.8-4.0 % since (three runs each, the same machine)
def test_on_a_tiny_step_with_the_memory_tracker_the_share_stays_within_the_budget(digits, tmp_path):
    _, share = tiny_step_share(digits, tmp_path / "run", budget=BUDGET, memory=True)
    assert share <= BUDGET, f"watch() and its memory tracker took {share:.1%} of a tiny step"


def observers_on_the_cpu_clock(patch: pytest.MonkeyPatch) -> None:
    """Every clock a pacer reads becomes the training thread's CPU clock: watch()'s costs (it times its work on the
    wall clock and its steps on the CPU clock: a loaded machine's waits are not step time, a cost is never
    under-estimated), and the engine's step-end times with the memory tracker's costs (its steps and costs on the wall
    clock). A test of which interval a pacer picks, or of the CPU share it then takes, reads its own spans on that
    clock too: on a machine at load 12-15 a run of ~1 ms holds someone else's time slice now and then and the
    wall-clock intervals followed the load (the 20 ms step's `every <= 4` failed in 3 of 4 runs; 3-4 at load 15,
    2-3 on the CPU clock; the tiny step with the memory tracker went over its 5 % at load 15 with three busy loops,
    and not on the CPU clock in 3 runs). The pacers are the same; only what they are given no longer depends on the
    load (what watch() costs with the shipped clocks is bench/watch_overhead.py's figure)."""
    patch.setattr(watcher_module, "_now_ns", time.thread_time_ns)
    patch.setattr(hooks, "_now", time.thread_time_ns)
    patch.setattr(memory_recording, "_now", time.thread_time_ns)
    clocks = {name: getattr(time, name) for name in dir(time) if not name.startswith("_")}
    patch.setattr(memory_tracker, "time", types.SimpleNamespace(**{**clocks, "perf_counter_ns": time.thread_time_ns}))


@pytest.fixture()
def costs_on_the_cpu_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    observers_on_the_cpu_clock(monkeypatch)


def test_on_a_20_ms_step_one_step_in_four_or_more_is_observed_within_the_budget(digits, tmp_path, monkeypatch,
                                                                              costs_on_the_cpu_clock):
    clock = HookClock(monkeypatch)
    handle, _ = train_loop(digits, tmp_path / "run", 210, busy_cpu_s=0.02, clock=clock, measure_from=60,
                           budget=BUDGET)
    share = clock.share()
    assert share <= BUDGET, f"watch() took {share:.1%} of a 20 ms step"
    # a step this long affords most steps' statistics (a sample charged twice its timed cost: watcher.RUN_WEIGHT)
    assert handle.every <= 4
    scalars = read_scalars(tmp_path / "run")
    assert len(scalars["grad_norm/0.weight"]) >= 200 // 4


def test_every_overrides_the_budget(digits, tmp_path):
    handle, _ = train_loop(digits, tmp_path / "run", 120, every=3)
    assert handle.every == 3
    scalars = read_scalars(tmp_path / "run")
    assert sorted(scalars["update_ratio/0.weight"]) == list(range(0, 120, 3))
    assert sorted(scalars["grad_norm/0.weight"]) == [*range(0, 120, 3), 119]  # 119: the last gradients, at close()
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


def test_intervals_logged_by_the_watch_settle_within_200_steps(digits, tmp_path, costs_on_the_cpu_clock):
    steps, settled_by = 3000, 200
    train_loop(digits, tmp_path / "run", steps, budget=BUDGET)
    intervals = sorted(read_scalars(tmp_path / "run")["perf/interval/watch"].items())
    # each logged interval holds until the next one: weigh it by the steps it held after step 200 (at intervals of a
    # few hundred steps a run logs few of them, and one late change must not count as much as the whole rest)
    held = [(k, min(nxt, steps) - max(step, settled_by))
            for (step, k), (nxt, _) in zip(intervals, intervals[1:] + [(steps, None)]) if nxt > settled_by]
    typical = float(np.median(np.repeat([k for k, _ in held], [n for _, n in held])))
    near = sum(n for k, n in held if typical / 2 <= k <= 2 * typical)
    assert near >= 0.8 * sum(n for _, n in held), intervals  # settled, but for a spike of load


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
