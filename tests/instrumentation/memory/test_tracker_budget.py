"""The tracker under its overhead budget: one step in k logged, each logged peak the highest since the last one,
only the logged step ends kept once settled (every one while live bytes rise: leaks are still found in a window of
steps), every=k fixing the interval, its pace tags, its measured share."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import hooks
from instrumentation import SummaryWriter
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.reader import EventFileReader
from instrumentation.format.values import ScalarValue
from instrumentation.memory import LeakSettings, MemoryTracker
from training_loops import train

SPIKE_BYTES = 1 << 20


def scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    found: dict[str, dict[int, float]] = {}
    for path in sorted(run_dir.glob("events.out.tfevents.*")):
        for event in EventFileReader(path).read():
            for value in event.values:
                if isinstance(value, ScalarValue):
                    found.setdefault(value.tag, {})[value.step] = value.value
    return found


def steps_with_a_spike(steps: int, spike_at: int) -> None:
    """Each step allocates and frees a small buffer; step ``spike_at`` also holds 1 MiB for a moment."""
    for step in range(steps):
        hooks.mark_step_begin()
        small = engine.tensor(np.zeros(64, np.float32))
        if step == spike_at:
            spike = engine.tensor(np.zeros(SPIKE_BYTES // 4, np.float32))
            del spike
        del small
        hooks.mark_step_end()


def test_every_k_logs_one_step_in_k_and_a_skipped_peak_goes_to_the_next_logged_step(tmp_path):
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer:
        tracker = MemoryTracker(writer, stacks=False, leak=None, host_rss=False, every=4)
        steps_with_a_spike(23, spike_at=9)
        tracker.close()
    peaks = scalars(tmp_path / "run")["mem/cpu/peak_bytes"]
    assert sorted(peaks) == [0, 4, 8, 12, 16, 20, 22]  # one step in 4, and the last one at close
    assert peaks[12] >= SPIKE_BYTES > peaks[8]  # step 9's peak, not logged itself, is step 12's point
    assert peaks[16] < SPIKE_BYTES  # and only that one
    assert tracker.pace.interval == 4 == tracker._steps.peak_every  # the step peak ends at the logged steps only


@pytest.mark.parametrize(("leak", "kept_every"), [(None, 4), (LeakSettings(), 1)], ids=["no-leak-test", "leak-window"])
def test_the_last_step_is_logged_at_close_when_its_batch_was_processed_before_for_its_age(tmp_path, leak, kept_every):
    """batch_s=0.0: every step end kept is processed at once (as a loaded machine's batches are, for their age).
    Without a leak test one step end in ``every`` is kept from the first batch on, though that one-step batch
    measured nothing; with one, every step end is kept while its window fills, so the last one was processed, not
    logged, before close(). close() logs the last step in both, with the highest peak since the last logged one."""
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer:
        tracker = MemoryTracker(writer, stacks=False, leak=leak, host_rss=False, every=4, batch_s=0.0)
        steps_with_a_spike(23, spike_at=21)
        assert tracker.kept_every == kept_every
        tracker.close()
    peaks = scalars(tmp_path / "run")["mem/cpu/peak_bytes"]
    assert sorted(peaks) == [0, 4, 8, 12, 16, 20, 22]
    assert peaks[22] >= SPIKE_BYTES > peaks[20]  # step 21's peak, not logged itself, is the closing step's point


def test_a_batch_is_charged_every_step_since_the_last_batch_not_only_those_whose_step_end_was_kept(tmp_path):
    """every=1000: after the first batch (steps 0–15, every step end kept until then) no step end is kept until
    close(), whose batch is the last step's alone; the pacer is charged the 100 steps since step 15 with the wall
    time they took, not one step with the wall time of 100."""
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer:
        tracker = MemoryTracker(writer, stacks=False, leak=None, host_rss=False, every=1000, batch_s=3600.0)
        charged: list[int] = []
        record = tracker.pace.record

        def spy(step_ns, fixed_ns=0, run_ns=0, runs=0, steps=1):
            charged.append(steps)
            return record(step_ns, fixed_ns, run_ns, runs, steps)

        tracker.pace.record = spy
        steps_with_a_spike(116, spike_at=-1)
        assert tracker.kept_every == 1000
        tracker.close()
    assert charged == [16, 100]
    assert sorted(scalars(tmp_path / "run")["mem/cpu/peak_bytes"]) == [0, 115]


def test_a_leak_is_found_from_every_step_while_the_scalars_are_thinned(make_tracker):
    # NOTE: a fixed interval: whether the budget thins on this machine at this moment depends on its load; the
    # leak test reads every step's figures whatever the interval (the planted leaks of test_leaks.py run under
    # the default budget)
    tracker = make_tracker(stacks=False, every=5)
    allocated = train(300, "sum_losses")
    tracker.close()
    tracker.writer.flush()
    leaks = [a for a in AlertReader(Path(tracker.run_dir) / ALERTS_RELPATH).read() if a.kind == "leak"]
    assert len(leaks) == 1 and leaks[0].step <= 60  # found as early as with every step logged
    assert leaks[0].evidence["bytes_per_step"] == pytest.approx(8.0, rel=0.05)  # two float32 scalars per step
    logged = scalars(Path(tracker.run_dir))
    # one step in 5, the leak alert's step (a sample: the chart shows the step the alert names) and the last one
    assert leaks[0].step in logged["mem/cpu/allocated_bytes"]
    assert len(logged["mem/cpu/allocated_bytes"]) == 300 // 5 + 1 + (leaks[0].step % 5 != 0)
    assert logged["mem/cpu/allocated_bytes"][299] == allocated[-1]  # the last step, at close
    for stat in ("instrumentation_ms", "instrumentation_share", "interval"):
        assert logged[f"perf/{stat}/memory"]


def test_on_a_tiny_step_the_tracker_s_measured_share_stays_within_its_budget(make_tracker):
    """The share: the median over blocks of 50 steps of (time in the tracker's processing) / (the block's time
    without it), both the training thread's CPU time (``time.thread_time_ns``): on a loaded machine a wall-clock span
    holds other processes' time slices (see test_watch_budget)."""
    tracker = make_tracker(stacks=False)
    spent, shares, block = [0], [], [0, 0]
    process = tracker._steps.on_batch

    def timed() -> None:
        began = time.thread_time_ns()
        process()
        spent[0] += time.thread_time_ns() - began
    tracker._steps.on_batch = timed

    def close_blocks(step: int) -> None:
        if step >= 100 and step % 50 == 0:
            now = time.thread_time_ns()
            if block[0]:
                in_tracker = spent[0] - block[1]
                shares.append(in_tracker / (now - block[0] - in_tracker))
            block[:] = [now, spent[0]]
    train(1100, on_step=close_blocks)
    share = statistics.median(shares)
    assert share <= 0.05, f"the tracker took {share:.1%} of a tiny step (pacer: {tracker.pace.last})"


def test_batches_are_short_until_the_pacers_first_decision_then_batch_steps_long(tmp_path):
    """The pacer decides per batch: 16-step batches through its warm-up, ``batch_steps`` step ends kept from its
    first decision on; what keeping the step ends cost (the step log's ``spent_ns``) is charged to the pacer with the
    batch's processing."""
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer:
        tracker = MemoryTracker(writer, stacks=False, leak=None, host_rss=False, batch_s=3600.0)
        charged: list[tuple[int, int, int]] = []  # (fixed_ns + run_ns, steps, the step log's spent_ns) per batch
        record, process, spent = tracker.pace.record, tracker._steps.on_batch, [0]

        def spy(step_ns, fixed_ns=0, run_ns=0, runs=0, steps=1):
            charged.append((fixed_ns + run_ns, steps, spent[0]))
            return record(step_ns, fixed_ns, run_ns, runs, steps)

        def on_batch() -> None:
            spent[0] = tracker._steps.spent_ns
            process()

        tracker.pace.record, tracker._steps.on_batch = spy, on_batch
        assert tracker._steps.batch_steps == 16
        steps_with_a_spike(40, spike_at=-1)
        assert tracker.pace.last is not None and tracker._steps.batch_steps == 256
        steps_with_a_spike(300, spike_at=-1)
        spent[0] = tracker._steps.spent_ns  # the batch close() processes
        tracker.close()
    assert [steps for _, steps, _ in charged[:2]] == [16, 16]
    # after the switch a batch holds 256 step ends kept (one per interval) or the steps up to close: not 16 steps.
    # NOTE: under load the pacer once chose an interval past step 339: close()'s batch was the one step end it keeps
    # there, once charged as 1 step; it is charged the 308 steps since the last batch
    assert charged[2:] and charged[2][1] > 16
    assert all(cost >= spent_ns > 0 for cost, _, spent_ns in charged[:2])  # the step ends' own cost is in
    assert tracker._steps.spent_ns == 0  # every step end's cost was handed over


def test_once_settled_only_the_logged_step_ends_are_kept_and_a_late_leak_brings_every_step_back(make_tracker):
    """A healthy stretch: after the first decision and a full flat leak window the step log keeps one step end in
    ``every``. A leak planted at step 200: the next batch sees the live bytes rise, every step end is kept again and
    the leak is found within a leak window of steps (plus a batch), with its bytes per step."""
    tracker = make_tracker(stacks=False, every=8, batch_steps=8, host_rss=False)
    kept_every: dict[int, int] = {}
    settled: dict[int, bool] = {}
    held: list = []

    def on_step(step: int) -> None:
        kept_every[step] = tracker.kept_every
        settled[step] = tracker.settled
        if step >= 200:
            held.append(engine.tensor(np.zeros(16, np.float32)))  # 64 bytes a step from step 200

    train(500, on_step=on_step)
    tracker.writer.flush()
    assert set(kept_every[step] for step in range(120, 200)) == {8}  # settled and flat: one step end in 8
    assert not settled[0] and all(settled[step] for step in range(120, 200))
    assert 1 in {kept_every[step] for step in range(200, 300)}  # rising: every step end again
    leaks = [a for a in AlertReader(Path(tracker.run_dir) / ALERTS_RELPATH).read() if a.kind == "leak"]
    assert len(leaks) == 1 and 200 + 30 <= leaks[0].step <= 200 + 30 + 2 * 8 * 8, leaks[0].step
    assert leaks[0].evidence["bytes_per_step"] == pytest.approx(64.0, rel=0.05)
    assert {kept_every[step] for step in range(leaks[0].step + 2 * 8 * 8, 500)} == {8}  # reported: back to 1 in 8


def test_a_paced_tracker_is_not_settled_during_its_warm_up_nor_while_its_windows_fill(tmp_path):
    hooks.reset_step(0)
    with SummaryWriter(tmp_path / "run") as writer:
        tracker = MemoryTracker(writer, stacks=False, host_rss=False, batch_steps=8)
        steps_with_a_spike(20, spike_at=-1)  # the pacer's warm-up (32 steps): every step observed, interval 1
        assert tracker.pace.last is not None and tracker.pace.interval == 1 and not tracker.settled
        steps_with_a_spike(200, spike_at=-1)
        assert tracker.settled and tracker.kept_every == tracker.pace.interval  # flat, its leak window full
        tracker.close()
