"""Planted leaks in real engine training loops: each found at the user's allocation line with ~its bytes per step;
healthy runs and a cache that grows then stops raise nothing."""
from __future__ import annotations

from pathlib import Path

import pytest

from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.memory_snapshot import read_snapshot, snapshot_dir
from training_loops import BATCH, CLASSES, FEATURES, HIDDEN, line_of, oracle_bytes_per_step, train

STEPS = 60


def leak_alerts(tracker) -> list:
    tracker.writer.flush()  # the steps of a batch not processed yet (up to batch_steps or batch_s late otherwise)
    return [a for a in AlertReader(Path(tracker.run_dir) / ALERTS_RELPATH).read() if a.kind == "leak"]


def sites(alert) -> dict[str, float]:
    """Allocation line (file:line) → bytes per step, summed over the alert's groups."""
    found: dict[str, float] = {}
    for group in alert.evidence["groups"]:
        site = group["site"].rsplit(" ", 1)[0]
        found[site] = found.get(site, 0.0) + group["bytes_per_step"]
    return found


def site(marker: str) -> str:
    return f"training_loops.py:{line_of(marker)}"


def at(found: dict[str, float], marker: str) -> float:
    matches = [v for k, v in found.items() if k.endswith(site(marker))]
    assert matches, f"no group allocated at {site(marker)} in {found}"
    return matches[0]


def the_leak(tracker, allocated: list[int]):
    alerts = leak_alerts(tracker)
    assert len(alerts) == 1, [a.message for a in alerts]
    alert = alerts[0]
    expected = oracle_bytes_per_step(allocated)
    assert expected > 0
    assert alert.evidence["bytes_per_step"] == pytest.approx(expected, rel=0.05)
    snapshot = Path(snapshot_dir(tracker.run_dir)) / (alert.evidence["snapshot"] + ".snapshot.json.gz")
    assert alert.evidence["snapshot"] and snapshot.exists()
    return alert, sites(alert)


def test_summing_losses_without_detaching(make_tracker) -> None:
    tracker = make_tracker()
    alert, found = the_leak(tracker, train(STEPS, "sum_losses"))
    assert len(found) == 2
    assert at(found, "# leak: running total") == pytest.approx(4.0)  # a float32 scalar per step
    assert at(found, "# leak: loss") == pytest.approx(4.0)  # each step's loss, held by the running total's graph
    assert "loss.item()" in alert.evidence["cause"]


def test_callback_keeping_every_batch_activation(make_tracker) -> None:
    tracker = make_tracker()
    alert, found = the_leak(tracker, train(STEPS, "hook"))
    assert list(found) == [k for k in found if k.endswith(site("# leak: fc1 output"))]
    assert at(found, "# leak: fc1 output") == pytest.approx(BATCH * HIDDEN * 4)
    top = alert.evidence["groups"][0]
    assert (top["op"], top["module"], top["shape"], top["category"]) == ("Linear", "fc1", [BATCH, HIDDEN], "activation")
    assert "hook" in alert.evidence["cause"]


def test_parameters_created_inside_the_step(make_tracker) -> None:
    tracker = make_tracker()
    alert, found = the_leak(tracker, train(STEPS, "parameters"))
    assert at(found, "# leak: parameters in step") == pytest.approx((CLASSES * CLASSES + CLASSES) * 4)
    assert {g["category"] for g in alert.evidence["groups"]} == {"parameter"}
    assert "Parameter built inside the step" in alert.evidence["cause"]


def test_backward_retain_graph_on_a_kept_graph(make_tracker) -> None:
    tracker = make_tracker()
    allocated = train(STEPS, "retain_graph")
    alert, found = the_leak(tracker, allocated)
    for marker in ("# leak: fc1 output", "# leak: relu output", "# leak: fc2 output", "# leak: loss"):
        at(found, marker)
    assert at(found, "# leak: fc1 output") == pytest.approx(BATCH * HIDDEN * 4)
    assert sum(found.values()) == pytest.approx(oracle_bytes_per_step(allocated), rel=0.05)
    assert "retain_graph=True" in alert.evidence["cause"]


def test_unbounded_prefetch_queue(make_tracker) -> None:
    tracker = make_tracker()
    alert, found = the_leak(tracker, train(STEPS, "prefetch"))
    assert list(found) == [k for k in found if k.endswith(site("# leak: prefetch queue"))]
    assert at(found, "# leak: prefetch queue") == pytest.approx(BATCH * FEATURES * 4 + BATCH * 8)
    assert {g["category"] for g in alert.evidence["groups"]} == {"input"}
    assert "queue" in alert.evidence["cause"]


@pytest.mark.parametrize("leak", ["", "cache"])
def test_healthy_runs_and_a_cache_that_stops_growing_raise_nothing(make_tracker, leak: str) -> None:
    tracker = make_tracker()
    allocated = train(80, leak)
    if leak == "cache":
        assert allocated[19] - allocated[0] == 19 * 256 * 4  # the cache really grew (the oracle), then stopped
    assert allocated[-1] == allocated[25]
    assert leak_alerts(tracker) == []


def test_leak_snapshot_holds_the_accumulated_blocks(make_tracker) -> None:
    tracker = make_tracker()
    train(STEPS, "hook")
    alert = leak_alerts(tracker)[0]
    snapshot = read_snapshot(Path(snapshot_dir(tracker.run_dir)) / (alert.evidence["snapshot"] + ".snapshot.json.gz"))
    assert snapshot.reason == "leak" and snapshot.step == alert.step
    kept = [b for b in snapshot.blocks if b.stack and b.stack[0].rsplit(" ", 1)[0].endswith(site("# leak: fc1 output"))
            and b.op == "Linear"]
    assert len(kept) >= alert.step - 1  # one per step so far (the current step's too, while the hook holds it)
    assert snapshot.extra["groups"][0]["site"] == alert.evidence["groups"][0]["site"]
