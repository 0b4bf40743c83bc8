"""engine.memory_recording step logs: the allocator's per-step figures against an alloc/free observer that computes them
itself; batching, live-set records, several readers, a failing reader."""
from __future__ import annotations

import gc
from collections import deque

import numpy as np
import pytest

import engine
from engine import hooks, memory
from engine.memory_recording import SiteRecorder, StepLog


class _PeakOracle:
    """Allocated bytes, the highest within each step and the bytes per category at that moment, from the events."""

    def __init__(self) -> None:
        self.allocated, self.categories = memory.allocated_bytes("cpu"), memory.category_bytes("cpu")
        self.peak, self.at_peak = self.allocated, dict(self.categories)
        self.steps: list[tuple[int, int, int, dict[str, int]]] = []  # (step, allocated, peak, categories at the peak)

    def alloc(self, event: hooks.MemoryEvent) -> None:
        self.allocated += event.bytes
        self.categories[event.category] = self.categories.get(event.category, 0) + event.bytes
        if self.allocated > self.peak:
            self.peak, self.at_peak = self.allocated, dict(self.categories)

    def free(self, event: hooks.MemoryEvent) -> None:
        self.allocated -= event.bytes
        self.categories[event.category] -= event.bytes

    def step_end(self, event: hooks.StepEvent) -> None:
        self.steps.append((event.step, self.allocated, self.peak, self.at_peak))
        self.peak, self.at_peak = self.allocated, dict(self.categories)


@pytest.fixture()
def clean():
    gc.collect()
    hooks.reset_step(0)
    yield
    hooks.reset_step(0)


def _steps(count: int, kept: list) -> None:
    """Steps that allocate temporaries (a rise and fall inside the step) and keep one tensor each."""
    for step in range(count):
        hooks.mark_step_begin()
        x = engine.tensor(np.ones((8, 8 + step), np.float32), requires_grad=True)
        loss = ((x * 3.0).relu() * x).sum()
        loss.backward()
        kept.append(engine.tensor(np.zeros(16 * (step + 1), np.float32)))
        del x, loss
        hooks.mark_step_end()


def _observed(logs: list[StepLog], run) -> _PeakOracle:
    """``run()`` with ``logs`` added and a peak oracle subscribed (both removed after it); the oracle."""
    oracle = hooks.subscribe(_PeakOracle())
    for log in logs:
        hooks.add_recorder(log)
    try:
        run()
    finally:
        for log in logs:
            hooks.remove_recorder(log)
        hooks.unsubscribe(oracle)
    return oracle


def test_records_are_the_step_figures_an_observer_computes(clean) -> None:
    memory.reset_step_peak("cpu")  # the oracle starts from allocated bytes now
    batches: list[list[tuple]] = []
    log = StepLog(lambda: batches.append(log.take()), batch_steps=3, batch_s=3600.0)
    kept: list = []
    oracle = _observed([log], lambda: _steps(7, kept))
    assert [len(batch) for batch in batches] == [3, 3]  # the 7th step waits for the next batch
    records = [record for batch in batches for record in batch] + log.take()
    assert [r[2] for r in records] == ["cpu"] * 7
    got = [(step, allocated, peak, {k: v for k, v in at_peak.items() if v}) for step, _, _, allocated, peak, at_peak, _
           in records]
    expected = [(step, allocated, peak, {k: v for k, v in at_peak.items() if v}) for step, allocated, peak, at_peak
                in oracle.steps]
    assert got == expected
    assert all(peak > allocated for _, allocated, peak, _ in expected[1:])  # temporaries made each step's peak
    assert records[-1][6] == memory.live_tensors("cpu")
    # an observer reading end_step_peak at the same step end gets the same figures
    assert memory.end_step_peak("cpu", records[-1][0])[:2] == (records[-1][3], records[-1][4])
    assert not hooks.step_end


