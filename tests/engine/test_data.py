"""Tests of engine.data: tf.data semantics against numpy oracles, threads that stop, and the hook reports."""
from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

from engine import hooks
from engine.data import AUTOTUNE, Dataset


class FakeTensor:
    """Duck-typed stand-in for an engine Tensor: only ``.numpy()``."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = np.asarray(array)

    def numpy(self) -> np.ndarray:
        return self._array


class Recorder:
    """A hook observer keeping the step-begin and data-wait events in arrival order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.threads: set[str] = set()

    def step_begin(self, event: hooks.StepEvent) -> None:
        self.events.append(("step_begin", event.step))

    def data_wait(self, event: hooks.DataWaitEvent) -> None:
        self.threads.add(threading.current_thread().name)
        self.events.append(("data_wait", event.wait_ns))

    def waits(self) -> list[int]:
        return [value for kind, value in self.events if kind == "data_wait"]


@pytest.fixture(autouse=True)
def closed_step():
    yield
    hooks.reset_step()  # every __next__ opens a step; leave the process-global step state as found


@pytest.fixture
def recorder():
    observer = hooks.subscribe(Recorder())
    try:
        yield observer
    finally:
        hooks.unsubscribe(observer)


def pipeline_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("engine.data")]


def xy(n: int = 10) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(n * 3, dtype=np.float32).reshape(n, 3), np.arange(n, dtype=np.int64) * 10


def labels_of(batches: list) -> np.ndarray:
    return np.concatenate([y for _, y in batches])


# --- from_tensor_slices ------------------------------------------------------------------------------------

def test_slices_of_one_array_are_its_rows_as_numpy_arrays():
    x, _ = xy()
    rows = list(Dataset.from_tensor_slices(x))
    assert len(rows) == 10 and all(type(row) is np.ndarray for row in rows)
    np.testing.assert_array_equal(np.stack(rows), x)


def test_scalar_rows_are_zero_dimensional_arrays():
    rows = list(Dataset.from_tensor_slices([4, 5, 6]))
    assert [type(r) for r in rows] == [np.ndarray] * 3 and [r.shape for r in rows] == [()] * 3
    assert [int(r) for r in rows] == [4, 5, 6]


def test_tuple_list_and_dict_structures_are_kept():
    x, y = xy(4)
    for elements in ((x, y), [x, y]):
        got = list(Dataset.from_tensor_slices(elements))
        assert all(type(e) is tuple and len(e) == 2 for e in got)
        np.testing.assert_array_equal(np.stack([e[0] for e in got]), x)
        np.testing.assert_array_equal([e[1] for e in got], y)
    got = list(Dataset.from_tensor_slices({"image": x, "label": y}))
    assert [list(e) for e in got] == [["image", "label"]] * 4
    np.testing.assert_array_equal([e["label"] for e in got], y)
    nested = list(Dataset.from_tensor_slices(({"a": x}, y)))
    np.testing.assert_array_equal(nested[2][0]["a"], x[2])


def test_a_list_of_numbers_is_one_array_not_components():
    rows = list(Dataset.from_tensor_slices([[1, 2], [3, 4], [5, 6]]))
    np.testing.assert_array_equal(np.stack(rows), [[1, 2], [3, 4], [5, 6]])


def test_tensor_components_become_numpy():
    x, y = xy(5)
    got = list(Dataset.from_tensor_slices((FakeTensor(x), FakeTensor(y))).batch(5))
    assert type(got[0][0]) is np.ndarray
    np.testing.assert_array_equal(got[0][0], x)


def test_different_first_dimensions_name_the_lengths():
    with pytest.raises(ValueError, match=r"same first dimension.*\[0\]: 3, \[1\]: 4"):
        Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(ValueError, match=r"\['x'\]: 2, \['y'\]: 5"):
        Dataset.from_tensor_slices({"x": np.zeros((2, 1)), "y": np.zeros(5)})


def test_a_scalar_component_is_rejected_by_name():
    with pytest.raises(ValueError, match=r"component \[1\] is a scalar"):
        Dataset.from_tensor_slices((np.zeros(3), 7))


def test_rows_are_read_only_views_and_the_source_is_not_written():
    x, _ = xy(3)
    row = next(iter(Dataset.from_tensor_slices(x)))
    with pytest.raises(ValueError, match="read-only"):
        row[0] = 1.0
    assert x.flags.writeable


