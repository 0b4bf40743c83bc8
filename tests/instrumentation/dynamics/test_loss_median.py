"""The loss-spike rule's running median against statistics.median over the same window."""
from __future__ import annotations

import random
import statistics

from instrumentation.dynamics.detectors import DynamicsRules
from instrumentation.dynamics.thresholds import DynamicsThresholds


def test_running_median_equals_statistics_median_of_the_window():
    rules, rng = DynamicsRules(DynamicsThresholds()), random.Random(0)
    for step in range(600):
        value = rng.choice([rng.random(), 1.0, 2.0, float("nan"), float("inf"), 100.0, -3.0])
        rules.loss(step, value)
        if rules.losses:
            assert rules._median() == statistics.median(rules.losses), step
    assert len(rules.losses) == DynamicsThresholds().loss_window
