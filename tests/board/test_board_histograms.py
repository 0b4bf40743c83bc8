"""Histogram bands match TensorBoard's distribution compressor; rebinning keeps the mass; the restart rule."""
from __future__ import annotations

import numpy as np
import pytest

from board.data.histograms import BASIS_POINTS, HistogramPoint, HistogramSeries, percentiles, rebin


def point(edges: np.ndarray, counts: np.ndarray, step: int = 0, minimum: float | None = None,
          maximum: float | None = None) -> HistogramPoint:
    return HistogramPoint(step, 0.0, float(edges[0] if minimum is None else minimum),
                          float(edges[-1] if maximum is None else maximum), float(counts.sum()), edges, counts)


@pytest.mark.parametrize("seed", range(6))
def test_percentiles_equal_tensorboard_compress_histogram_proto(seed: int) -> None:
    from tensorboard.compat.proto.summary_pb2 import HistogramProto
    from tensorboard.plugins.distribution.compressor import compress_histogram_proto

    rng = np.random.default_rng(seed)
    data = rng.standard_normal(2000) * (seed + 1)
    counts, edges = np.histogram(data, bins=int(rng.integers(5, 60)))
    counts = counts.astype(np.float64)
    counts[rng.integers(0, len(counts), 3)] = 0.0  # empty buckets, as sparse histograms have
    ours = percentiles(point(edges, counts, minimum=data.min(), maximum=data.max()))
    proto = HistogramProto(min=data.min(), max=data.max(), num=counts.sum(), bucket_limit=edges[1:].tolist(),
                           bucket=counts.tolist())
    theirs = [value for _, value in compress_histogram_proto(proto, BASIS_POINTS)]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_rebin_keeps_the_mass_and_spreads_buckets_uniformly() -> None:
    histogram = point(np.array([0.0, 1.0, 3.0]), np.array([4.0, 8.0]))
    np.testing.assert_allclose(rebin(histogram, np.array([0.0, 0.5, 1.0, 2.0, 3.0])), [2.0, 2.0, 4.0, 4.0])
    assert rebin(histogram, np.linspace(-5, 5, 41)).sum() == pytest.approx(12.0)


def test_histogram_series_restart_rule() -> None:
    series = HistogramSeries()
    for step in (0, 10, 20, 30):
        series.append(point(np.array([0.0, 1.0]), np.array([1.0]), step=step))
    series.append(point(np.array([0.0, 1.0]), np.array([1.0]), step=20))
    assert series.steps().tolist() == [0, 10, 20] and series.superseded == 2 and series.revision == 1