# --- batch -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("drop_remainder", [False, True])
def test_batch_matches_numpy_split(drop_remainder):
    x, y = xy(10)
    ds = Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=drop_remainder)
    batches = list(ds)
    sizes = [4, 4] if drop_remainder else [4, 4, 2]
    assert len(ds) == len(sizes) and [len(b[1]) for b in batches] == sizes
    for i, (bx, by) in enumerate(batches):
        np.testing.assert_array_equal(bx, x[4 * i:4 * i + 4])
        np.testing.assert_array_equal(by, y[4 * i:4 * i + 4])
        assert bx.dtype == np.float32 and by.dtype == np.int64


def test_batch_keeps_dicts_and_batches_batches():
    x, y = xy(6)
    batches = list(Dataset.from_tensor_slices({"x": x, "y": y}).batch(2).batch(3))
    assert len(batches) == 1 and set(batches[0]) == {"x", "y"}
    np.testing.assert_array_equal(batches[0]["x"], x.reshape(3, 2, 3))


def test_batch_after_map_stacks_elements_the_same_way():
    x, y = xy(11)
    direct = list(Dataset.from_tensor_slices((x, y)).batch(3))
    mapped = list(Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a, b)).batch(3))
    assert len(direct) == len(mapped) == 4
    for (dx, dy), (mx, my) in zip(direct, mapped):
        np.testing.assert_array_equal(dx, mx)
        np.testing.assert_array_equal(dy, my)


def test_batch_of_ragged_elements_names_the_component_and_shapes():
    ds = Dataset.from_tensor_slices(np.arange(4)).map(lambda i: (i, np.zeros(int(i)))).batch(4)
    with pytest.raises(ValueError, match=r"component \[1\].*different shapes \[\(0,\), \(1,\)"):
        list(ds)


@pytest.mark.parametrize("make", [lambda ds: ds.batch(0), lambda ds: ds.shuffle(0), lambda ds: ds.take(-2),
                                  lambda ds: ds.prefetch(0), lambda ds: ds.map(abs, num_parallel_calls=0),
                                  lambda ds: ds.shuffle(4, seed=-1), lambda ds: ds.repeat(2.5)])
def test_bad_arguments_are_value_errors_naming_them(make):
    with pytest.raises(ValueError, match=r"(batch|shuffle|take|prefetch|map|repeat): \w+ must be an integer"):
        make(Dataset.from_tensor_slices(np.arange(3)))


# --- shuffle -----------------------------------------------------------------------------------------------

def test_full_buffer_shuffle_is_a_permutation_reshuffled_every_pass_and_seeded():
    x, y = xy(50)
    ds = Dataset.from_tensor_slices((x, y)).shuffle(50, seed=7).batch(8)
    passes = [labels_of(list(ds)) for _ in range(3)]
    for labels in passes:
        np.testing.assert_array_equal(np.sort(labels), y)
    assert not np.array_equal(passes[0], passes[1]) and not np.array_equal(passes[1], passes[2])
    again = Dataset.from_tensor_slices((x, y)).shuffle(50, seed=7).batch(8)  # pass k depends on (seed, k)
    for labels in passes:
        np.testing.assert_array_equal(labels_of(list(again)), labels)
    other_seed = Dataset.from_tensor_slices((x, y)).shuffle(50, seed=8).batch(8)
    assert not np.array_equal(labels_of(list(other_seed)), passes[0])


