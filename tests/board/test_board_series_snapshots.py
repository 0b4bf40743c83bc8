"""ScalarSeries snapshots: what readers get without a lock is consistent and never changes after it is published."""
from __future__ import annotations

import threading

import numpy as np

from board.data.series import ScalarColumns, ScalarSeries


def extend(series: ScalarSeries, steps: list[int] | np.ndarray) -> None:
    array = np.asarray(steps, np.int64)
    series.extend(array, array * 10.0, array * 0.5)


def frozen(columns: ScalarColumns) -> tuple[list, list, list]:
    return columns.steps.tolist(), columns.wall_times.tolist(), columns.values.tolist()


def test_points_are_visible_to_readers_only_once_published() -> None:
    series = ScalarSeries()
    extend(series, [0, 1, 2])
    assert len(series.snapshot()[0]) == 0 and series.snapshot()[1] == 0
    series.publish()
    assert series.snapshot()[0].steps.tolist() == [0, 1, 2]
    extend(series, [3, 4])
    assert series.snapshot()[0].steps.tolist() == [0, 1, 2]  # the writer's view has 5, readers still 3
    series.publish()
    assert series.snapshot()[0].steps.tolist() == [0, 1, 2, 3, 4]


def test_a_published_snapshot_never_changes_through_appends_and_restarts() -> None:
    series = ScalarSeries()
    extend(series, range(0, 100))
    series.publish()
    held = [(series.snapshot(), frozen(series.snapshot()[0]))]
    for steps in ([100, 101], range(102, 300), [50, 51, 52], [53], range(10, 20), range(20, 400)):
        extend(series, steps)
        series.publish()
        held.append((series.snapshot(), frozen(series.snapshot()[0])))
    for (columns, _revision), copy in held:
        assert frozen(columns) == copy  # later appends were written past it, a restart into a new buffer
    revisions = [revision for (_, revision), _ in held]
    assert revisions == [0, 0, 0, 1, 1, 2, 2]
    assert series.snapshot()[0].steps.tolist() == list(range(0, 400))


def test_live_appends_reuse_the_buffer_instead_of_copying_the_series() -> None:
    series = ScalarSeries()
    extend(series, range(1000))
    series.publish()
    first = series.snapshot()[0]
    assert first.steps.base is None or len(first.steps.base) == 1000  # the first load is allocated exactly
    extend(series, [1000])
    series.publish()
    buffer = series.snapshot()[0].steps.base
    assert buffer is not None and len(buffer) == 1001 + 500  # the first live append leaves room for half as much again
    for step in range(1001, 1501):
        extend(series, [step])
        series.publish()
        assert series.snapshot()[0].steps.base is buffer  # no reallocation while there is room
    extend(series, [1501])
    series.publish()
    assert series.snapshot()[0].steps.base is not buffer and len(series.snapshot()[0]) == 1502


def test_readers_in_other_threads_always_see_consistent_series() -> None:
    """A writer appends (with restarts) and publishes while readers check every snapshot they get: equal column
    lengths, strictly increasing steps, values that belong to their steps."""
    series = ScalarSeries()
    stop = threading.Event()
    problems: list[str] = []
    seen: list[int] = []

    def read() -> None:
        while not stop.is_set():
            columns, _ = series.snapshot()
            steps, wall_times, values = columns.steps, columns.wall_times, columns.values
            if not len(steps) == len(wall_times) == len(values):
                problems.append("lengths differ")
            elif len(steps) and (np.any(np.diff(steps) <= 0) or np.any(wall_times != steps * 10.0)
                                 or np.any(values != steps * 0.5)):
                problems.append(f"inconsistent snapshot of {len(steps)} points")
            seen.append(len(steps))

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    rng = np.random.default_rng(0)
    last = 0
    for _ in range(3000):
        if rng.random() < 0.02:
            last = max(0, last - int(rng.integers(1, 50)))  # a restart from an earlier step
        count = int(rng.integers(1, 20))
        extend(series, np.arange(last, last + count))
        last += count
        series.publish()
    stop.set()
    for reader in readers:
        reader.join()
    assert problems == [] and len(set(seen)) > 10  # the readers saw many different lengths, all consistent
