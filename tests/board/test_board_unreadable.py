"""Runs and files the board may not read (mode 000) are listed with a warning saying so, never dropped silently.

Tests run as root in CI, where mode 000 stops nothing: the scenario runs in a child process that gives up the
capabilities which let root ignore file modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so the kernel applies the
modes to it as to any user; a non-root run applies them anyway.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from board_helpers import DROP_FILE_MODE_CAPABILITIES, REPO, write_scalars
from instrumentation.format.alerts import ALERTS_RELPATH, Alert, AlertWriter

CHILD = DROP_FILE_MODE_CAPABILITIES + r'''
from board.data.alerts import AlertIndex
from board.data.store import LogdirStore

logdir = Path(sys.argv[1])
try:
    (logdir / "locked_file").joinpath(sys.argv[2]).read_bytes()
    modes_apply = False
except PermissionError:
    modes_apply = True
store = LogdirStore(logdir)
store.refresh()
store.refresh()
alerts = AlertIndex(store)
alerts.refresh()
print(json.dumps({"modes_apply": modes_apply,
                  "runs": {s.name: {"warnings": list(s.warnings), "points": s.points} for s in store.runs()},
                  "alert_problems": alerts.problems()}))
'''


def test_unreadable_directories_and_files_are_listed_with_a_warning(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    for run in ("ok", "locked_dir", "locked_file"):
        write_scalars(logdir / run, "loss", np.arange(5), np.ones(5))
    AlertWriter(logdir / "ok").write(Alert("dead_units", "warning", "fc1", "half the units never fire", 3))
    [locked_file] = (logdir / "locked_file").glob("events.out.tfevents.*")
    locked_file.chmod(0)
    (logdir / "ok" / ALERTS_RELPATH).chmod(0)
    (logdir / "locked_dir").chmod(0)
    try:
        child = subprocess.run([sys.executable, "-c", CHILD, str(logdir), locked_file.name], cwd=REPO,
                               env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    finally:
        (logdir / "locked_dir").chmod(0o755)
    assert child.returncode == 0, child.stderr
    result = json.loads(child.stdout)
    assert result["modes_apply"], "the child could still read a mode-000 file: the scenario would test nothing"
    runs = result["runs"]
    assert sorted(runs) == ["locked_dir", "locked_file", "ok"]
    assert runs["ok"] == {"warnings": [], "points": 5}
    assert runs["locked_dir"] == {"warnings": ["directory not readable: Permission denied"], "points": 0}
    assert runs["locked_file"] == {"warnings": [f"{locked_file.name}: not readable (Permission denied)"], "points": 0}
    assert "Permission denied" in result["alert_problems"]["ok"]
