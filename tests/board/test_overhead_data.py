"""The Profile page's instrumentation breakdown data: per paced observer, interval, cost and share of step time."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from board.data.overhead import observer_costs, overhead_runs
from board.data.store import LogdirStore
from instrumentation import SummaryWriter
from profile_fixtures import budgeted_run


def test_figures_are_those_of_the_last_window(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    with SummaryWriter(logdir / "paced") as writer:
        for index, step in enumerate(range(0, 400, 16)):  # 25 windows
            writer.add_scalar("perf/instrumentation_ms/watch", float(index), step)
            writer.add_scalar("perf/instrumentation_share/watch", index / 1000, step)
            writer.add_scalar("perf/interval/watch", float(1 + index), step)
        writer.add_scalar("perf/interval/memory", 7.0, 16)  # an observer with its interval only
        writer.add_scalar("perf/step_time_ms", 1.0, 0)
    with SummaryWriter(logdir / "plain") as writer:
        writer.add_scalar("loss", 1.0, 0)
    store = LogdirStore(logdir, reload_interval=0)
    store.refresh()
    assert overhead_runs(store) == ["paced"]
    watch, memory = observer_costs(store, "paced")
    assert (watch.observer, watch.interval) == ("watch", 25)
    assert watch.instrumentation_ms == 24.0 and watch.share == pytest.approx(0.024)
    assert watch.steps.tolist() == list(range(0, 400, 16)) and len(watch.shares) == 25
    assert (memory.observer, memory.interval) == ("memory", 7)
    assert math.isnan(memory.instrumentation_ms) and math.isnan(memory.share) and len(memory.steps) == 0
    assert observer_costs(store, "plain") == [] and observer_costs(store, "missing") == []


def test_a_run_under_watch_has_three_paced_observers_as_tensorboard_reads_them(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    budgeted_run(tmp_path / "logs" / "mlp")
    store = LogdirStore(tmp_path / "logs", reload_interval=0)
    store.refresh()
    costs = {cost.observer: cost for cost in observer_costs(store, "mlp")}
    assert set(costs) == {"watch", "watch_histograms", "memory"}
    accumulator = EventAccumulator(str(tmp_path / "logs" / "mlp"), size_guidance={"scalars": 0})
    accumulator.Reload()
    for observer, cost in costs.items():
        assert cost.interval == accumulator.Scalars(f"perf/interval/{observer}")[-1].value
        # a share is measured wall time: positive, and what TensorBoard reads (no bound: a loaded machine moves it)
        read_share = accumulator.Scalars(f"perf/instrumentation_share/{observer}")[-1].value
        assert cost.share > 0 and cost.share == pytest.approx(read_share, rel=1e-6) and cost.instrumentation_ms > 0
    assert costs["watch_histograms"].interval >= 100
