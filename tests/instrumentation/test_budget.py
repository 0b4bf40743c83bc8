"""The pacer on simulated observers: the interval it settles on (computed by hand), how fast, and how it adapts."""
from __future__ import annotations

import math
import random

import pytest

from instrumentation.budget import MEASURED_SHARE, WARMUP_STEPS, Pacer, check_budget, check_every


def simulate(pacer: Pacer, steps: int, base_us: float, run_us: float, fixed_us: float = 0.0, noise: float = 0.0,
             start: int = 0, seed: int = 0, totals: dict | None = None) -> list[int]:
    """An observer whose periodic work costs ``run_us`` and whose every step costs ``fixed_us`` on top of a
    ``base_us`` step; returns the interval after each step (``totals``: adds the base and spent ns of the steps)."""
    rng = random.Random(seed)
    intervals = []
    totals = {} if totals is None else totals
    for step in range(start, start + steps):
        jitter = 1 + noise * (2 * rng.random() - 1)
        due = pacer.due(step)
        run_ns = int(run_us * 1e3 * jitter) if due else 0
        fixed_ns = int(fixed_us * 1e3 * jitter)
        pacer.record(int(base_us * 1e3 * jitter) + run_ns + fixed_ns, fixed_ns, run_ns, int(due))
        totals["base"] = totals.get("base", 0) + base_us * 1e3 * jitter
        totals["spent"] = totals.get("spent", 0) + run_ns + fixed_ns
        intervals.append(pacer.interval)
    return intervals


def least_interval(budget: float, base_us: float, run_us: float, fixed_us: float = 0.0) -> int:
    """The least k with fixed + run / k <= budget · MEASURED_SHARE · base: the oracle."""
    k = 1
    while fixed_us + run_us / k > budget * MEASURED_SHARE * base_us:
        k += 1
    return k


@pytest.mark.parametrize("base_us, run_us, fixed_us", [(300, 150, 0), (300, 150, 2), (1000, 100, 0),
                                                        (20_000, 150, 5)])
def test_the_interval_settles_within_200_steps_on_the_least_that_keeps_within_the_budget(base_us, run_us, fixed_us):
    pacer = Pacer("test", 0.05)
    intervals = simulate(pacer, 1000, base_us, run_us, fixed_us)
    expected = least_interval(0.05, base_us, run_us, fixed_us)
    assert intervals[:WARMUP_STEPS - 1] == [1] * (WARMUP_STEPS - 1)  # the warm-up observes every step
    assert set(intervals[200:]) == {expected}
    assert pacer.last.share <= 0.05 * MEASURED_SHARE * 1.01
    if base_us >= 20_000:
        assert expected == 1  # a large step is observed at every step


def test_with_noisy_costs_the_interval_settles_and_the_share_stays_within_the_budget():
    pacer = Pacer("test", 0.05)
    intervals = simulate(pacer, 200, 300, 150, 1, noise=0.3)
    totals: dict = {}
    intervals += simulate(pacer, 1800, 300, 150, 1, noise=0.3, start=200, seed=1, totals=totals)
    settled = intervals[-1]
    assert all(0.8 * settled <= k <= settled for k in intervals[200:])  # settled by step 200, within the noise
    assert totals["spent"] / totals["base"] <= 0.05 * MEASURED_SHARE  # what the simulated observer cost after it


def test_the_interval_follows_the_step_time_both_ways():
    pacer = Pacer("test", 0.05)
    small = simulate(pacer, 400, 300, 150)
    assert small[-1] == least_interval(0.05, 300, 150)
    large = simulate(pacer, 400, 20_000, 150, start=400)  # steps got 66x longer
    assert large[-1] == 1 and large.index(1) < 200
    again = simulate(pacer, 400, 300, 150, start=800)
    assert again[-1] == least_interval(0.05, 300, 150) and again.index(again[-1]) < 200


def test_when_the_fixed_cost_alone_exceeds_the_budget_the_periodic_work_keeps_a_share():
    pacer = Pacer("test", 0.05)
    intervals = simulate(pacer, 600, 300, 150, fixed_us=20)  # 20 us > 0.05 · 0.5 · 300 us: pacing cannot help
    target = 0.05 * MEASURED_SHARE * 300
    assert intervals[-1] == math.ceil(150 / (target * 0.25)) < pacer.max_interval


def test_every_fixes_the_interval_and_the_costs_are_still_measured():
    pacer = Pacer("test", 0.05, every=3)
    intervals = simulate(pacer, 300, 300, 150)
    assert set(intervals) == {3}
    assert [step for step in range(10) if pacer.due(step)] == [0, 3, 6, 9]
    assert pacer.last is not None and pacer.last.interval == 3 and pacer.last.instrumentation_ms > 0


def test_min_interval_is_a_floor():
    pacer = Pacer("test", 0.05, min_interval=100)
    intervals = simulate(pacer, 3000, 20_000, 50)
    assert set(intervals) == {100}
    slow = Pacer("test", 0.05, min_interval=100)
    assert simulate(slow, 3000, 300, 2_000)[-1] == least_interval(0.05, 300, 2_000) > 100


def test_a_pause_between_steps_does_not_count_as_a_long_step():
    pacer = Pacer("test", 0.05)
    simulate(pacer, 400, 300, 150)
    settled = pacer.interval
    pacer.record(int(30e9), 0, 0, 0)  # an evaluation of 30 s between two steps
    assert simulate(pacer, 100, 300, 150, start=401)[-1] >= settled * 2 // 3


def test_the_scalars_of_a_window():
    pacer = Pacer("watch", 0.05)
    simulate(pacer, 64, 1000, 100)
    tags, values = pacer.last.scalars()
    assert tags == ("perf/instrumentation_ms/watch", "perf/instrumentation_share/watch", "perf/interval/watch")
    assert values[2] == pacer.last.interval
    assert values[0] == pytest.approx(100 / pacer.last.interval / 1e3, rel=0.2)


@pytest.mark.parametrize("budget", [0, -0.1, 1.5, True, "0.05", float("nan")])
def test_a_budget_outside_0_1_is_refused(budget):
    with pytest.raises(ValueError, match="budget must be a share of step time"):
        check_budget("watch", budget)
    with pytest.raises(ValueError, match="budget"):
        Pacer("watch", budget)


@pytest.mark.parametrize("every", [0, -1, 2.5, True])
def test_an_every_that_is_not_a_positive_int_is_refused(every):
    with pytest.raises(ValueError, match="every must be None"):
        check_every("MemoryTracker", every)
    assert check_every("x", None) is None and check_every("x", 4) == 4


def test_the_first_decision_after_the_warm_up_takes_the_interval_its_estimates_give():
    pacer = Pacer("test", 0.05)
    intervals = simulate(pacer, 400, 300, 150, 2)
    expected = least_interval(0.05, 300, 150, 2)
    assert expected > 4 * 4  # more than a 4x growth from 1 in one decision
    assert set(intervals[WARMUP_STEPS + 16:]) == {expected}


def test_run_weight_charges_each_run_that_multiple_of_its_measured_cost():
    pacer = Pacer("test", 0.05, run_weight=2.0)
    intervals = simulate(pacer, 1000, 300, 150, 2)
    assert set(intervals[200:]) == {least_interval(0.05, 300, 2 * 150, 2)}
    assert pacer.run_ns == pytest.approx(150e3)  # the estimate stays what was measured; the weight is applied to it
