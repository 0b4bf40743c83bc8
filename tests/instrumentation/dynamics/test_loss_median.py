"""The loss-spike rule: its median against statistics.median over the same window, and its alerts (judged with a
window brought up to date lazily) against a plain rule that updates the window and judges at every step."""
from __future__ import annotations

import math
import random
import statistics
from collections import deque

import pytest

from instrumentation.dynamics.loss_rule import LossSpikeRule
from instrumentation.dynamics.thresholds import DynamicsThresholds


def test_running_median_equals_statistics_median_of_the_window():
    rule, rng = LossSpikeRule(DynamicsThresholds()), random.Random(0)
    for step in range(600):
        value = rng.choice([rng.random(), 1.0, 2.0, float("nan"), float("inf"), 100.0, -3.0])
        rule.observe(step, value)
        if rule.window():
            assert rule.median() == statistics.median(rule.window()), step
    assert len(rule.window()) == DynamicsThresholds().loss_window


def plain_rule(thresholds: DynamicsThresholds, losses: list[float]) -> list[tuple[int, float, float, list[float]]]:
    """(step, limit, median, window) of each reported spike: the rule's definition, step by step."""
    window: deque[float] = deque(maxlen=thresholds.loss_window)
    first, in_spike, found = None, False, []
    for step, value in enumerate(losses):
        if len(window) >= thresholds.loss_min_history:
            median = statistics.median(window)
            first = median if first is None else first
            limit = max(thresholds.loss_spike_factor * median, median + thresholds.loss_spike_min_rise * first)
            spike = not math.isfinite(value) or value > limit
            if spike and not in_spike:
                found.append((step, limit, median, list(window)))
            in_spike = spike
        if math.isfinite(value):
            window.append(value)
    return found


def noisy_losses(seed: int, steps: int) -> list[float]:
    """A decaying loss with noise, drifts, negative stretches, spikes (single and runs), NaN and ±inf."""
    rng, losses, level = random.Random(seed), [], 2.0
    for step in range(steps):
        level = max(level * 0.995, 0.05) if rng.random() > 0.01 else rng.uniform(-1.0, 5.0)
        value = level * rng.uniform(0.5, 1.5)
        draw = rng.random()
        if draw < 0.02:
            value *= rng.uniform(3.0, 50.0)
        elif draw < 0.025:
            value = rng.choice([math.nan, math.inf, -math.inf])
        losses.append(value)
    return losses


@pytest.mark.parametrize("window", [1, 2, 5, 20, 21, 64])
@pytest.mark.parametrize("seed", range(4))
def test_the_lazy_window_reports_exactly_the_spikes_of_the_plain_rule(seed, window):
    thresholds = DynamicsThresholds(loss_window=window, loss_min_history=min(5, window))
    losses = noisy_losses(seed, 3000)
    rule = LossSpikeRule(thresholds)
    alerts = [alert for step, value in enumerate(losses) for alert in rule.observe(step, value)]
    expected = plain_rule(thresholds, losses)
    assert [a.step for a in alerts] == [step for step, *_ in expected]
    for alert, (step, limit, median, recent) in zip(alerts, expected):
        assert alert.evidence["limit"] == pytest.approx(limit) and alert.evidence["median"] == pytest.approx(median)
        assert alert.evidence["window"] == recent
    assert len(expected) > 10  # the sequences do hold spikes


def test_a_spike_after_a_quiet_stretch_is_judged_against_the_up_to_date_window():
    rule = LossSpikeRule(DynamicsThresholds())
    for step in range(100):  # a slow rise: the quick limit lags behind, the full judgement does not
        assert not rule.observe(step, 1.0 + step * 0.05)
    median = statistics.median(rule.window())
    assert not rule.observe(100, 3.9 * median)
    median = statistics.median(rule.window())
    alerts = rule.observe(101, 4.1 * median)
    assert alerts and alerts[0].evidence["median"] == median


@pytest.mark.parametrize("window", [1, 5, 64])
def test_watch_log_loss_taking_the_rules_fast_path_itself_reports_exactly_the_plain_rules_spikes(tmp_path, window):
    """log_loss takes the rule's common case inline (quick_limit, pending, lag): the alerts it reports are still
    the plain rule's, step for step."""
    from engine import nn
    from instrumentation import SummaryWriter, watch

    thresholds = DynamicsThresholds(loss_window=window, loss_min_history=min(5, window))
    losses = noisy_losses(7, 3000)
    model = nn.Sequential(nn.Linear(4, 2))
    with SummaryWriter(tmp_path) as writer, watch(model, writer, thresholds=thresholds, memory=False,
                                                  capture_requests=False) as handle:
        for step, value in enumerate(losses):
            handle.log_loss(value, step)
    spikes = [alert for alert in handle.alerts if alert.kind == "loss_spike"]
    expected = plain_rule(thresholds, losses)
    assert [a.step for a in spikes] == [step for step, *_ in expected] and len(expected) > 10
    assert [a.evidence["window"] for a in spikes] == [recent for *_, recent in expected]
