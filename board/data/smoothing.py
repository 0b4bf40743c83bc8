"""Debiased exponential moving average that accounts for uneven step spacing, computed on the full series.

For points (s_i, v_i) with steps strictly increasing and a slider weight w in [0, 1):

    α_i = w ** ((s_i - s_{i-1}) / Δ)          (α_0 = w)
    m_i = α_i · m_{i-1} + (1 - α_i) · v_i     (m_{-1} = 0)
    d_i = α_i · d_{i-1} + (1 - α_i)           (d_{-1} = 0, the debiasing mass)
    smoothed_i = m_i / d_i

Δ is the series' typical step spacing (the median of its first `SPACING_SAMPLE` gaps), so with even spacing
this is exactly TensorBoard's debiased EMA, and a gap of k typical spacings decays the past by w**k instead
of w. Non-finite values are passed through unchanged and do not enter the average. Each smoothed value is clamped
to the running minimum and maximum of the values before it (where the exact average lies), so rounding never
draws noise on a constant series.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SPACING_SAMPLE = 1000
_MAX_LOG_SPAN = 500.0  # e**500 · (values scaled to |v| <= 1) · 65536 terms stays far from float64 overflow


def typical_spacing(steps: np.ndarray) -> float:
    gaps = np.diff(steps[: SPACING_SAMPLE + 1]).astype(np.float64)
    return float(np.median(gaps)) if len(gaps) else 1.0


@dataclass(frozen=True, slots=True)
class EmaState:
    """Where a smoothed curve ended, so that points appended later are smoothed without redoing the past."""

    weight: float
    spacing: float
    last_step: float
    mean: float
    mass: float
    low: float  # the smallest and largest finite value averaged so far
    high: float


def ema(steps: np.ndarray, values: np.ndarray, weight: float,
        state: EmaState | None = None) -> tuple[np.ndarray, EmaState | None]:
    """The smoothed curve (same length as `values`) and the state after its last finite point.

    With `state` from an earlier call on the points before `steps[0]`, the result is the continuation of that
    curve. `weight` 0 returns a copy of `values`.
    """
    values = np.asarray(values, np.float64)
    if weight <= 0 or len(values) == 0:
        return values.copy(), state
    if not 0 <= weight < 1:
        raise ValueError(f"smoothing weight must be in [0, 1), got {weight}")
    steps = np.asarray(steps)
    spacing = state.spacing if state is not None else typical_spacing(steps)
    with np.errstate(over="ignore", invalid="ignore"):  # one sum tells that every value is finite, usually
        all_finite = bool(np.isfinite(values.sum())) or bool(np.isfinite(values).all())
    finite = None if all_finite else np.isfinite(values)
    sf, vf = (steps, values) if all_finite else (steps[finite], values[finite])
    if len(vf) == 0:
        return values.copy(), state
    carry = (state.last_step / spacing, state.mean, state.mass) if state is not None else None
    if len(sf) > 1 and _evenly_spaced(sf):  # the usual case: one α for every point after the first
        first_gap = (float(sf[0]) - state.last_step) / spacing if state is not None else 1.0
        alphas = weight ** first_gap, weight ** (float(sf[1] - sf[0]) / spacing)
        smoothed, mean, mass = _constant_gap_ema(vf, *alphas, carry)
    else:
        smoothed, mean, mass = _debiased_ema(sf.astype(np.float64) / spacing, vf, -np.log(weight), carry)
    low, high = _running_bounds(vf, state)
    # NOTE: each smoothed value is a convex combination of the values so far, so it lies between their running
    # minimum and maximum; clamping there removes rounding noise without moving a correct value (a constant
    # series smooths to exactly that constant).
    np.clip(smoothed, low, high, out=smoothed)
    new_state = EmaState(weight, spacing, float(sf[-1]), mean, mass, float(low[-1]), float(high[-1]))
    if all_finite:
        return smoothed, new_state
    out = values.copy()
    out[finite] = smoothed
    return out, new_state


def _running_bounds(values: np.ndarray, state: EmaState | None) -> tuple[np.ndarray, np.ndarray]:
    low, high = np.minimum.accumulate(values), np.maximum.accumulate(values)
    if state is not None:
        np.minimum(low, state.low, out=low)
        np.maximum(high, state.high, out=high)
    return low, high


def _evenly_spaced(steps: np.ndarray) -> bool:
    """Whether every gap is the same; O(1) for integer steps 0, 1, 2, … apart by one (n-1 gaps of at least 1
    each, as strictly increasing integers are, summing to n-1 are all 1)."""
    if steps.dtype.kind in "iu" and int(steps[-1]) - int(steps[0]) == len(steps) - 1:
        return True
    gaps = np.diff(steps)
    return bool(gaps.min() == gaps.max())


def _debiased_ema(
    x: np.ndarray, v: np.ndarray, decay: float, carry: tuple[float, float, float] | None
) -> tuple[np.ndarray, float, float]:
    """Solve both recurrences in closed form, row by row of a (rows, width) reshape, all rows at once.

    With R the cumulative log-decay since the row's first point, inside a row
    m_i = e^{-R_i} (carry · α_first + Σ_{j≤i} (1-α_j) v_j e^{R_j}), and the same for d with v = 1; the
    factor e^{-R_i} cancels in m_i / d_i, so only the carry between rows is computed sequentially
    (one scalar update per row). Rows are sized so that R stays below `_MAX_LOG_SPAN`; the rare row that
    an outlier gap pushes past it is solved point by point.
    """
    n = len(x)
    gaps = np.empty(n)
    gaps[0] = x[0] - carry[0] if carry else 1.0
    np.subtract(x[1:], x[:-1], out=gaps[1:])
    step_decay = decay * gaps
    high_decay = float(np.quantile(step_decay[:: max(1, n // 100_000)], 0.99))
    width = int(np.clip(_MAX_LOG_SPAN / max(high_decay, 1e-12), 1, 65536))
    rows = -(-n // width)
    scale = float(np.max(np.abs(v))) or 1.0
    padded = rows * width
    step_decay = np.pad(step_decay, (0, padded - n)).reshape(rows, width)
    values = np.pad(v / scale, (0, padded - n)).reshape(rows, width)
    relative = np.cumsum(step_decay, axis=1)
    relative -= relative[:, :1]
    overflow = relative[:, -1] > _MAX_LOG_SPAN
    relative[overflow] = 0.0
    weights = -np.expm1(-step_decay) * np.exp(relative)
    mean = np.cumsum(weights * values, axis=1)
    mass = np.cumsum(weights, axis=1)
    first_alpha = np.exp(-step_decay[:, 0])
    end_shrink = np.exp(-relative[:, -1])
    mean_carries, mass_carries = np.zeros(rows), np.zeros(rows)
    mean_carry, mass_carry = (carry[1] / scale, carry[2]) if carry else (0.0, 0.0)
    row_ends = zip(mean[:, -1].tolist(), mass[:, -1].tolist(), first_alpha.tolist(), end_shrink.tolist())
    for row, (mean_end, mass_end, alpha, shrink) in enumerate(row_ends):
        mean_carries[row], mass_carries[row] = mean_carry, mass_carry
        if overflow[row]:
            mean[row], mass[row] = _row_pointwise(step_decay[row], values[row], mean_carry, mass_carry)
            mean_carry, mass_carry = float(mean[row, -1]), float(mass[row, -1])
            mean_carries[row] = mass_carries[row] = 0.0
            continue
        mean_carry = (mean_end + mean_carry * alpha) * shrink
        mass_carry = (mass_end + mass_carry * alpha) * shrink
    first_alpha[overflow] = 0.0
    mean += (mean_carries * first_alpha)[:, None]
    mass += (mass_carries * first_alpha)[:, None]
    flat_mean, flat_mass = mean.reshape(-1)[:n], mass.reshape(-1)[:n]
    # NOTE: the row's e^{-R} factor cancels in the ratio but not in the state handed to the next call.
    last_shrink = float(np.exp(-relative.reshape(-1)[n - 1])) if not overflow[-1] else 1.0
    return flat_mean / flat_mass * scale, float(flat_mean[-1]) * last_shrink * scale, float(flat_mass[-1]) * last_shrink


def _constant_gap_ema(
    v: np.ndarray, first_alpha: float, alpha: float, carry: tuple[float, float, float] | None
) -> tuple[np.ndarray, float, float]:
    """The recurrences when every α after the first is the same: m by `linear_recurrence` (a few numpy passes),
    and d_i = 1 - α^i (1 - d_0) in closed form, computed only while it differs from 1."""
    mean_before, mass_before = (carry[1], carry[2]) if carry else (0.0, 0.0)
    first_mean = first_alpha * mean_before + (1 - first_alpha) * float(v[0])
    first_mass = first_alpha * mass_before + (1 - first_alpha)
    n = len(v)
    mean = np.empty(n)
    mean[0] = first_mean
    if n > 1:
        mean[1:] = linear_recurrence(alpha, v[1:], first_mean, gain=1.0 - alpha)
    # α^i (1 - d_0) < 2^-60 leaves 1.0 exactly, so only a head of the series needs dividing.
    head = min(n, int(np.ceil(-60 * np.log(2) / np.log(alpha))) + 1) if 0 < alpha < 1 else n
    mass_head = 1.0 - alpha ** np.arange(head, dtype=np.float64) * (1.0 - first_mass)
    last_mean, last_mass = float(mean[-1]), float(mass_head[-1]) if head == n else 1.0
    mean[:head] /= mass_head  # now the smoothed curve
    return mean, last_mean, last_mass


_MAX_ROW_LOG_SPAN = 200.0  # a row's weights span e^200 at most: far from overflow for |b| up to 1e100


def linear_recurrence(a: float, b: np.ndarray, before: float, gain: float = 1.0) -> np.ndarray:
    """y_i = a·y_{i-1} + gain·b_i with y_{-1} = `before`, for 0 < a <= 1, without a Python loop over points.

    Rows of width W of a (rows, W) reshape are solved at once in closed form, y_j = a^j Σ_{t<=j} a^{-t} b_t
    (one cumsum), W chosen so that a^{-W} stays within e^200; the value each row starts from is the same
    recurrence over the rows' last values with coefficient a^W (solved recursively), added as a^{j+1}·carry.
    Each term is scaled back by a^j before it meets the others, so rounding stays that of the point loop.
    """
    n = len(b)
    if n == 0:
        return np.empty(0)
    log_a = float(np.log(a))
    if log_a < -40:  # a < 4e-18: a² y_{i-2} is below rounding, so y_i = b_i + a·b_{i-1} (the rows' carries land here)
        out = np.multiply(b, gain, dtype=np.float64)
        out[0] += a * before
        out[1:] += a * out[:-1].copy()
        return out
    width = n if log_a == 0 else int(min(n, max(1, _MAX_ROW_LOG_SPAN // -log_a), 1 << 16))
    rows, full = -(-n // width), n // width
    j = np.arange(width, dtype=np.float64)
    grow, shrink = gain * np.exp(-log_a * j), np.exp(log_a * j)
    block = np.empty((rows, width))
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is detected on `ends` below
        np.multiply(b[:full * width].reshape(full, width), grow, out=block[:full])
        if full < rows:
            block[-1] = 0.0
            block[-1, :n - full * width] = b[full * width:] * grow[:n - full * width]
        np.cumsum(block, axis=1, out=block)
        ends = block[:, -1] * shrink[-1]
    if not np.isfinite(ends).all():  # |b| near the float64 limit: a^{-t} b_t overflowed; solve scaled down
        peak = float(np.max(np.abs(b)))
        return linear_recurrence(a, b / peak, before / peak, gain) * peak
    starts = np.empty(rows)
    starts[0] = before
    if rows > 1:
        starts[1:] = linear_recurrence(float(np.exp(log_a * width)), ends[:-1], before)
    block += (a * starts)[:, None]
    block *= shrink
    return block.reshape(-1)[:n]


def _row_pointwise(step_decay: np.ndarray, values: np.ndarray, mean: float,
                   mass: float) -> tuple[np.ndarray, np.ndarray]:
    means, masses = np.empty(len(values)), np.empty(len(values))
    for i, (decay, value) in enumerate(zip(step_decay.tolist(), values.tolist())):
        alpha = float(np.exp(-decay))
        mean = alpha * mean + (1 - alpha) * value
        mass = alpha * mass + (1 - alpha)
        means[i], masses[i] = mean, mass
    return means, masses
