"""RankMonitor's per-step rows from synthetic engine events, read back with TensorBoard's own reader."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from engine import hooks
from instrumentation.distributed import RankMonitor
from instrumentation.distributed.cpu_wait import ThreadSchedule, cpu_wait_ns
from instrumentation.distributed.monitor import step_comm
from instrumentation.format import tags
from instrumentation.summary import SummaryWriter
from rank_threads import ThreadGroup, play_step


def scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def test_the_union_of_a_steps_collectives_counts_overlap_once_and_leaves_out_what_ended_before_it() -> None:
    # [0, 100] step; buckets 10-30 and 20-50 overlap (40 ns in flight), 60-70 apart, one ended before the step
    intervals = [(20, 50, 2), (10, 30, 1), (60, 70, 4), (-50, -10, 8), (90, 130, 16)]
    assert step_comm(intervals, 0, 100) == (40 + 10 + 10, 1 + 2 + 4 + 16)
    assert step_comm([], 0, 100) == (0, 0)
    assert step_comm([(0, 100, 3), (10, 20, 1)], 0, 100) == (100, 4)


def test_each_step_gets_its_row_and_a_single_rank_makes_no_collective_call(tmp_path: Path) -> None:
    group = ThreadGroup(1)
    with SummaryWriter(tmp_path / "run") as writer:
        monitor = RankMonitor(writer, group=group.member(0), straggler_window=4, straggler_min_steps=3)
        try:
            for step in range(10):  # buckets 5-7 ms and 6-8.5 ms of a 10 ms step: 3.5 ms in flight
                play_step(monitor, step, step_ms=10.0 + step, data_ms=1.0, wait_ms=1.5,
                          comm=((5.0, 7.0, 4096), (6.0, 8.5, 2048 * step)))
        finally:
            monitor.close()
    assert group.calls == [0]
    read = scalars(tmp_path / "run")
    steps = list(range(10))
    assert read[tags.STEP_TIME_MS] == [(s, pytest.approx(10.0 + s, rel=1e-6)) for s in steps]
    assert read[tags.DATA_TIME_MS] == [(s, pytest.approx(1.0, rel=1e-6)) for s in steps]
    assert read[tags.ALLREDUCE_MS] == [(s, pytest.approx(3.5, rel=1e-6)) for s in steps]
    assert read[tags.ALLREDUCE_WAIT_MS] == [(s, pytest.approx(1.5, rel=1e-6)) for s in steps]
    assert read[tags.COMM_BYTES] == [(s, 4096.0 + 2048 * s) for s in steps]
    # its own cost, at each window's end (every 4 steps), with the window as its interval
    assert [s for s, _ in read[tags.pace_tag(tags.INTERVAL, tags.RANK_MONITOR_OBSERVER)]] == [3, 7]
    assert {v for _, v in read[tags.pace_tag(tags.INTERVAL, tags.RANK_MONITOR_OBSERVER)]} == {4.0}
    assert all(v > 0 for _, v in read[tags.pace_tag(tags.INSTRUMENTATION_MS, tags.RANK_MONITOR_OBSERVER)])
    assert monitor not in hooks.recorders


def test_a_flush_hands_the_kept_rows_to_the_file(tmp_path: Path) -> None:
    writer = SummaryWriter(tmp_path / "run")
    monitor = RankMonitor(writer, group=ThreadGroup(1).member(0))
    try:
        for step in range(3):  # fewer than a window: kept by the monitor until a flush
            play_step(monitor, step, step_ms=4.0)
        writer.flush()
        assert [s for s, _ in scalars(tmp_path / "run")[tags.STEP_TIME_MS]] == [0, 1, 2]
    finally:
        monitor.close()
        writer.close()


def test_bad_settings_are_refused_with_their_name(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path / "run") as writer:
        member = ThreadGroup(1).member(0)
        for options, named in (({"checksum_every": -1}, "checksum_every"), ({"straggler_window": 1}, "window"),
                               ({"straggler_margin": 0}, "margin"), ({"straggler_min_steps": 21}, "min_steps")):
            with pytest.raises(ValueError, match=named):
                RankMonitor(writer, group=member, **options)
        with pytest.raises(TypeError, match="writer"):
            RankMonitor(object(), group=member)
        with pytest.raises(TypeError, match="engine.nn.Module"):
            RankMonitor(writer, model=np.zeros(3), group=member)


class Schedule:
    """Stands in for the thread's schedstat: (ns on a CPU, ns waiting for one) read in turn."""

    def __init__(self, readings: list[tuple[int, int]]) -> None:
        self.readings = list(readings)

    def read(self) -> tuple[int, int]:
        return self.readings.pop(0)

    def close(self) -> None:
        pass


def test_cpu_wait_counts_the_run_queue_outside_the_allreduce_wait() -> None:
    ms = 1_000_000
    # 12 ms on a CPU, 4 ms waiting for one, 4 of the 16 runnable ms in the allreduce wait: 3/4 of the 4 ms are outside
    assert cpu_wait_ns(12 * ms, 4 * ms, 4 * ms, 100 * ms) == 3 * ms
    assert cpu_wait_ns(12 * ms, 4 * ms, 4 * ms, 2 * ms) == 2 * ms  # never more than the busy time it is taken from
    assert cpu_wait_ns(12 * ms, 0, 4 * ms, 100 * ms) == 0
    assert cpu_wait_ns(1 * ms, 1 * ms, 5 * ms, 100 * ms) == 0  # all of it in the wait
    assert ThreadSchedule("/nonexistent/schedstat").read() is None


def test_the_cpu_wait_is_logged_and_taken_out_of_the_busy_time(tmp_path: Path) -> None:
    ms = 1_000_000
    with SummaryWriter(tmp_path / "run") as writer:
        monitor = RankMonitor(writer, group=ThreadGroup(1).member(0), straggler_window=4, straggler_min_steps=1)
        # step 0: 6 ms on a CPU and 2 ms waiting for one, 2 ms of the 8 runnable in the allreduce wait -> 1.5 ms;
        # step 1: the same readings at its begin and end -> none
        monitor.schedule = Schedule([(0, 0), (6 * ms, 2 * ms), (6 * ms, 2 * ms), (6 * ms, 2 * ms)])
        for step in range(2):
            monitor.step_begin(hooks.StepEvent(step, 0, 0))
            play_step(monitor, step, step_ms=10.0, wait_ms=2.0)
        busy_ms = monitor._busy_ms[:2].tolist()  # the window's busy times so far (compared at its end)
        monitor.close()
    assert busy_ms == [pytest.approx(10.0 - 2.0 - 1.5), pytest.approx(8.0)]
    read = scalars(tmp_path / "run")
    assert read[tags.CPU_WAIT_MS] == [(0, pytest.approx(1.5)), (1, 0.0)]
    assert monitor.schedule.readings == []


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/schedstat"), reason="no schedstat: not Linux")
def test_the_schedule_is_the_reading_threads_own() -> None:
    schedule = ThreadSchedule()
    before = schedule.read()
    spin_until = time.thread_time_ns() + 20_000_000
    while time.thread_time_ns() < spin_until:  # 20 ms of this thread's CPU time
        pass
    after = schedule.read()
    schedule.close()
    assert after[0] - before[0] >= 19_000_000
