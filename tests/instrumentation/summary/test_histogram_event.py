"""histogram_event is encoded by hand: byte-identical to serializing the same Event with protobuf."""
from __future__ import annotations

import numpy as np
import pytest

from instrumentation.format import protos
from instrumentation.summary.bucketing import HistogramData, histogram_from_values
from instrumentation.summary.builders import histogram_event


def by_protobuf(tag: str, histogram: HistogramData, step: int, wall_time: float) -> bytes:
    histo = protos.HistogramProto(min=histogram.minimum, max=histogram.maximum, num=histogram.num,
                                  sum=histogram.sum, sum_squares=histogram.sum_squares,
                                  bucket_limit=[float(e) for e in histogram.edges[1:]],
                                  bucket=[float(c) for c in histogram.counts])
    value = protos.Summary.Value(tag=tag, histo=histo)
    return protos.Event(wall_time=wall_time, step=step, summary=protos.Summary(value=[value])).SerializeToString()


def histograms() -> list[HistogramData]:
    rng = np.random.default_rng(0)
    found = [histogram_from_values(rng.standard_normal(size).astype(dtype) * scale, bins)
             for size, dtype, scale, bins in [(1, np.float32, 1.0, "tensorflow"), (8192, np.float32, 0.1, "tensorflow"),
                                              (1000, np.float64, 1e6, 30), (5000, np.float16, 1.0, "auto"),
                                              (3, np.float64, 0.0, "tensorflow"), (200_000, np.float64, 1.0, 5000)]]
    with_nan = rng.standard_normal(50)
    with_nan[3], with_nan[7] = np.nan, np.inf
    found.append(histogram_from_values(with_nan))
    found.append(HistogramData(-0.0, 0.0, 0.0, -0.0, 0.0, np.array([0.0]), np.array([], dtype=np.float64)))
    return found


@pytest.mark.parametrize("step", [0, 1, 127, 128, 300, 2 ** 31, 2 ** 62, -1, -(2 ** 63), 2 ** 63 - 1])
@pytest.mark.parametrize("wall_time", [0.0, -0.0, 1.7e9, float("nan")])
def test_bytes_equal_protobuf(step: int, wall_time: float) -> None:
    for tag in ("w", "weight/features.0.weight", "é/" + "x" * 200):
        for histogram in histograms():
            assert histogram_event(tag, histogram, step, wall_time) == by_protobuf(tag, histogram, step, wall_time)


def test_a_step_beyond_int64_is_refused_as_protobuf_refuses_it() -> None:
    histogram = histograms()[0]
    with pytest.raises(Exception) as expected:
        by_protobuf("w", histogram, 2 ** 63, 1.0)
    with pytest.raises(type(expected.value)):
        histogram_event("w", histogram, 2 ** 63, 1.0)
