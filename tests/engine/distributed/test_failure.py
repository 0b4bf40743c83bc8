"""A rank that raises mid-training aborts the job: mpiexec returns (before the hang guard) with a nonzero code,
the failing rank's error is in the output with its rank, and every rank's at_abort callable ran first."""
from __future__ import annotations

import pytest

from mpi_job import requires_mpi, run

pytestmark = requires_mpi


@pytest.mark.parametrize("n", [2, 4])
def test_a_failing_rank_aborts_the_job_after_every_rank_flushed(tmp_path, n):
    done = run("fail.py", n, tmp_path, 1, check=False)  # returns before the hang guard or raises TimeoutExpired
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "ValueError: planted failure on rank 1 at step 3" in output
    assert "[rank 1] ValueError: planted failure on rank 1 at step 3" in output
    assert "finished all steps" not in output
    flushed = sorted(p.name for p in tmp_path.glob("rank*.flushed"))
    assert flushed == [f"rank{r}.flushed" for r in range(n)], output
    assert "every rank ran its at_abort callables" in output


def test_a_job_that_ends_normally_exits_zero_and_runs_no_at_abort(tmp_path):
    done = run("fail.py", 2, tmp_path, 99, check=False)  # no rank 99: nobody fails
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("finished all steps") == 2
    assert not list(tmp_path.glob("rank*.flushed"))


def test_an_exception_in_a_thread_of_a_rank_aborts_the_job_too(tmp_path):
    done = run("fail.py", 2, tmp_path, 1, "thread", check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "[rank 1] in thread loader:" in output and "planted failure on rank 1 in a thread" in output
    assert sorted(p.name for p in tmp_path.glob("rank*.flushed")) == ["rank0.flushed", "rank1.flushed"], output


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_killed_by_sigkill_ends_the_job_instead_of_hanging_the_others(tmp_path, n):
    # a killed rank cannot tell the others: mpiexec notices its death and takes the job down (their at_abort
    # callables do not run; what their writers flushed before stays readable)
    done = run("fail.py", n, tmp_path, 1, "kill", check=False)  # returns before the hang guard or raises TimeoutExpired
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "rank 1 kills itself" in output and "finished all steps" not in output
    assert "rank 1" in done.stderr and "signal 9" in done.stderr, output
