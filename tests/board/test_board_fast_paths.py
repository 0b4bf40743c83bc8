"""The fast paths agree with the slow ones: the even-spacing EMA with the point-by-point recurrence and the
blocked solver; `/api/scalars` bytes from orjson with the documented JSON (NaN/±Inf as strings)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from board.data.export import scalars_json, scalars_json_bytes
from board.data.series import ScalarColumns
from board.data.smoothing import _debiased_ema, ema, linear_recurrence
from test_board_smoothing import reference  # the documented recurrence, one point at a time


@pytest.mark.parametrize("weight", [0.01, 0.6, 0.99, 0.9999])
def test_even_spacing_fast_path_equals_the_recurrence(weight: float) -> None:
    rng = np.random.default_rng(5)
    steps = np.arange(7, 7 + 5 * 20_000, 5)
    values = rng.normal(size=len(steps)) * 100 + 3
    values[[10, 11, 5000]] = [np.nan, np.inf, -np.inf]  # taken out: the rest stays evenly spaced only in part
    smoothed, _ = ema(steps, values, weight)
    np.testing.assert_allclose(smoothed, reference(steps, values, weight), rtol=1e-9, atol=1e-9)
    clean = rng.normal(size=len(steps))
    np.testing.assert_allclose(ema(steps, clean, weight)[0], reference(steps, clean, weight), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("weight", [0.6, 0.999])
def test_even_spacing_fast_path_equals_the_blocked_solver(weight: float) -> None:
    values = np.cumsum(np.random.default_rng(6).normal(size=300_000))
    x = np.arange(len(values), dtype=np.float64)
    fast, _ = ema(np.arange(len(values)), values, weight)
    blocked, _, _ = _debiased_ema(x, values, -np.log(weight), None)
    np.testing.assert_allclose(fast, blocked, rtol=1e-9, atol=1e-11 * np.abs(values).max())


def test_even_spacing_continues_from_a_state_across_a_gap() -> None:
    rng = np.random.default_rng(7)
    steps = np.concatenate([np.arange(0, 3000), np.arange(3500, 6000)])  # each part even, a gap between
    values = rng.normal(size=len(steps))
    full, _ = ema(steps, values, 0.9)
    head, state = ema(steps[:3000], values[:3000], 0.9)
    tail, _ = ema(steps[3000:], values[3000:], 0.9, state)
    expected = reference(steps, values, 0.9)
    np.testing.assert_allclose(full, expected, rtol=1e-9)
    np.testing.assert_allclose(np.concatenate([head, tail]), expected, rtol=1e-9)


@pytest.mark.parametrize("start", [0, 3])
def test_scalars_json_bytes_equal_the_documented_document(start: int) -> None:
    steps = np.arange(6, dtype=np.int64) * 10
    values = np.array([0.1, 1e-7, np.nan, np.inf, -np.inf, 1e300])
    for column in (values, np.array([0.1, 1e-7, 2.5, -3.0, 1e300, 1 / 3])):
        columns = ScalarColumns(steps, 1.7e9 + np.arange(6) * 0.001, column)
        ours = json.loads(scalars_json_bytes("r", "t/x", columns, 2, start))
        assert ours == scalars_json("r", "t/x", columns, 2, start)
    assert json.loads(scalars_json_bytes("r", "t", columns, 0, 0))["values"][:2] == [0.1, 1e-7]
    nonfinite = json.loads(scalars_json_bytes("r", "t", ScalarColumns(steps, steps * 1.0, values), 0))["values"]
    assert nonfinite[2:5] == ["NaN", "Infinity", "-Infinity"]


@pytest.mark.parametrize(("a", "scale"), [(0.6, 1.0), (0.999, 1.0), (1e-30, 1.0), (1.0, 1.0), (0.5, 1e306)])
def test_linear_recurrence_equals_the_loop(a: float, scale: float) -> None:
    b = np.random.default_rng(8).normal(size=70_001) * scale
    expected, y = np.empty(len(b)), 0.25 * scale
    for i, value in enumerate(b.tolist()):
        y = a * y + 0.5 * value
        expected[i] = y
    ours = linear_recurrence(a, b, 0.25 * scale, gain=0.5)
    np.testing.assert_allclose(ours, expected, rtol=1e-9, atol=1e-9 * scale * (1 if a < 1 else 300))


def test_the_board_does_not_import_scipy_signal() -> None:
    """scipy.signal costs about 1.4 s and 70 MiB at start-up; the even-spacing EMA needs only numpy."""
    import subprocess
    import sys

    code = "import sys, board.app; print('scipy.signal' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
