"""Smoothing: TensorBoard's debiased EMA on even steps, decay by step distance on uneven ones, incremental."""
from __future__ import annotations

import numpy as np
import pytest

from board.data.smoothing import ema


def tensorboard_ema(values: np.ndarray, weight: float) -> np.ndarray:
    """TensorBoard's own loop (vz_line_chart2 resmoothDataset): per point, ignoring step spacing."""
    last, out = 0.0, []
    for count, value in enumerate(values, start=1):
        last = last * weight + (1 - weight) * value
        out.append(last / (1 - weight**count))
    return np.array(out)


def reference(steps: np.ndarray, values: np.ndarray, weight: float) -> np.ndarray:
    """The documented recurrence, point by point, with Δ = median spacing of the first 1000 gaps."""
    spacing = float(np.median(np.diff(steps[:1001])))
    mean = mass = 0.0
    previous = None
    out = []
    for step, value in zip(steps.tolist(), values.tolist()):
        if not np.isfinite(value):
            out.append(value)
            continue
        alpha = weight if previous is None else weight ** ((step - previous) / spacing)
        mean = alpha * mean + (1 - alpha) * value
        mass = alpha * mass + (1 - alpha)
        out.append(mean / mass)
        previous = step
    return np.array(out)


@pytest.mark.parametrize("weight", [0.3, 0.6, 0.95, 0.999])
def test_even_steps_equal_tensorboard(weight: float) -> None:
    values = np.random.default_rng(1).normal(size=3000)
    smoothed, _ = ema(np.arange(0, 30000, 10), values, weight)
    np.testing.assert_allclose(smoothed, tensorboard_ema(values, weight), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("weight", [0.05, 0.6, 0.9])
def test_uneven_steps_decay_by_distance(weight: float) -> None:
    rng = np.random.default_rng(2)
    steps = np.cumsum(rng.integers(1, 30, 4000))
    steps[2500:] += 10_000  # a long gap: the past must have decayed almost completely
    values = rng.normal(size=4000) * 1e3
    values[[5, 77, 3000]] = [np.nan, np.inf, -np.inf]
    smoothed, _ = ema(steps, values, weight)
    expected = reference(steps, values, weight)
    np.testing.assert_allclose(smoothed, expected, rtol=1e-7)
    assert np.isnan(smoothed[5]) and smoothed[77] == np.inf and smoothed[3000] == -np.inf


def test_a_gap_weighs_the_past_less_than_tensorboard_does() -> None:
    steps = np.array([0, 1, 2, 3, 100])
    values = np.array([0.0, 0.0, 0.0, 0.0, 1.0])
    smoothed, _ = ema(steps, values, 0.9)
    assert smoothed[-1] > 0.99  # after 97 typical spacings the zeros weigh 0.9**97 ≈ 4e-5
    assert tensorboard_ema(values, 0.9)[-1] < 0.3  # TensorBoard still averages them in


def test_incremental_continuation_matches_full_computation() -> None:
    rng = np.random.default_rng(3)
    steps = np.cumsum(rng.integers(1, 5, 5000))
    values = rng.normal(size=5000)
    full, _ = ema(steps, values, 0.8)
    head, state = ema(steps[:3000], values[:3000], 0.8)
    tail, _ = ema(steps[3000:], values[3000:], 0.8, state)
    np.testing.assert_allclose(np.concatenate([head, tail]), full, rtol=1e-9)


def test_zero_weight_is_identity_and_bad_weight_rejected() -> None:
    values = np.array([1.0, 5.0, 2.0])
    np.testing.assert_array_equal(ema(np.arange(3), values, 0.0)[0], values)
    with pytest.raises(ValueError):
        ema(np.arange(3), values, 1.0)


@pytest.mark.parametrize("weight", [0.6, 0.9, 0.99, 0.999])
@pytest.mark.parametrize("value", [0.0625, 0.1, -3.3e-7, 2.28e5])
def test_a_constant_series_smooths_to_exactly_that_constant(weight: float, value: float) -> None:
    rng = np.random.default_rng(0)
    even = np.arange(675)
    uneven = np.cumsum(rng.integers(1, 9, 675))
    for steps in (even, uneven):
        values = np.full(len(steps), np.float32(value), dtype=np.float64)
        smoothed, state = ema(steps, values, weight)
        assert set(smoothed.tolist()) == {values[0]}
        more, _ = ema(steps[-1] + 1 + np.arange(50), np.full(50, values[0]), weight, state)  # appended later
        assert set(more.tolist()) == {values[0]}


def test_clamping_keeps_smoothed_values_inside_the_values_seen_so_far() -> None:
    values = np.random.default_rng(1).normal(size=5000) * 1e-3 + 1.0
    smoothed, _ = ema(np.arange(5000), values, 0.99)
    assert (smoothed >= np.minimum.accumulate(values)).all() and (smoothed <= np.maximum.accumulate(values)).all()
