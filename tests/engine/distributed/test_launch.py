"""python -m engine.distributed.launch: N ranks of the script with its arguments, OMP_NUM_THREADS=1, the job's
exit code; --oversubscribe when N exceeds the cores; a clear error without mpiexec."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.distributed import launch
from mpi_job import HANG_GUARD_S, REPO, SCRIPTS, environment, requires_mpi


def _launch(*args):
    env = environment()
    for name in ("OMP_NUM_THREADS", "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                 "OMPI_MCA_rmaps_base_oversubscribe"):
        env.pop(name)  # the launcher sets what it needs itself
    return subprocess.run([sys.executable, "-m", "engine.distributed.launch", *map(str, args)], capture_output=True,
                          text=True, timeout=HANG_GUARD_S, env=env, cwd=REPO)


@requires_mpi
def test_launch_runs_n_ranks_with_the_arguments_and_returns_the_exit_code(tmp_path):
    done = _launch("-n", 4, SCRIPTS / "launched.py", tmp_path, 0, "--epochs", 3)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    assert [s["rank"] for s in seen] == [0, 1, 2, 3] and all(s["size"] == 4 for s in seen)
    assert all(s["omp"] == "1" and s["argv"] == ["--epochs", "3"] for s in seen)
    failed = _launch("-n", 2, "--oversubscribe", SCRIPTS / "launched.py", tmp_path, 3)
    assert failed.returncode == 3, failed.stdout + failed.stderr


def test_oversubscribe_is_added_when_ranks_exceed_the_cores(monkeypatch):
    monkeypatch.setattr(launch, "find_mpiexec", lambda: "/x/mpiexec")
    assert launch.command(4, ["t.py", "a"], cores=2) == ["/x/mpiexec", "-n", "4", "--oversubscribe", sys.executable,
                                                         "t.py", "a"]
    assert "--oversubscribe" not in launch.command(2, ["t.py"], cores=2)
    assert "--oversubscribe" in launch.command(1, ["t.py"], oversubscribe=True, cores=2)


def test_without_mpiexec_the_error_names_the_install_command(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"pip install 'flowscope\[mpi\]'"):
        launch.find_mpiexec()
    script = tmp_path / "train.py"
    script.write_text("")
    assert launch.main(["-n", "2", str(script)]) == 127
    assert "no mpiexec" in capsys.readouterr().err


def test_bad_arguments(tmp_path):
    with pytest.raises(SystemExit):
        launch.main(["-n", "0", str(tmp_path / "t.py")])
    with pytest.raises(SystemExit):
        launch.main(["-n", "2", str(tmp_path / "missing.py")])