def test_batches_carry_matching_rows_after_shuffle():
    x, y = xy(30)
    for bx, by in Dataset.from_tensor_slices((x, y)).shuffle(30, seed=1).batch(7):
        np.testing.assert_array_equal(bx, x[by // 10])


def test_small_buffer_shuffles_locally_and_both_paths_agree():
    n, buffer = 200, 16
    ds = Dataset.from_tensor_slices(np.arange(n))
    by_index = np.concatenate(list(ds.shuffle(buffer, seed=3).batch(9)))
    by_element = np.concatenate(list(ds.map(lambda i: i).shuffle(buffer, seed=3).batch(9)))
    np.testing.assert_array_equal(by_index, by_element)
    np.testing.assert_array_equal(np.sort(by_index), np.arange(n))
    positions = np.arange(n)
    assert np.all(by_index < positions + buffer)  # the buffer only holds the next `buffer` inputs
    assert not np.array_equal(by_index, positions)


def test_full_buffer_first_elements_are_roughly_uniform():
    ds = Dataset.from_tensor_slices(np.arange(5)).shuffle(5, seed=11)
    firsts = np.array([int(next(iter(ds))) for _ in range(500)])
    counts = np.bincount(firsts, minlength=5)
    assert counts.min() > 60, counts  # expected 100 each; seeded, so not flaky


def test_unseeded_shuffle_differs_between_passes():
    ds = Dataset.from_tensor_slices(np.arange(100)).shuffle(100)
    assert not np.array_equal(list(ds), list(ds))


def test_repeat_reshuffles_each_pass_like_separate_passes():
    y = np.arange(20)
    repeated = np.array(list(Dataset.from_tensor_slices(y).shuffle(20, seed=5).repeat(3)))
    single = Dataset.from_tensor_slices(y).shuffle(20, seed=5)
    expected = np.concatenate([list(single) for _ in range(3)])
    np.testing.assert_array_equal(repeated, expected)
    assert not np.array_equal(repeated[:20], repeated[20:40])


def test_take_stops_before_starting_another_pass():
    ds = Dataset.from_tensor_slices(np.arange(10)).shuffle(10, seed=2)
    first = np.array(list(ds.repeat().take(10).batch(10))[0])
    np.testing.assert_array_equal(first, list(Dataset.from_tensor_slices(np.arange(10)).shuffle(10, seed=2)))
    second = np.array(list(ds))  # pass 1 of `ds`: take() did not open and waste pass 1
    np.testing.assert_array_equal(second, list(Dataset.from_tensor_slices(np.arange(10)).shuffle(10, seed=2)
                                               .repeat(2))[10:])


# --- map ---------------------------------------------------------------------------------------------------

def test_map_unpacks_tuples_and_passes_dicts_and_arrays_whole():
    x, y = xy(4)
    pairs = list(Dataset.from_tensor_slices((x, y)).map(lambda a, b: a.sum() + b))
    np.testing.assert_allclose(pairs, x.sum(axis=1) + y)
    dicts = list(Dataset.from_tensor_slices({"x": x, "y": y}).map(lambda d: d["y"] * 2))
    np.testing.assert_array_equal(dicts, y * 2)
    singles = list(Dataset.from_tensor_slices(x).map(lambda row: row[::-1]))
    np.testing.assert_array_equal(np.stack(singles), x[:, ::-1])


def test_map_results_become_numpy_structures():
    for result in (lambda i: [FakeTensor(i * 2), np.arange(2)], lambda i: (FakeTensor(i * 2), np.float32(i), 3)):
        element = next(iter(Dataset.from_tensor_slices(np.arange(3)).map(result)))
        assert type(element) is tuple and all(type(part) is np.ndarray for part in element)
    with pytest.raises(ValueError, match="ragged or not numbers"):
        list(Dataset.from_tensor_slices(np.arange(3)).map(lambda i: [np.float32(i), FakeTensor(i)]))
    batch = next(iter(Dataset.from_tensor_slices(np.arange(3)).map(lambda i: FakeTensor(i + 1)).batch(3)))
    np.testing.assert_array_equal(batch, [1, 2, 3])


def test_parallel_map_keeps_order_and_runs_calls_at_once():
    running, most = [0], [0]
    lock = threading.Lock()

    def slow_square(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02 if int(i) % 2 == 0 else 0.001)  # uneven durations would reorder a naive pool
        with lock:
            running[0] -= 1
        return i * i

    got = list(Dataset.from_tensor_slices(np.arange(24)).map(slow_square, num_parallel_calls=4))
    np.testing.assert_array_equal(got, np.arange(24) ** 2)
    assert most[0] > 1
    auto = list(Dataset.from_tensor_slices(np.arange(24)).map(lambda i: -i, num_parallel_calls=AUTOTUNE))
    np.testing.assert_array_equal(auto, -np.arange(24))
    assert not pipeline_threads()


@pytest.mark.parametrize("workers", [None, 3])
def test_map_errors_reach_the_caller_and_pools_stop(workers):
    def fails_on_five(i):
        if int(i) == 5:
            raise ArithmeticError("element 5 is bad")
        return i

    with pytest.raises(ArithmeticError, match="element 5 is bad") as info:
        list(Dataset.from_tensor_slices(np.arange(10)).map(fails_on_five, num_parallel_calls=workers))
    assert "fails_on_five" in [entry.name for entry in info.traceback]
    assert not pipeline_threads()


# --- prefetch ----------------------------------------------------------------------------------------------

def test_prefetch_yields_the_same_batches():
    x, y = xy(25)
    plain = list(Dataset.from_tensor_slices((x, y)).shuffle(25, seed=4).batch(6))
    fetched = list(Dataset.from_tensor_slices((x, y)).shuffle(25, seed=4).batch(6).prefetch(2))
    assert len(plain) == len(fetched) == 5
    for (px, py), (fx, fy) in zip(plain, fetched):
        np.testing.assert_array_equal(px, fx)
        np.testing.assert_array_equal(py, fy)
    assert not pipeline_threads()


def test_prefetch_produces_ahead_of_the_consumer():
    produced = threading.Event()

    def note(i):
        if int(i) == 3:
            produced.set()
        return i

    iterator = iter(Dataset.from_tensor_slices(np.arange(10)).map(note).prefetch(3))
    assert int(next(iterator)) == 0
    assert produced.wait(timeout=60)  # element 3 is made while the consumer holds only element 0
    assert [int(v) for v in iterator] == list(range(1, 10))


def test_prefetch_reraises_producer_errors_with_their_traceback():
    def explode_on_three(i):
        if int(i) == 3:
            raise KeyError("element 3 exploded")
        return i

    got = []
    with pytest.raises(KeyError, match="element 3 exploded") as info:
        for value in Dataset.from_tensor_slices(np.arange(10)).map(explode_on_three).prefetch(2):
            got.append(int(value))
    assert got == [0, 1, 2]
    assert "explode_on_three" in [entry.name for entry in info.traceback]
    assert not pipeline_threads()


def test_prefetch_thread_stops_on_close_and_on_garbage_collection():
    ds = Dataset.from_tensor_slices(np.arange(5)).repeat().map(lambda i: i, num_parallel_calls=2).prefetch(2)
    iterator = iter(ds)
    next(iterator)
    threads = pipeline_threads()
    assert any(t.name == "engine.data.prefetch" for t in threads)
    iterator.close()
    assert not any(t.is_alive() for t in threads)

    iterator = iter(ds.prefetch(1))  # two prefetch threads stacked, an infinite input
    for _ in range(7):
        next(iterator)
    threads = pipeline_threads()
    assert sum(t.name == "engine.data.prefetch" for t in threads) == 2
    del iterator
    gc.collect()
    assert not any(t.is_alive() for t in threads)


def test_breaking_out_of_a_loop_leaks_no_threads():
    ds = Dataset.from_tensor_slices(np.arange(100)).batch(4).prefetch(AUTOTUNE)
    for i, _ in enumerate(ds):
        if i == 2:
            break
    gc.collect()
    assert not pipeline_threads()


# --- cache, repeat, take, len ------------------------------------------------------------------------------

def test_cache_replays_without_recomputing():
    calls = []
    ds = Dataset.from_tensor_slices(np.arange(6)).map(lambda i: calls.append(int(i)) or i * 3).cache()
    first, second = list(ds), list(ds)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, np.arange(6) * 3)
    assert calls == list(range(6))


def test_an_abandoned_first_pass_is_not_cached():
    calls = []
    ds = Dataset.from_tensor_slices(np.arange(6)).map(lambda i: calls.append(int(i)) or i).cache()
    next(iter(ds))
    assert [int(v) for v in ds] == list(range(6)) and calls == [0] + list(range(6))
    list(ds)
    assert len(calls) == 7


def test_cache_after_shuffle_replays_the_first_order():
    ds = Dataset.from_tensor_slices(np.arange(40)).shuffle(40, seed=9).cache()
    first = np.array(list(ds))
    np.testing.assert_array_equal(np.concatenate(list(ds.batch(7))), first)
    np.testing.assert_array_equal(np.array(list(ds)), first)
    mapped = Dataset.from_tensor_slices(np.arange(40)).map(lambda i: i).shuffle(40, seed=9).cache()
    np.testing.assert_array_equal(np.concatenate(list(mapped.batch(7))), np.concatenate(list(mapped.batch(5))))


def test_cache_of_an_infinite_dataset_is_refused():
    with pytest.raises(ValueError, match="infinite.*before repeat"):
        Dataset.from_tensor_slices(np.arange(3)).repeat().cache()


def test_repeat_take_and_len_follow_numpy():
    y = np.arange(5)
    ds = Dataset.from_tensor_slices(y)
    np.testing.assert_array_equal(list(ds.repeat(3)), np.tile(y, 3))
    assert len(ds.repeat(3)) == 15 and len(ds.repeat(3).batch(4)) == 4 and len(ds.take(2)) == 2
    np.testing.assert_array_equal(list(ds.repeat().take(12)), np.resize(y, 12))
    np.testing.assert_array_equal(list(ds.take(-1)), y)
    np.testing.assert_array_equal(list(ds.take(50)), y)
    assert list(ds.take(0)) == [] and len(ds.take(50)) == 5
    np.testing.assert_array_equal(np.concatenate(list(ds.repeat(2).batch(4))), np.tile(y, 2))
    assert list(Dataset.from_tensor_slices(np.zeros(0)).repeat()) == []


def test_len_of_an_infinite_dataset_is_a_clear_type_error():
    ds = Dataset.from_tensor_slices(np.arange(3)).repeat().batch(2)
    with pytest.raises(TypeError, match="infinite dataset"):
        len(ds)
    assert bool(ds) and len(ds.take(4)) == 4
    assert "repeat() -> batch(2)" in repr(ds)


# --- hooks -------------------------------------------------------------------------------------------------

def test_each_next_marks_the_step_then_reports_one_wait(recorder):
    x, y = xy(10)
    ds = Dataset.from_tensor_slices((x, y)).shuffle(10, seed=0).map(lambda a, b: (a, b)).batch(4).prefetch(2)
    for _ in ds:
        hooks.mark_step_end()
    kinds = [kind for kind, _ in recorder.events]
    # three batches, then the exhausting call that opens step 3
    assert kinds == ["step_begin", "data_wait"] * 3 + ["step_begin"]
    assert [value for kind, value in recorder.events if kind == "step_begin"] == [0, 1, 2, 3]
    assert all(wait >= 0 for wait in recorder.waits())
    assert recorder.threads == {threading.current_thread().name}  # never the prefetch thread


def test_internal_iteration_reports_nothing(recorder):
    ds = Dataset.from_tensor_slices(np.arange(12)).repeat(2).map(lambda i: i).batch(5).cache()
    batches = list(ds)
    assert len(batches) == 5 and len(recorder.waits()) == 5


def test_a_slow_map_shows_up_as_data_wait(recorder):
    sleep_s = 0.02
    ds = Dataset.from_tensor_slices(np.arange(6)).map(lambda i: time.sleep(sleep_s) or i).batch(2)
    for _ in ds:
        pass
    waits = recorder.waits()
    assert len(waits) == 3
    assert min(waits) >= 0.95 * 2 * sleep_s * 1e9  # each batch waited for two sleeps (lower bound only)


def test_an_exhausted_pass_leaves_no_step_open(recorder):
    dataset = Dataset.from_tensor_slices(xy(4)).batch(2)
    for _ in dataset:
        hooks.mark_step_end()  # what optimizer.step() does
    assert not hooks._step_open  # the fetch that found the end took its step begin back
    assert [s for kind, s in recorder.events if kind == "step_begin"] == [0, 1, 2]
    hooks.mark_step_begin()
    assert [s for kind, s in recorder.events if kind == "step_begin"] == [0, 1, 2, 2]


def test_manual_seed_alone_makes_an_unseeded_shuffle_repeatable():
    import engine

    dataset = Dataset.from_tensor_slices(np.arange(50)).shuffle(50)
    engine.manual_seed(7)
    first = [int(v) for v in dataset]
    engine.manual_seed(7)
    second = [int(v) for v in dataset]
    engine.manual_seed(8)
    third = [int(v) for v in dataset]
    assert first == second and first != third and sorted(first) == list(range(50))