def test_steps_that_only_free_or_do_nothing_peak_where_they_began(clean) -> None:
    """A step peak starts at the bytes allocated when the last step ended (no copy of the categories then): a step
    that only frees, or touches nothing, peaks at its start with the categories of that moment."""
    memory.reset_step_peak("cpu")
    log = StepLog(lambda: None, batch_steps=1000, batch_s=3600.0)
    kept: list = []

    def run() -> None:
        _steps(2, kept)  # each ends below its peak
        hooks.mark_step_begin()
        hooks.mark_step_end()  # nothing at all
        hooks.mark_step_begin()
        del kept[0]  # only a free
        hooks.mark_step_end()
        hooks.mark_step_begin()
        kept.append(engine.tensor(np.ones(4, np.float32)))  # a step that ends at its peak
        hooks.mark_step_end()
        hooks.mark_step_begin()
        del kept[-1]  # frees what the step before ended with
        hooks.mark_step_end()

    oracle = _observed([log], run)
    got = [(step, allocated, peak, {k: v for k, v in at_peak.items() if v}) for step, _, _, allocated, peak, at_peak, _
           in log.take()]
    expected = [(step, allocated, peak, {k: v for k, v in at_peak.items() if v}) for step, allocated, peak, at_peak
                in oracle.steps]
    assert got == expected
    assert got[3][2] == got[2][1] and got[3][1] < got[3][2]  # the freeing step peaked where it began
    assert got[4][1] == got[4][2] and got[5][2] == got[4][1] > got[5][1]


def test_with_peak_every_k_the_peak_ends_at_multiples_of_k_and_runs_on_between(clean) -> None:
    """Steps between two ends carry the highest since the last end; a second log ending at every step still gets
    each step's own peak (the shared record is made again with the end)."""
    memory.reset_step_peak("cpu")
    sparse = StepLog(lambda: None, batch_steps=1000, batch_s=3600.0)
    sparse.peak_every = 3
    kept: list = []
    oracle = _observed([sparse], lambda: _steps(7, kept))
    records = sparse.take()
    per_step = [peak for _, _, peak, _ in oracle.steps]  # each step's own peak
    for (step, _, _, allocated, peak, at_peak, _), (_, expected_allocated, _, _) in zip(records, oracle.steps):
        last_end = (step - 1) // 3 * 3 if step else -1  # the peak ended at steps 0, 3, 6
        since_end = per_step[last_end + 1:step + 1]
        assert allocated == expected_allocated
        assert peak == max(since_end), step
    assert [r[4] for r in records][1:3] == sorted([r[4] for r in records][1:3])  # running on between ends

    both = StepLog(lambda: None, batch_steps=1000, batch_s=3600.0)
    sparse.take()
    oracle = _observed([sparse, both], lambda: _steps(4, kept))
    assert [r[4] for r in both.take()] == [peak for _, _, peak, _ in oracle.steps]


def test_with_every_k_only_multiples_of_k_are_kept_each_with_the_highest_peak_since_the_last(clean) -> None:
    """``every = peak_every = 3``: steps 0, 3, 6 kept, each peak the highest of the steps since the last kept one;
    ``keep(step, time_ns)`` adds a skipped one with the figures now; the live records follow the kept steps."""
    memory.reset_step_peak("cpu")
    live: deque = deque(maxlen=100)
    log = StepLog(lambda: None, batch_steps=1000, batch_s=3600.0, live=live)
    log.every = log.peak_every = 3
    kept: list = []
    oracle = _observed([log], lambda: _steps(8, kept))
    records = log.take()
    per_step = [peak for _, _, peak, _ in oracle.steps]
    assert [r[0] for r in records] == [0, 3, 6] and [step for step, _ in live] == [0, 3, 6]
    for step, _, _, allocated, peak, _, _ in records:
        assert allocated == oracle.steps[step][1]
        assert peak == max(per_step[max(step - 2, 0):step + 1]), step
    assert log.last_kept == 6
    log.keep(7, 0)  # step 7's end was skipped: its figures now (nothing allocated since)
    (step, _, _, allocated, peak, _, _), = log.take()
    assert (step, allocated, peak) == (7, oracle.steps[7][1], max(per_step[7:8]))
    assert log.last_kept == 7 and live[-1][0] == 7


