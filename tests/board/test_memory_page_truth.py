"""One memory truth on the Memory page's data and figure, from runs written by the real tracker: the chart's highest
peak is the highest snapshot's (an evaluation after training, so labelled), a thinned log is drawn as markers with a
faint dotted joint and the page says its interval, the limit and the OOM step are drawn, a leak's window is marked."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from board.components.memory_figures import timeline_figure
from board.data.memory import alert_marks, memory_alerts, snapshot_marks, timeline
from board.data.store import LogdirStore
from instrumentation.format.alert_names import LEAK, OOM
from instrumentation.format.memory_snapshot import EVALUATION, TRAINING, list_snapshots, read_snapshot
from memory_truth_runs import (EVALUATION_BYTES, EVERY, OOM_LIMIT_BYTES, write_evaluated_run, write_leak_run,
                               write_oom_run)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    root = tmp_path_factory.mktemp("memory-truth")
    facts = write_evaluated_run(root / "evaluated")
    write_oom_run(root / "oom")
    write_leak_run(root / "leak")
    return root, facts


def _store(root: Path) -> LogdirStore:
    store = LogdirStore(root)
    store.refresh()
    return store


def _figure(store: LogdirStore, run: str, focus: str | None = None) -> dict:
    return timeline_figure(timeline(store, run, "cpu"), run, snapshot_marks(store, run, "cpu"),
                           alert_marks(memory_alerts(store, run), "cpu"), focus)


def _trace(figure: dict, name: str) -> dict:
    [trace] = [t for t in figure["data"] if t["name"] == name]
    return trace


def test_the_highest_peak_on_the_chart_is_the_highest_snapshot_an_evaluation(logdir) -> None:
    root, facts = logdir
    store = _store(root)
    line = timeline(store, "evaluated", "cpu")
    closing = facts["closing_step"]
    # one step in EVERY and the step in progress at closing (the evaluation's), not the last training step
    assert line.steps.tolist() == [*range(0, closing, EVERY), closing]
    assert line.peak[-1] == facts["before"] + EVALUATION_BYTES == line.peak.max()
    [highest] = [s for s in (read_snapshot(f.path) for f in list_snapshots(root / "evaluated"))
                 if s.allocator.allocated == line.peak.max()]
    assert (highest.reason, highest.step, highest.phase) == ("peak", closing, EVALUATION)
    marks = {m.step: m for m in snapshot_marks(store, "evaluated", "cpu")}
    assert marks[closing].phase == EVALUATION and marks[closing].allocated_bytes == line.peak[-1]
    assert all(m.phase == TRAINING for step, m in marks.items() if step != closing)
    drawn = _trace(_figure(store, "evaluated"), "snapshots")  # on the chart: at the peak line's highest point, so said
    at = drawn["x"].index(closing)
    assert drawn["y"][at] == line.peak.max() and drawn["text"][at].strip() == "evaluation"
    assert {text for x, text in zip(drawn["x"], drawn["text"]) if x != closing} == {""}


def test_a_thinned_log_is_markers_with_a_faint_dotted_joint_and_its_interval_said(logdir) -> None:
    root, facts = logdir
    store = _store(root)
    line = timeline(store, "evaluated", "cpu")
    assert line.sampling is not None
    assert line.sampling.intervals == ((0, EVERY),)  # a fixed interval from the first step: no pacer decisions
    assert "memory logged every 4 steps from step 0" in line.sampling.describe()
    assert line.unmeasured_before.tolist() == [False] + [True] * (len(line.steps) - 1)
    figure = _figure(store, "evaluated")
    peak = _trace(figure, "peak")
    assert "markers" in peak["mode"] and peak["connectgaps"] is False
    # a break (None) before every point after unlogged steps: no solid segment between two logged steps
    points = [(x, y) for x, y in zip(peak["x"], peak["y"]) if x is not None]
    assert [x for x, _ in points] == line.steps.tolist() and peak["x"].count(None) == len(line.steps) - 1
    joint = _trace(figure, "peak (not logged between)")
    assert joint["line"]["dash"] == "dot" and joint["opacity"] < 0.5 and joint["hoverinfo"] == "skip"
    bands = [t for t in figure["data"] if t["name"] in line.bands]
    assert bands and all(t["type"] == "bar" and t["width"] == 1 and "stackgroup" not in t for t in bands)


def test_every_step_logged_is_drawn_as_lines(logdir) -> None:
    root, _ = logdir
    store = _store(root)
    line = timeline(store, "oom", "cpu")
    assert line.sampling is None and line.unmeasured_before is None
    figure = _figure(store, "oom")
    assert _trace(figure, "peak")["mode"] == "lines" and not [t for t in figure["data"] if "not logged" in t["name"]]


def test_the_limit_and_the_oom_step_are_on_the_chart(logdir) -> None:
    root, _ = logdir
    store = _store(root)
    [alert] = memory_alerts(store, "oom")
    assert alert.kind == OOM
    line = timeline(store, "oom", "cpu")
    assert line.steps[-1] == alert.step  # the OOM step was sampled when the alert fired
    assert line.allocated[-1] == alert.evidence["allocated_bytes"]
    figure = _figure(store, "oom", focus=alert.evidence["snapshot"])
    limit = _trace(figure, "limit")
    assert limit["line"]["shape"] == "hv" and limit["x"][0] == 0 and limit["x"][-1] == alert.step
    assert {y for y in limit["y"] if y is not None} == {OOM_LIMIT_BYTES}
    [oom_line] = [s for s in figure["layout"]["shapes"] if s["name"] == "oom-step"]
    assert oom_line["x0"] == oom_line["x1"] == alert.step and oom_line["line"]["width"] > 2  # the focused alert
    snapshots = _trace(figure, "snapshots")
    snapshot_id = alert.evidence["snapshot"]
    focused = snapshots["customdata"].index(next(c for c in snapshots["customdata"] if c[0] == snapshot_id))
    assert snapshots["x"][focused] == alert.step
    assert snapshots["marker"]["size"][focused] == max(snapshots["marker"]["size"])


def test_the_leak_window_and_step_are_marked_and_its_snapshot_is_that_step_end(logdir) -> None:
    root, _ = logdir
    store = _store(root)
    [alert] = [a for a in memory_alerts(store, "leak") if a.kind == LEAK]
    line = timeline(store, "leak", "cpu")
    at = line.steps.tolist().index(alert.step)  # the alert's step is logged though it is no multiple of 5
    figure = _figure(store, "leak", focus=alert.evidence["snapshot"])
    [window] = [s for s in figure["layout"]["shapes"] if s["name"] == "leak-window"]
    assert (window["x0"], window["x1"]) == (min(alert.evidence["steps"]), max(alert.evidence["steps"]))
    [step] = [s for s in figure["layout"]["shapes"] if s["name"] == "leak-step"]
    assert step["x0"] == alert.step
    [snapshot] = [read_snapshot(f.path) for f in list_snapshots(root / "leak")
                  if f.capture_id == alert.evidence["snapshot"]]
    assert snapshot.step == alert.step and snapshot.allocator.allocated == line.allocated[at]
    assert snapshot.allocator.peak == np.max(line.peak[: at + 1])  # the highest up to that step, as the chart's
