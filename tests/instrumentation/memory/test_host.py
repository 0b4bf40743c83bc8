"""Host RSS growth outside the engine's tensors, attributed with tracemalloc to the user's line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from training_loops import train

KEPT_BYTES = 512 * 1024


def test_host_leak_found_with_tracemalloc_attribution(make_tracker) -> None:
    tracker = make_tracker(host_attribution=True, host_every_steps=4, batch_steps=4)
    kept: list[np.ndarray] = []
    line = next(number for number, text in enumerate(Path(__file__).read_text().splitlines(), start=1)
                if text.startswith("    train(170, on_step="))
    train(170, on_step=lambda step: kept.append(np.ones(KEPT_BYTES // 8)))  # RSS is read every 4th step
    alerts = [a for a in AlertReader(Path(tracker.run_dir) / ALERTS_RELPATH).read() if a.kind == "leak"]
    assert [a.subject for a in alerts] == ["host RSS"]
    evidence = alerts[0].evidence
    assert evidence["bytes_per_step"] == pytest.approx(KEPT_BYTES, rel=0.2)
    assert evidence["engine_bytes_per_step"] == 0
    top = evidence["python_sites"][0]
    assert top["site"].endswith(f"test_host.py:{line}")
    assert top["bytes_per_step"] == pytest.approx(KEPT_BYTES, rel=0.05)


def test_engine_leak_is_not_reported_twice_as_host_growth(make_tracker) -> None:
    tracker = make_tracker(host_every_steps=4, batch_steps=4)
    train(170, "prefetch")
    alerts = [a for a in AlertReader(Path(tracker.run_dir) / ALERTS_RELPATH).read() if a.kind == "leak"]
    assert [a.evidence["device"] for a in alerts] == ["cpu"]