def test_spent_ns_adds_up_the_step_ends_and_leaves_the_batch_out(clean) -> None:
    import time

    batch_ns = [0]

    def slow_batch() -> None:
        began = time.perf_counter_ns()
        time.sleep(0.5)
        log.take()
        batch_ns[0] = time.perf_counter_ns() - began

    log = StepLog(slow_batch, batch_steps=4, batch_s=3600.0)
    hooks.add_recorder(log)
    began = time.perf_counter_ns()
    try:
        for _ in range(4):
            hooks.mark_step_begin()
            hooks.mark_step_end()
    finally:
        loop_ns = time.perf_counter_ns() - began
        hooks.remove_recorder(log)
    assert log.entries == []  # the batch ran
    # NOTE: four step ends; the batch is left out: what was spent fits in the loop's time without the batch's (a
    # bound from this run's own clock readings, whatever the load; with the batch in, it would exceed it)
    assert 0 < log.spent_ns <= loop_ns - batch_ns[0], (log.spent_ns, loop_ns, batch_ns[0])


def test_batches_by_age_and_live_sets_are_reused_while_nothing_changes(clean) -> None:
    live: deque = deque(maxlen=10)
    calls: list[int] = []
    log = StepLog(lambda: calls.append(len(log.take())), batch_steps=100, batch_s=0.0, live=live)
    hooks.add_recorder(log)
    kept: list = []
    try:
        _steps(2, kept)
        hooks.mark_step_begin()
        hooks.mark_step_end()  # nothing allocated or freed: the same record
    finally:
        hooks.remove_recorder(log)
    assert calls == [1, 1, 1]  # batch_s=0: every step end
    (_, first), (_, second), (_, third) = live
    assert len(second) == len(first) + 1 and third is second
    assert {id(entry) for entry in second} == {id(entry) for entry in memory.live_set()}


def test_several_logs_get_the_same_records_and_a_failing_reader_is_reported_once(clean, capsys) -> None:
    def failing() -> None:
        raise RuntimeError("reader bug")

    broken, healthy = StepLog(failing, batch_steps=1), StepLog(lambda: None, batch_steps=10)
    hooks.add_recorder(broken)
    hooks.add_recorder(healthy)
    kept: list = []
    try:
        _steps(3, kept)  # training goes on
    finally:
        hooks.remove_recorder(broken)
        hooks.remove_recorder(healthy)
    assert broken.take() == healthy.take() and len(kept) == 3
    err = capsys.readouterr().err
    assert err.count("StepLog.step_end failed") == 1 and "reader bug" in err


def test_bad_batch_settings_are_named() -> None:
    with pytest.raises(ValueError, match="batch_steps must be >= 1"):
        StepLog(lambda: None, batch_steps=0)
    with pytest.raises(ValueError, match="batch_s >= 0"):
        StepLog(lambda: None, batch_s=-1.0)


def _failing_reader(message: str):
    def failing() -> None:
        raise RuntimeError(message)
    return failing


def _run_failing_log(log: StepLog) -> None:
    hooks.add_recorder(log)
    try:
        _steps(1, [])
    finally:
        hooks.remove_recorder(log)


def test_a_reader_re_added_after_its_removal_is_reported_again(clean, capsys) -> None:
    log = StepLog(_failing_reader("first bug"), batch_steps=1)  # the same object: the same id() again
    _run_failing_log(log)
    _run_failing_log(log)
    assert capsys.readouterr().err.count("StepLog.step_end failed") == 2


def test_a_new_reader_that_gets_a_failed_reader_s_id_is_reported(clean, capsys) -> None:
    reader = _failing_reader("old bug")
    old_id = id(reader)
    _run_failing_log(StepLog(reader, batch_steps=1))
    del reader
    gc.collect()
    alive = []  # functions that did not get the id stay alive, so the next one takes another free slot
    while len(alive) < 1000 and (not alive or id(alive[-1]) != old_id):
        alive.append(_failing_reader("new bug"))
    assert id(alive[-1]) == old_id  # CPython reuses the freed slot (almost always at once)
    _run_failing_log(StepLog(alive[-1], batch_steps=1))
    err = capsys.readouterr().err
    assert "old bug" in err and "new bug" in err


def test_a_site_recorder_re_added_after_its_removal_is_reported_again(clean, capsys) -> None:
    def recorder() -> None:
        raise RuntimeError("site bug")

    site_recorder = SiteRecorder(recorder)
    for _ in range(2):
        hooks.add_recorder(site_recorder)
        try:
            kept = engine.tensor(np.ones(4, np.float32)) * 2.0
        finally:
            hooks.remove_recorder(site_recorder)
        del kept
    assert capsys.readouterr().err.count("site bug") == 2
