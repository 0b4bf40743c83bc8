"""The demo's runs, each trained as `python -m instrumentation.demo` trains it: each raises exactly the alert kinds
it is built to raise, the healthy ones none; the command line trains, reports and replaces only its own runs."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from instrumentation.demo import RUNS, main, multirank
from instrumentation.demo.cli import raised_kinds
from instrumentation.demo.common import MARKER
from instrumentation.format import alert_names
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.memory_snapshot import read_snapshot
from tests.engine.distributed.mpi_job import requires_mpi
from tests.instrumentation.demo_training import train_demo_run
from tests.instrumentation.straggler_warnings import assert_only_true_straggler_warnings

HEALTHY = {"baseline", "hparams-media"}


def test_the_family_covers_each_failure_once_and_names_known_kinds() -> None:
    names = [run.name for run in RUNS]
    assert len(set(names)) == len(names)
    assert {run.name for run in RUNS if not run.expected_alerts} == HEALTHY
    expected = {kind for run in RUNS for kind in run.expected_alerts}
    assert expected == {alert_names.EXPLODING_GRADIENT, alert_names.LOSS_SPIKE, alert_names.DEAD_UNITS,
                        alert_names.NONFINITE, alert_names.INPUT_BOUND, alert_names.LEAK, alert_names.OOM,
                        alert_names.STRAGGLER}


def _needs_mpi(run):
    """The data-parallel run needs MPI (skipped, with the reason, where mpi4py or mpiexec is missing)."""
    return pytest.param(run, marks=requires_mpi) if run.train is multirank.straggler else run


@pytest.mark.parametrize("run", [_needs_mpi(run) for run in RUNS], ids=[run.name for run in RUNS])
def test_each_run_raises_exactly_the_alerts_it_is_built_to_raise(run, tmp_path: Path) -> None:
    run_dir, outcome = train_demo_run(run, str(tmp_path), seed=0)
    assert sorted(raised_kinds(run_dir)) == sorted(run.expected_alerts), outcome
    assert "unexpected" not in outcome
    alerts = AlertReader(os.path.join(run_dir, ALERTS_RELPATH)).read()
    for alert in alerts:  # each alert's evidence the board links to is there
        if alert.kind in (alert_names.OOM, alert_names.LEAK):
            snapshot = alert.evidence[alert_names.SNAPSHOT]
            path = Path(run_dir) / "plugins" / "memory" / f"{snapshot}.snapshot.json.gz"
            assert read_snapshot(path).reason == alert.kind
    if run.name == "ranks-straggler":  # each rank its own run; the straggler named in rank 1's, nobody else's
        assert sorted(p.name for p in Path(run_dir).glob("rank*")) == ["rank0", "rank1"]
        assert [a.subject for a in AlertReader(Path(run_dir) / "rank1" / ALERTS_RELPATH).read()][:1] == ["rank1"]
        assert_only_true_straggler_warnings(AlertReader(Path(run_dir) / "rank0" / ALERTS_RELPATH).read(), 0)
        assert list((Path(run_dir) / "rank1" / "plugins" / "profile").glob("*/*.trace.json.gz"))
    if run.name == "nan-origin":
        (alert,) = alerts
        assert (alert.evidence["op"], alert.evidence["module"], alert.evidence["phase"]) == ("Div", "standardize",
                                                                                            "forward")
    if run.name == "hparams-media":  # trained under engine.function: the Graph page has its graphs
        assert sorted(p.name for p in (Path(run_dir) / "plugins" / "graph").iterdir()) == [
            "train_step.0.optimised.json", "train_step.0.unoptimised.json"]
    if run.name in ("baseline", "input-bound", "hparams-media"):  # the Profile page has a capture of the run
        assert list((Path(run_dir) / "plugins" / "profile").glob("*/*.trace.json.gz"))
    if run.name == "input-bound":  # ... and it covers the step the input_bound alert links to
        from instrumentation.format.trace import read_trace
        (trace,) = [read_trace(p) for p in (Path(run_dir) / "plugins" / "profile").glob("*/*.trace.json.gz")]
        steps = {e["args"]["step"] for e in trace["traceEvents"] if e.get("cat") == "op"}
        assert alerts[0].step in steps


def test_the_command_line_trains_the_chosen_runs_and_replaces_only_its_own(tmp_path: Path, capsys) -> None:
    logdir = tmp_path / "logs"
    assert main(["--logdir", str(logdir), "--runs", "logits-leak"]) == 0
    out = capsys.readouterr().out
    assert "logits-leak" in out and "alerts: leak" in out
    assert (logdir / "logits-leak" / MARKER).is_file()
    first = sorted(p.name for p in (logdir / "logits-leak").glob("events.out.tfevents.*"))
    assert main(["--logdir", str(logdir), "--runs", "logits-leak"]) == 0  # a second demo replaces its run
    assert sorted(p.name for p in (logdir / "logits-leak").glob("events.out.tfevents.*")) != first
    assert len(list((logdir / "logits-leak").glob("events.out.tfevents.*"))) == 1
    (logdir / "dead-relu").mkdir()  # a directory the demo did not write is never replaced
    with pytest.raises(FileExistsError, match="dead-relu"):
        main(["--logdir", str(logdir), "--runs", "dead-relu"])
    with pytest.raises(SystemExit):
        main(["--logdir", str(logdir), "--runs", "nope"])
    assert "unknown demo run(s) nope" in capsys.readouterr().err


def test_without_mpi_the_data_parallel_run_is_skipped_in_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    real_find_spec = multirank.importlib.util.find_spec
    monkeypatch.setattr(multirank.importlib.util, "find_spec",
                        lambda name, *args: None if name == "mpi4py" else real_find_spec(name, *args))
    assert main(["--logdir", str(tmp_path), "--runs", "ranks-straggler"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len([line for line in lines if "ranks-straggler" in line]) == 1
    assert "skipped: no MPI here (pip install 'flowscope[mpi]'" in lines[0]


def test_a_live_demo_run_answers_the_boards_capture_request(tmp_path: Path) -> None:
    import threading
    import time

    from board.data.profile_captures import not_listening_reason, request_capture
    from instrumentation.demo.live import LIVE_RUN, train_live
    from instrumentation.format import trace as fmt

    logdir = tmp_path / "logs"
    logdir.mkdir()
    stop = threading.Event()
    trainer = threading.Thread(target=train_live, args=(str(logdir), 0, 300.0, stop))
    trainer.start()
    run_dir = logdir / LIVE_RUN
    try:
        for _ in range(600):  # bounded: until the run announces its listener
            if run_dir.is_dir() and not_listening_reason(run_dir, logdir) is None:
                break
            time.sleep(0.1)
        request_capture({LIVE_RUN: run_dir}, LIVE_RUN, 3, True, logdir)
        for _ in range(1200):  # bounded: until the capture is written
            status = fmt.read_capture_status(run_dir)
            if status.state in ("done", "failed"):
                break
            time.sleep(0.1)
        assert status.state == "done", status
        assert list((run_dir / "plugins" / "profile" / status.capture_id).glob("*.trace.json.gz"))
    finally:
        stop.set()
        trainer.join(300)
    assert not_listening_reason(run_dir, logdir) is not None  # finished: nobody listens any more
