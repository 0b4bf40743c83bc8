"""A leak that keeps growing is attributed once: later checks of the same growth compare two step ends' groups and
write nothing; each step end's live set is grouped once while it is in the window."""
from __future__ import annotations

from pathlib import Path

from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.memory import tracker as tracker_module
from training_loops import train


def test_a_growing_leak_is_attributed_once_and_each_step_grouped_once(make_tracker, monkeypatch) -> None:
    grouped: list[int] = []  # len() of each live set grouped
    real = tracker_module.live_groups

    def counting(live, stacks=False):
        grouped.append(len(live))
        return real(live, stacks)

    monkeypatch.setattr(tracker_module, "live_groups", counting)
    attributions: list[int] = []
    real_attribute = tracker_module.attribute

    def counting_attribute(window, device, min_z):
        attributions.append(len(window))
        return real_attribute(window, device, min_z)

    monkeypatch.setattr(tracker_module, "attribute", counting_attribute)
    tracker = make_tracker(stacks=False, every=1, batch_steps=1)
    train(200, "sum_losses")
    tracker.close()
    leaks = [a for a in AlertReader(Path(tracker.run_dir) / ALERTS_RELPATH).read() if a.kind == "leak"]
    assert len(leaks) == 1  # the same growth, checked every 10 steps after it was found, is reported once
    checks = (200 - 10 - 30) // 10 + 1  # after the warm-up, one check every 10 steps once the window is full
    assert len(attributions) == 1  # later checks of the same growth: no attribution over the window
    # the first attribution groups its 30 step ends; every later check groups what entered the window since
    # (10 step ends, of which it reads the first and the last)
    assert len(grouped) <= 30 + (checks - 1) * 2
    assert leaks[0].evidence["groups"]  # the one alert still has its evidence
