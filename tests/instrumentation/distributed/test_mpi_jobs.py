"""Real MPI jobs (``mpiexec --oversubscribe -n 2`` and ``-n 4``, started by the test, each a hang guard of 120 s):
the demo's data-parallel script with watch() on every rank. Each rank writes its own run; a rank sleeping as long as its
compute (2 ranks; 60 % with 4) raises ``straggler`` in its own run (4 ranks: it is the busiest); a healthy job raises
nothing; on a loaded machine the other ranks may carry only a true straggler warning (one that meets the detector's
rule: tests/instrumentation/straggler_warnings.py); the replicas' checksums agree step for step; a rank that changes a
weight behind DDP's back raises ``replica_divergence``; a rank that raises leaves every rank's steps in its files.

Step size: a 256-384-384-10 MLP on a per-rank batch of 256 with one BLAS thread: 6-17 ms steps for 2 ranks and
18-50 ms for 4 on this 2-core machine (shared with other jobs, load average 4-17 while measured). What makes the
healthy 2-rank job safe here is the CPU wait taken out of the busy time: without it, the ranks of a healthy job, time-
sliced with other processes, were over the 15 % margin on up to 19-20 of 20 steps; with it, on at most 14 (10 windows;
at most 8 in 9 windows with the engine's communication thread), while the planted 2-rank straggler was over it on
13-20 of 20. A CI machine under heavier load once kept one healthy rank 1.3x slower for 20 of 20 steps: that warning
is true (the rank was descheduled), so the healthy job asserts that every other detector is silent and that a straggler
warning, if any, meets its own rule. The healthy job runs on 2 ranks only: with 4 ranks on 2 cores a step is mostly
CPU wait and the busy time left is a small, noisy difference (one healthy 4-rank job in 7 raised a straggler alert
with the Iallreduce engine)."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from instrumentation.dynamics.watcher import LOSS_TAG
from instrumentation.format import alert_names as keys
from instrumentation.format import tags
from instrumentation.format import trace as fmt
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from tests.instrumentation.straggler_warnings import assert_only_true_straggler_warnings
from tests.engine.distributed.mpi_job import HANG_GUARD_S, REPO, environment, mpiexec, requires_mpi
from test_rank_monitor_steps import scalars

pytestmark = requires_mpi
WORKER = REPO / "instrumentation" / "demo" / "ranks.py"
STEPS = 60  # three straggler windows of 20
STRAGGLER_STEPS = 160  # eight windows: the 2-rank straggler was over the margin on 16 or more steps in 2-5 of 5


def job(tmp_path: Path, ranks: int, *options: object, steps: int = STEPS, fails: bool = False) -> Path:
    """Run the worker on ``ranks`` ranks into ``tmp_path/job`` (it must succeed, or with ``fails`` fail); the job's run
    directory."""
    run = tmp_path / "job"
    cmd = [mpiexec(), "--oversubscribe", "-n", str(ranks), sys.executable, str(WORKER), "--logdir", str(run),
           "--steps", str(steps), "--light", *map(str, options)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S, env=environment(), cwd=REPO)
    assert (done.returncode != 0) == fails, f"{' '.join(cmd)}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    if fails:
        assert "planted failure on rank 1 after step 30" in done.stderr
    return run


def alerts(run: Path, rank: int) -> list:
    return AlertReader(os.path.join(run, f"rank{rank}", ALERTS_RELPATH)).read()


def check_rank_runs(run: Path, ranks: int, steps: int = STEPS) -> dict[int, dict]:
    """Each rank's run holds every step's row; the checksums agree across ranks at the same steps. The scalars."""
    assert sorted(p.name for p in run.iterdir()) == [f"rank{k}" for k in range(ranks)]
    read = {k: scalars(run / f"rank{k}") for k in range(ranks)}
    for k in range(ranks):
        for tag in tags.RANK_STEP_TAGS:
            assert [s for s, _ in read[k][tag]] == list(range(steps)), (k, tag)
        assert all(v > 0 for _, v in read[k][tags.COMM_BYTES])  # the gradients' AllReduce, every step
        assert all(v > 0 for _, v in read[k][tags.ALLREDUCE_MS])
    return read


def busy_ms(read: dict) -> np.ndarray:
    """Per step, the busy time the straggler rule compares, from the logged figures."""
    step, wait, data, cpu = (np.array([v for _, v in read[tag]]) for tag in
                             (tags.STEP_TIME_MS, tags.ALLREDUCE_WAIT_MS, tags.DATA_TIME_MS, tags.CPU_WAIT_MS))
    return step - wait - data - cpu


def test_a_planted_straggler_is_named_by_its_own_run_and_by_no_other(tmp_path: Path) -> None:
    # NOTE: a 30 % sleep was over the 15 % margin on 0-20 of a window's 20 steps (2 ranks on 2 cores, with the suite's
    # other work) and once went unreported for all 160 steps in a full run; a 50 % one went unreported in a job with
    # three busy loops beside it (median busy ratio 1.20x: the sleeper's wake-ups wait for a core, CPU wait taken out).
    # Sleeping as long as its compute: 1.53-1.82x and the alert on 19-20 of 20 steps in 3 such jobs
    run = job(tmp_path, 2, "--batch", 256, "--slow-rank", 1, "--slow-share", 1.0, steps=STRAGGLER_STEPS)
    read = check_rank_runs(run, 2, STRAGGLER_STEPS)
    found = alerts(run, 1)
    assert found and {a.kind for a in found} == {keys.STRAGGLER}
    first = found[0]
    assert first.subject == "rank1" and first.evidence[keys.RANK] == 1 and first.evidence[keys.WORLD_SIZE] == 2
    assert first.evidence[keys.STEPS_OVER] >= first.evidence[keys.MIN_STEPS] == 16
    assert first.evidence[keys.RATIO] >= 1.15
    last = first.evidence[keys.WINDOW_STEPS][1]  # the evidence is the logged figures' (within float32 rounding)
    window = slice(last - 19, last + 1)
    assert first.evidence[keys.BUSY_MS] == pytest.approx(np.median(busy_ms(read[1])[window]), rel=1e-5)
    assert first.evidence[keys.OTHERS_BUSY_MS] == pytest.approx(np.median(busy_ms(read[0])[window]), rel=1e-5)
    assert alerts(run, 0) == []
    assert read[0][tags.PARAM_CHECKSUM] == read[1][tags.PARAM_CHECKSUM] != []


def test_with_4_ranks_the_planted_straggler_is_the_busiest_and_others_raise_only_true_warnings(tmp_path: Path) -> None:
    # 4 ranks on 2 cores: rank 1's 30 % sleep showed as 1.19-1.20x the others' median busy time (3 jobs measured), over
    # the 15 % margin on 8-18 of a window's 20 steps: the alert (16 of 20) came in 2 jobs of 3, so it is not asserted.
    # Its ratio fell below 1.1x once at load 15: a 60 % sleep, 1.39x with three busy loops beside the job (30 %: 1.24x)
    run = job(tmp_path, 4, "--batch", 256, "--slow-rank", 1, "--slow-share", 0.6, steps=STRAGGLER_STEPS)
    read = check_rank_runs(run, 4, STRAGGLER_STEPS)
    medians = [float(np.median(busy_ms(read[k]))) for k in range(4)]
    assert max(range(4), key=medians.__getitem__) == 1, medians
    # NOTE: a margin well below the 60 % planted (see above): the busy times of 4 ranks on 2 cores are noisy under load
    assert medians[1] >= 1.05 * float(np.median([medians[k] for k in (0, 2, 3)])), medians
    assert [a for a in alerts(run, 1) if a.subject != "rank1"] == []
    for k in (0, 2, 3):  # CI-like load can make a healthy rank truly slower for a window: only such a warning
        assert_only_true_straggler_warnings(alerts(run, k), k)
    checksums = [read[k][tags.PARAM_CHECKSUM] for k in range(4)]
    assert checksums[0] and all(c == checksums[0] for c in checksums)


def test_a_healthy_job_raises_nothing_and_its_replicas_agree(tmp_path: Path) -> None:
    run = job(tmp_path, 2, "--batch", 256, "--checksum-every", 10, "--profile")
    read = check_rank_runs(run, 2)
    for k in range(2):
        assert_only_true_straggler_warnings(alerts(run, k), k)
    steps = [s for s, _ in read[0][tags.PARAM_CHECKSUM]]
    assert steps == [9, 19, 29, 39, 49, 59]
    assert read[0][tags.PARAM_CHECKSUM] == read[1][tags.PARAM_CHECKSUM]
    assert len({v for _, v in read[0][tags.PARAM_CHECKSUM]}) == len(steps)  # the parameters change: so does the sum
    for k in range(2):  # each rank's capture: its rank, and its AllReduces on their own lane during backward
        (path,) = (run / f"rank{k}" / "plugins" / "profile").glob("*/*.trace.json.gz")
        with gzip.open(path) as handle:
            trace = json.load(handle)
        assert trace["metadata"]["rank"] == k
        events = trace["traceEvents"]
        lane = [e for e in events if e.get("name") == "thread_name" and e["args"]["name"] == fmt.COMM_LANE_NAME]
        assert [e["tid"] for e in lane] == [fmt.TID_COMM]
        comm = [e for e in events if e.get("cat") == fmt.CAT_COMM and e["name"] == "allreduce"]
        assert comm and all(e["tid"] == fmt.TID_COMM and e["args"][fmt.ARG_BYTES] > 0 for e in comm)
        waits = [e for e in events if e.get("cat") == fmt.CAT_COMM_WAIT]
        assert waits and all(e["tid"] == fmt.TID_HOST for e in waits)
        for step in {e["args"][fmt.ARG_STEP] for e in comm}:
            backward = [e for e in events if e.get("cat") == fmt.CAT_OP and e["args"][fmt.ARG_STEP] == step
                        and e["args"][fmt.ARG_PHASE] == "backward"]
            first_bucket = min(e["ts"] for e in comm if e["args"][fmt.ARG_STEP] == step)
            assert first_bucket < max(e["ts"] for e in backward)  # launched while backward still runs


@pytest.mark.parametrize("ranks", [2, 4])
def test_a_rank_that_drifts_raises_replica_divergence_with_both_checksums(tmp_path: Path, ranks: int) -> None:
    run = job(tmp_path, ranks, "--batch", 64, "--checksum-every", 10, "--drift-rank", 1, "--drift-step", 12)
    read = check_rank_runs(run, ranks)
    (alert,) = [a for a in alerts(run, 1) if a.kind == keys.REPLICA_DIVERGENCE]  # steps 19..59 differ: one episode
    assert alert.step == 19 and alert.subject == "rank1"
    assert alert.evidence[keys.PARAMETERS] == ["2.weight"]
    logged = {k: dict(read[k][tags.PARAM_CHECKSUM]) for k in range(ranks)}
    assert alert.evidence[keys.CHECKSUM] == logged[1][19]  # what rank 1 logged at that step
    assert alert.evidence[keys.REFERENCE_CHECKSUM] == logged[0][19]  # what rank 0 logged, in its own run
    assert logged[0][9] == logged[1][9] and logged[0][19] != logged[1][19]
    for k in range(ranks):
        if k != 1:
            assert [a for a in alerts(run, k) if a.kind == keys.REPLICA_DIVERGENCE] == []
            assert logged[k] == logged[0]


def test_a_rank_failure_leaves_every_ranks_steps_in_its_files(tmp_path: Path) -> None:
    # rank 1 raises after step 30: the job is aborted, after each rank's writer flushed (engine.distributed.at_abort).
    # Steps 20-30 were still in the rank monitor's hands (it hands a window's rows over at its end) and the losses
    # in watch()'s: only the abort's flush can have put them in the files.
    run = job(tmp_path, 2, "--batch", 64, "--fail-rank", 1, "--fail-step", 30, fails=True)
    for k in range(2):
        read = scalars(run / f"rank{k}")
        assert [s for s, _ in read[tags.STEP_TIME_MS]] == list(range(31)), k
        assert [s for s, _ in read[LOSS_TAG]] == list(range(31)), k
