"""The multi-rank view's numbers on rank groups written by the real writers: skew, breakdown, replica agreement,
alerts, and what is said when something is missing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from board.data.ranks import (ALLREDUCE_MS, ALLREDUCE_WAIT_MS, PARAM_CHECKSUM, UnknownGroup, rank_groups, rank_lines,
                              rank_of, ranks_view, skew_display_indices)
from board.data.views import SmoothingCache
from board.data.store import LogdirStore
from board_helpers import DROP_FILE_MODE_CAPABILITIES, REPO, write_scalars
from instrumentation.format.tags import CPU_WAIT_MS, DATA_TIME_MS, STEP_TIME_MS
from ranks_fixture import checksum_tags, plant_alert, rank_tags, write_rank, write_straggler_group

NAN = float("nan")


def store_of(logdir: Path) -> LogdirStore:
    store = LogdirStore(logdir)
    store.refresh()
    return store


def test_rank_groups_are_the_runs_named_rank_k_ordered_by_number(tmp_path: Path) -> None:
    for run in ("exp/rank10", "exp/rank2", "exp/rank0", "solo", "exp/notarank", "rank1", "a/b/rank0"):
        write_scalars(tmp_path / run, STEP_TIME_MS, np.arange(2), np.ones(2))
    groups = rank_groups(store_of(tmp_path))
    assert {group: [(r.rank, r.run) for r in ranks] for group, ranks in groups.items()} == {
        ".": [(1, "rank1")], "a/b": [(0, "a/b/rank0")], "exp": [(0, "exp/rank0"), (2, "exp/rank2"), (10, "exp/rank10")]}
    assert rank_of("exp/rank07") == 7 and rank_of("exp/rank") is None and rank_of("rank3x") is None
    with pytest.raises(UnknownGroup, match="no run group 'solo' with rank sub-runs"):
        ranks_view(store_of(tmp_path), "solo")


def test_skew_and_breakdown_are_the_hand_computed_numbers(tmp_path: Path) -> None:
    step_ms = np.array([[10, 12, 11, 10], [11, 12, 14, 10], [13, 12, 11, 20]], float)
    data_ms = np.array([[1, 2, 1, 1], [2, 2, 2, 2], [1, 1, 1, 1]], float)
    wait_ms = np.array([[3, 4, 4, 2], [1, 1, 0, 1], [0, 0, 0, 9]], float)
    allreduce_ms = np.array([[5, 5, 6, 6], [4, 4, 4, 4], [3, 3, 3, 3]], float)
    comm_bytes = np.full((3, 4), 1024.0)
    cpu_wait_ms = np.array([[1, 0, 2, 3], [0.5, 0.5, 4, 1], [2, 2, 2, 2]], float)
    for rank in range(3):
        write_rank(tmp_path / "ddp" / f"rank{rank}", rank_tags(step_ms[rank], data_ms[rank], wait_ms[rank],
                                                               allreduce_ms[rank], comm_bytes[rank], cpu_wait_ms[rank]))
    view = ranks_view(store_of(tmp_path), "ddp")

    # step 0: (13 − 10) / 11; step 1: all 12; step 2: (14 − 11) / 11; step 3: (20 − 10) / 10
    assert view.skew.ranks == (0, 1, 2)
    assert view.skew.steps.tolist() == [0, 1, 2, 3]
    assert view.skew.skew.tolist() == pytest.approx([3 / 11, 0.0, 3 / 11, 1.0], rel=1e-12)
    assert view.skew.slowest.tolist() == [2, 0, 1, 2]  # a tie names the lowest rank
    assert view.skew.median_ms.tolist() == [11, 12, 11, 10]
    # compute = step − wait − data − cpu wait: rank0 [5, 6, 4, 4], rank1 [7.5, 8.5, 8, 6], rank2 [10, 9, 8, 8]
    assert [(b.rank, b.steps, b.step_ms, b.compute_ms, b.wait_ms, b.data_ms, b.cpu_wait_ms, b.allreduce_ms,
             b.comm_bytes) for b in view.breakdown] == [(0, 4, 10.5, 4.5, 3.5, 1.0, 1.5, 5.5, 1024.0),
                                                       (1, 4, 11.5, 7.75, 1.0, 2.0, 0.75, 4.0, 1024.0),
                                                       (2, 4, 12.5, 8.5, 0.0, 1.0, 2.0, 3.0, 1024.0)]
    assert view.notes == (f"this run logs no parameter checksums ({PARAM_CHECKSUM}): replica agreement is not checked",)
    assert view.alerts == () and view.warnings == {}
    store = store_of(tmp_path)
    lines = rank_lines(store, SmoothingCache(), view.ranks, "compute")
    assert [line.values.tolist() for line in lines] == [[5, 6, 4, 4], [7.5, 8.5, 8, 6], [10, 9, 8, 8]]
    cpu = rank_lines(store, SmoothingCache(), view.ranks, "cpu_wait")
    assert [line.values.tolist() for line in cpu] == cpu_wait_ms.tolist()
    waits = rank_lines(store, SmoothingCache(), view.ranks, "wait", window=(2, 2))
    assert [(line.steps.tolist(), line.values.tolist()) for line in waits] == [([1, 2, 3], [4, 4, 2]),
                                                                             ([1, 2, 3], [1, 0, 1]),
                                                                             ([1, 2, 3], [0, 0, 9])]


def test_skew_is_taken_only_at_steps_every_rank_logged_and_matches_numpy(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    ranks, steps = 4, 300
    step_ms = rng.uniform(50, 150, (ranks, steps))
    logged = rng.uniform(size=(ranks, steps)) > 0.1  # each rank misses ~10 % of the steps, different ones
    for rank in range(ranks):
        write_rank(tmp_path / "g" / f"rank{rank}", rank_tags(np.where(logged[rank], step_ms[rank], NAN)))
    view = ranks_view(store_of(tmp_path), "g")

    every = np.flatnonzero(logged.all(axis=0))
    assert 0 < len(every) < steps
    assert view.skew.steps.tolist() == every.tolist()
    at = step_ms[:, every]
    expected = (at.max(axis=0) - at.min(axis=0)) / np.median(at, axis=0)
    np.testing.assert_allclose(view.skew.skew, expected, rtol=1e-6)  # the writer stores float32
    assert view.skew.slowest.tolist() == at.argmax(axis=0).tolist()
    for rank, item in enumerate(view.breakdown):  # no data or wait logged: compute is the whole step
        mine = step_ms[rank][logged[rank]].astype(np.float32).astype(float)
        assert item.steps == logged[rank].sum()
        assert item.step_ms == pytest.approx(np.median(mine)) and item.compute_ms == item.step_ms
        assert item.wait_ms is None and item.data_ms is None and item.allreduce_ms is None
    assert any("logs no communication timings" in note for note in view.notes)
    assert any(f"logs no input timings ({DATA_TIME_MS})" in note for note in view.notes)


def test_a_zero_median_gives_nan_skew_and_the_display_keeps_every_finite_point(tmp_path: Path) -> None:
    for rank, times in enumerate(([0.0, 2.0, 4.0], [0.0, 3.0, 4.0], [5.0, 4.0, 4.0])):
        write_rank(tmp_path / "z" / f"rank{rank}", rank_tags(np.array(times)))
    skew = ranks_view(store_of(tmp_path), "z").skew
    assert np.isnan(skew.skew[0]) and skew.skew[1:].tolist() == pytest.approx([2 / 3, 0.0])
    assert skew_display_indices(skew).tolist() == [1, 2]
    assert skew_display_indices(skew, window=(2, 2)).tolist() == [1, 2]  # the window and its left neighbour


def test_the_skew_drawn_in_a_window_keeps_every_point_there_and_the_envelope_beyond(tmp_path: Path) -> None:
    steps = 5000
    times = np.tile(np.array([[100.0], [100.0], [100.0]]), steps)
    times[2, 3001] = 400.0  # one spike on rank 2
    for rank in range(3):
        write_rank(tmp_path / "w" / f"rank{rank}", rank_tags(times[rank]))
    skew = ranks_view(store_of(tmp_path), "w").skew
    whole = skew_display_indices(skew, max_points=500)
    assert len(whole) < 600 and 3001 in whole.tolist()  # downsampled, the spike kept
    assert skew.skew[3001] == pytest.approx(3.0)
    window = skew_display_indices(skew, window=(2990, 3010), max_points=500)
    assert window.tolist() == list(range(2989, 3012))  # every point of a window smaller than max_points


def test_replicas_agree_until_one_rank_differs_and_a_lagging_rank_is_pending(tmp_path: Path) -> None:
    for rank in range(3):
        checksums = {step: 1000.0 + step for step in range(0, 50, 10)}
        if rank == 1:
            checksums[30] = 4242.0  # diverged at step 30 …
            checksums[40] = 4343.0
        if rank == 2:
            checksums[50] = 1050.0  # … and rank 2 is one check ahead of the others
        write_rank(tmp_path / "r" / f"rank{rank}", {**rank_tags(np.full(3, 10.0)), **checksum_tags(checksums)})
    replicas = ranks_view(store_of(tmp_path), "r").replicas
    assert replicas.ranks == (0, 1, 2)
    assert [(c.step, c.agree) for c in replicas.checks] == [(0, True), (10, True), (20, True), (30, False), (40, False)]
    assert replicas.checks[3].checksums == (1030.0, 4242.0, 1030.0)
    assert replicas.first_divergent_step == 30 and replicas.pending_steps == 1


def test_checksums_written_as_float32_compare_exactly(tmp_path: Path) -> None:
    """24-bit checksums are exact in float32; two that differ by one still differ after the round trip."""
    top = float(2**24 - 1)
    write_rank(tmp_path / "x" / "rank0", checksum_tags({0: top, 5: top}))
    write_rank(tmp_path / "x" / "rank1", checksum_tags({0: top, 5: top - 1}))
    replicas = ranks_view(store_of(tmp_path), "x").replicas
    assert [(c.step, c.agree, c.checksums) for c in replicas.checks] == [(0, True, (top, top)),
                                                                        (5, False, (top, top - 1))]


def test_the_groups_straggler_and_divergence_alerts_and_no_others(tmp_path: Path) -> None:
    write_straggler_group(tmp_path, "ddp", ranks=4, slow_rank=2)
    write_straggler_group(tmp_path, "other", ranks=2, slow_rank=1)
    plant_alert(tmp_path / "ddp" / "rank1", "replica_divergence", 1, 30, "rank1's parameters differ", checksum=7.0)
    plant_alert(tmp_path / "ddp" / "rank0", "dead_units", 0, 3, "not a rank alert")
    view = ranks_view(store_of(tmp_path), "ddp")
    assert [(item.run, item.alert.kind, item.alert.subject, item.alert.step) for item in view.alerts] == [
        ("ddp/rank2", "straggler", "rank2", 19), ("ddp/rank1", "replica_divergence", "rank1", 30)]
    assert view.alerts[0].alert.evidence["busy_ms"] == 78.0
    assert view.replicas.first_divergent_step is None and len(view.replicas.checks) == 4
    assert [item.rank for item in view.breakdown] == [0, 1, 2, 3]
    slow = view.breakdown[2]
    assert slow.wait_ms < 2 and all(item.wait_ms > 11 for i, item in enumerate(view.breakdown) if i != 2)
    assert slow.compute_ms > 77 and all(item.compute_ms < 63 for i, item in enumerate(view.breakdown) if i != 2)
    assert np.all(view.skew.slowest == 2)
    assert view.notes == ()


def test_a_run_still_being_written_grows_the_view_between_reads(tmp_path: Path) -> None:
    from instrumentation import SummaryWriter

    writers = [SummaryWriter(tmp_path / "live" / f"rank{rank}") for rank in range(2)]
    try:
        for step in range(5):
            for rank, writer in enumerate(writers):
                writer.add_scalar(STEP_TIME_MS, 10.0 + rank * step, step)
        for writer in writers:
            writer.flush()
        store = store_of(tmp_path)
        first = ranks_view(store, "live")
        assert first.skew.steps.tolist() == [0, 1, 2, 3, 4]
        writers[0].add_scalar(STEP_TIME_MS, 50.0, 5)  # only rank 0 has reached step 5
        writers[0].flush()
        store.refresh()
        assert ranks_view(store, "live").skew.steps.tolist() == [0, 1, 2, 3, 4]
        assert ranks_view(store, "live").breakdown[0].steps == 6
        writers[1].add_scalar(STEP_TIME_MS, 30.0, 5)
        writers[1].flush()
        store.refresh()
        grown = ranks_view(store, "live")
        assert grown.skew.steps.tolist() == [0, 1, 2, 3, 4, 5]
        assert grown.skew.skew[-1] == pytest.approx((50 - 30) / 40)
        assert first.skew.steps.tolist() == [0, 1, 2, 3, 4]  # an earlier view is a snapshot, never changed
    finally:
        for writer in writers:
            writer.close()


def test_a_truncated_last_record_is_left_until_it_is_complete(tmp_path: Path) -> None:
    from board_helpers import scalar_record

    for rank in range(2):
        write_rank(tmp_path / "t" / f"rank{rank}", rank_tags(np.array([10.0, 20.0])))
    [events] = (tmp_path / "t" / "rank1").glob("events.out.tfevents.*")
    record = scalar_record(STEP_TIME_MS, 2, 40.0)
    with open(events, "ab") as file:
        file.write(record[:-7])  # a writer mid-write
    write_rank(tmp_path / "t" / "rank0", rank_tags(np.array([30.0]), first_step=2))
    store = store_of(tmp_path)
    view = ranks_view(store, "t")
    assert view.skew.steps.tolist() == [0, 1] and view.breakdown[1].steps == 2
    assert view.warnings == {}  # a half-written record is not corruption
    with open(events, "ab") as file:
        file.write(record[-7:])
    store.refresh()
    view = ranks_view(store, "t")
    assert view.skew.steps.tolist() == [0, 1, 2] and view.skew.skew[-1] == pytest.approx(10 / 35)


def test_a_corrupt_last_record_is_skipped_the_rank_warns_and_reading_goes_on(tmp_path: Path) -> None:
    from board_helpers import scalar_record

    for rank in range(2):
        write_rank(tmp_path / "c" / f"rank{rank}", rank_tags(np.array([10.0, 20.0])))
    [events] = (tmp_path / "c" / "rank0").glob("events.out.tfevents.*")
    broken = bytearray(scalar_record(STEP_TIME_MS, 2, 40.0))
    broken[-6] ^= 0xFF  # the payload no longer matches its checksum
    with open(events, "ab") as file:
        file.write(bytes(broken))
    write_rank(tmp_path / "c" / "rank1", rank_tags(np.array([30.0, 30.0]), first_step=2))
    store = store_of(tmp_path)
    view = ranks_view(store, "c")
    assert view.skew.steps.tolist() == [0, 1] and view.breakdown[0].steps == 2
    assert list(view.warnings) == ["c/rank0"] and "fails its data CRC" in view.warnings["c/rank0"][0]
    assert view.warnings["c/rank0"][-1] == "1 corrupt record(s) skipped"
    with open(events, "ab") as file:
        file.write(scalar_record(STEP_TIME_MS, 3, 50.0))
    store.refresh()
    view = ranks_view(store, "c")
    assert view.skew.steps.tolist() == [0, 1, 3] and view.skew.skew[-1] == pytest.approx(20 / 40)


def test_ranks_without_some_tags_are_named_and_left_out_of_what_uses_them(tmp_path: Path) -> None:
    full = rank_tags(np.array([10.0, 12.0]), np.array([1.0, 1.0]), np.array([2.0, 3.0]), np.array([4.0, 4.0]))
    write_rank(tmp_path / "m" / "rank0", {**full, **checksum_tags({0: 5.0})})
    write_rank(tmp_path / "m" / "rank1", {**full, **checksum_tags({0: 5.0})})
    write_rank(tmp_path / "m" / "rank2", {STEP_TIME_MS: {0: 30.0, 1: 30.0}})  # an older instrumentation
    view = ranks_view(store_of(tmp_path), "m")
    assert view.skew.ranks == (0, 1, 2) and view.skew.skew.tolist() == pytest.approx([20 / 10, 18 / 12])
    assert view.breakdown[2].compute_ms == 30.0 and view.breakdown[2].wait_ms is None
    assert view.breakdown[0].compute_ms == pytest.approx(7.5)  # (10 − 2 − 1, 12 − 3 − 1)
    lines = rank_lines(store_of(tmp_path), SmoothingCache(), view.ranks, "compute")
    assert [line.values.tolist() for line in lines] == [[7, 8], [7, 8], [30, 30]]  # rank2: nothing to subtract
    assert [line.rank.rank for line in rank_lines(store_of(tmp_path), SmoothingCache(), view.ranks, "data")] == [0, 1]
    assert view.replicas.ranks == (0, 1) and view.replicas.checks[0].agree
    assert set(view.notes) == {f"rank2 logs no {tag}: it is left out of what uses it"
                               for tag in (DATA_TIME_MS, ALLREDUCE_WAIT_MS, ALLREDUCE_MS, PARAM_CHECKSUM)}


def test_compute_is_the_busy_time_of_the_straggler_rule_and_the_parts_add_up_to_the_step(tmp_path: Path) -> None:
    """NumPy oracle: every part as the writer stores it (float32); a step whose CPU wait is missing has no compute."""
    rng = np.random.default_rng(7)
    ranks, steps = 3, 200
    parts = {name: rng.uniform(low, high, (ranks, steps)).astype(np.float32).astype(float)
             for name, low, high in (("busy", 20, 40), ("wait", 0, 15), ("data", 1, 3), ("cpu", 5, 30))}
    step_ms = (parts["busy"] + parts["wait"] + parts["data"] + parts["cpu"]).astype(np.float32).astype(float)
    cpu_logged = np.where(rng.uniform(size=(ranks, steps)) > 0.05, parts["cpu"], NAN)
    for rank in range(ranks):
        write_rank(tmp_path / "p" / f"rank{rank}", rank_tags(step_ms[rank], parts["data"][rank], parts["wait"][rank],
                                                             cpu_wait_ms=cpu_logged[rank]))
    store = store_of(tmp_path)
    view = ranks_view(store, "p")
    compute = step_ms - parts["wait"] - parts["data"] - cpu_logged  # NaN where the CPU wait is missing
    for rank, item in enumerate(view.breakdown):
        assert item.compute_ms == pytest.approx(np.nanmedian(compute[rank]), rel=1e-12)
        assert item.cpu_wait_ms == pytest.approx(np.nanmedian(cpu_logged[rank]), rel=1e-12)
        busy = parts["busy"][rank][np.isfinite(cpu_logged[rank])]
        assert item.compute_ms == pytest.approx(np.median(busy), abs=1e-4)  # float32 rounding only
    lines = rank_lines(store, SmoothingCache(), view.ranks, "compute")
    for rank, line in enumerate(lines):
        assert line.steps.tolist() == np.flatnonzero(np.isfinite(compute[rank])).tolist()
        np.testing.assert_allclose(line.values, compute[rank][np.isfinite(compute[rank])], rtol=1e-12)
        logged = np.isfinite(compute[rank])
        np.testing.assert_allclose(line.values + parts["wait"][rank][logged] + parts["data"][rank][logged] +
                                   cpu_logged[rank][logged], step_ms[rank][logged], rtol=1e-12)
    assert view.notes == (f"this run logs no parameter checksums ({PARAM_CHECKSUM}): replica agreement is not checked",)


def test_a_rank_without_the_cpu_wait_counts_none_and_is_named_only_if_others_log_it(tmp_path: Path) -> None:
    for rank in range(2):
        write_rank(tmp_path / "new" / f"rank{rank}", rank_tags(np.array([40.0, 50.0]), np.array([1.0, 1.0]),
                                                               np.array([4.0, 6.0]),
                                                               cpu_wait_ms=np.array([20.0, 25.0])))
    write_rank(tmp_path / "new" / "rank2", rank_tags(np.array([40.0, 50.0]), np.array([1.0, 1.0]),
                                                     np.array([4.0, 6.0])))  # an older instrumentation
    view = ranks_view(store_of(tmp_path), "new")
    # compute: ranks 0 and 1 [15, 18], rank 2 [35, 43] (its CPU wait counts 0)
    assert [(b.compute_ms, b.cpu_wait_ms) for b in view.breakdown] == [(16.5, 22.5), (16.5, 22.5), (39.0, None)]
    assert f"rank2 logs no {CPU_WAIT_MS}: its compute counts no CPU wait, so it includes any time spent waiting for " \
           "a CPU, unlike the other ranks'" in view.notes
    assert [line.rank.rank for line in rank_lines(store_of(tmp_path), SmoothingCache(), view.ranks, "cpu_wait")] == [
        0, 1]
    write_rank(tmp_path / "old" / "rank0", rank_tags(np.array([40.0]), np.array([1.0]), np.array([4.0])))
    write_rank(tmp_path / "old" / "rank1", rank_tags(np.array([44.0]), np.array([1.0]), np.array([4.0])))
    old = ranks_view(store_of(tmp_path), "old")  # no rank logs it: nothing to say, compute is step − wait − data
    assert [(b.compute_ms, b.cpu_wait_ms) for b in old.breakdown] == [(35.0, None), (39.0, None)]
    assert not any(CPU_WAIT_MS in note for note in old.notes)


RANKS_CHILD = DROP_FILE_MODE_CAPABILITIES + r'''
from board.data.ranks import ranks_view
from board.data.store import LogdirStore

logdir = Path(sys.argv[1])
try:
    list((logdir / "ddp" / "rank1").iterdir())
    modes_apply = False
except PermissionError:
    modes_apply = True
store = LogdirStore(logdir)
store.refresh()
view = ranks_view(store, "ddp")
print(json.dumps({"modes_apply": modes_apply, "ranks": [rank.run for rank in view.ranks],
                  "skew_ranks": list(view.skew.ranks), "skew_steps": view.skew.steps.tolist(),
                  "skew": view.skew.skew.tolist(), "notes": list(view.notes),
                  "warnings": {run: list(lines) for run, lines in view.warnings.items()}}))
'''


def test_a_rank_directory_that_cannot_be_read_is_named_and_the_others_are_compared(tmp_path: Path) -> None:
    """Mode 000 on rank1's directory, read by a child process without root's file-mode capabilities (see
    test_board_unreadable.py)."""
    for rank, step_ms in enumerate(([10.0, 20.0], [99.0, 99.0], [14.0, 20.0])):
        write_rank(tmp_path / "ddp" / f"rank{rank}", rank_tags(np.array(step_ms)))
    (tmp_path / "ddp" / "rank1").chmod(0)
    try:
        child = subprocess.run([sys.executable, "-c", RANKS_CHILD, str(tmp_path)], cwd=REPO,
                               env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                               timeout=300)  # a hang guard, not a time limit
    finally:
        (tmp_path / "ddp" / "rank1").chmod(0o755)
    assert child.returncode == 0, child.stderr
    result = json.loads(child.stdout)
    assert result["modes_apply"], "the child could still list a mode-000 directory: the scenario would test nothing"
    assert result["ranks"] == ["ddp/rank0", "ddp/rank1", "ddp/rank2"]
    assert result["skew_ranks"] == [0, 2] and result["skew_steps"] == [0, 1]
    assert result["skew"] == pytest.approx([4 / 12, 0.0])
    assert result["warnings"] == {"ddp/rank1": ["directory not readable: Permission denied"]}
    assert f"rank1 logs no {STEP_TIME_MS}: it is left out of what uses it" in result["notes"]
