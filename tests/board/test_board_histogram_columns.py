"""Histograms stored as columns hold exactly what the reader decoded (edges, counts, moments), keep the restart
rule, survive the cache round trip, and match the per-object representation they replaced."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from board.data.histogram_columns import HistogramColumns, HistogramPoint, HistogramSeries
from board.data.store import LogdirStore
from instrumentation.format import FILE_VERSION, EventFileReader, HistogramValue, frame_records, protos

EVENTS = "events.out.tfevents.1700000000.host.1.0"


def _histo_record(tag: str, step: int, rng: np.random.Generator) -> bytes:
    data = rng.normal(size=int(rng.integers(1, 200)))
    counts, edges = np.histogram(data, bins=int(rng.integers(1, 40)))
    histo = protos.HistogramProto(min=float(data.min()), max=float(data.max()), num=float(data.size),
                                  sum=float(data.sum()), sum_squares=float((data ** 2).sum()),
                                  bucket_limit=edges[1:].tolist(), bucket=counts.astype(float).tolist())
    return protos.Event(wall_time=1.7e9 + step, step=step, summary=protos.Summary(
        value=[protos.Summary.Value(tag=tag, histo=histo)])).SerializeToString()


def _write_log(path: Path, steps: list[int], seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    records = [protos.Event(wall_time=1.7e9, file_version=FILE_VERSION).SerializeToString()]
    for step in steps:
        records += [_histo_record("w", step, rng), _histo_record("b", step, rng)]
        records += [protos.Event(wall_time=1.7e9 + step, step=step, summary=protos.Summary(value=[
            protos.Summary.Value(tag="loss", simple_value=float(step))])).SerializeToString()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(frame_records(records))


def _decoded(path: Path, tag: str) -> list[HistogramValue]:
    return [v for e in EventFileReader(path).read() for v in e.values if isinstance(v, HistogramValue) and v.tag == tag]


def _assert_points_equal(points: list[HistogramPoint], values: list[HistogramValue]) -> None:
    assert len(points) == len(values)
    for point, value in zip(points, values):
        assert (point.step, point.wall_time, point.min, point.max, point.num, point.sum, point.sum_squares) == (
            value.step, value.wall_time, value.min, value.max, value.num, value.sum, value.sum_squares)
        np.testing.assert_array_equal(point.edges, value.edges)
        np.testing.assert_array_equal(point.counts, value.counts)


@pytest.mark.parametrize("cache", [False, True])
def test_store_columns_equal_the_decoded_histograms(tmp_path: Path, cache: bool) -> None:
    path = tmp_path / "logs" / "run" / EVENTS
    _write_log(path, list(range(0, 3000, 3)))
    cache_root = tmp_path / "cache" if cache else None
    first = LogdirStore(tmp_path / "logs", cache_root=cache_root, workers=0)
    first.refresh()
    stores = [first]
    if cache:  # the re-open maps the saved columns
        reopened = LogdirStore(tmp_path / "logs", cache_root=cache_root, workers=0)
        reopened.refresh()
        stores.append(reopened)
    for store in stores:
        for tag in ("w", "b"):
            _assert_points_equal(store.histograms("run", tag), _decoded(path, tag))


def test_restart_rule_and_slices_match_a_list_of_points() -> None:
    rng = np.random.default_rng(4)
    values = []
    for step in [*range(10), *range(5, 12), 3, 4]:  # two restarts
        edges = np.sort(rng.normal(size=int(rng.integers(1, 6)) + 1))
        counts = rng.integers(0, 9, len(edges) - 1).astype(np.float64)
        values.append(HistogramPoint(step, float(step), float(edges[0]), float(edges[-1]), float(counts.sum()), edges,
                                     counts, float(rng.normal()), float(rng.random())))
    series = HistogramSeries()
    series.extend(HistogramColumns.from_values(values[:13]))
    for value in values[13:]:
        series.append(value)
    # the oracle: the rule applied to a plain list
    kept: list[HistogramPoint] = []
    dropped = 0
    for value in values:
        dropped += sum(p.step >= value.step for p in kept)
        kept = [p for p in kept if p.step < value.step] + [value]
    points = series.points
    assert [p.step for p in points] == [p.step for p in kept] == [0, 1, 2, 3, 4]
    for ours, expected in zip(points, kept):
        assert (ours.min, ours.max, ours.num, ours.sum, ours.sum_squares) == (expected.min, expected.max, expected.num,
                                                                              expected.sum, expected.sum_squares)
        np.testing.assert_array_equal(ours.edges, expected.edges)
        np.testing.assert_array_equal(ours.counts, expected.counts)
    assert series.revision == 2 and series.superseded == dropped == 14 and series.last_step == 4
    whole = HistogramColumns.from_values(values)
    middle = whole.slice(4, 9)
    assert [p.step for p in middle.points()] == [v.step for v in values[4:9]]
    np.testing.assert_array_equal(middle.points()[2].edges, values[6].edges)
    glued = HistogramColumns.concatenate([whole.slice(0, 4), middle, whole.slice(9, len(values))])
    assert all(np.array_equal(a.counts, b.counts) and np.array_equal(a.edges, b.edges)
               for a, b in zip(glued.points(), whole.points()))


def test_a_malformed_histogram_keeps_the_buckets_that_pair_up() -> None:
    odd = HistogramPoint(1, 0.0, 0.0, 3.0, 3.0, np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.0, 2.0]))
    good = HistogramPoint(2, 0.0, 0.0, 1.0, 1.0, np.array([0.0, 1.0]), np.array([1.0]))
    first, second = HistogramColumns.from_values([odd, good]).points()
    np.testing.assert_array_equal(first.edges, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(second.edges, [0.0, 1.0])
