"""The "peak" snapshot is the allocator's state at the highest peak: a late higher peak held back by the rate limit
is still written, and a second run in the same process never gets the first run's capture."""
from __future__ import annotations

from pathlib import Path

from engine import hooks
from instrumentation.format.memory_snapshot import MemorySnapshot, list_snapshots, read_snapshot
from scalars_helpers import read_scalars
from training_loops import SPIKE_BYTES, train_with_late_spike

HELD_BYTES = 3 << 16  # a tensor only the first of two runs holds while it trains


def _peaks(run_dir: str) -> list[MemorySnapshot]:
    return [s for f in list_snapshots(run_dir) if (s := read_snapshot(f.path)).reason == "peak"]


def _highest_step_peak(run_dir: str) -> tuple[int, float]:
    """(step, bytes) of the highest ``mem/cpu/peak_bytes`` the run logged (the chart's highest point)."""
    peaks = read_scalars(run_dir)["mem/cpu/peak_bytes"]
    step = max(peaks, key=lambda s: (peaks[s], -s))
    return step, peaks[step]


def test_a_second_run_in_the_process_never_gets_the_first_runs_capture(tmp_path: Path) -> None:
    """Both runs count steps from 0: the allocator's answer remembered for the first run's step 15 must not be handed
    to the second run's step 15 (it was: the second run's peak snapshot was the first run's, at its size)."""
    hooks.reset_step(0)
    train_with_late_spike(tmp_path / "first", 20, spike_at=5, held_bytes=HELD_BYTES)
    hooks.reset_step(0)
    spike_step = train_with_late_spike(tmp_path / "second", 20, spike_at=12)
    run_dir = str(tmp_path / "second")
    step, peak_bytes = _highest_step_peak(run_dir)
    logged = read_scalars(run_dir)["mem/cpu/peak_bytes"]
    peaks = _peaks(run_dir)
    assert peaks and max(s.allocator.allocated for s in peaks) == peak_bytes and step == spike_step
    for snapshot in peaks:  # each is a state of this run: its step's logged peak, blocks allocated by then
        assert snapshot.allocator.allocated == logged[snapshot.step]
        assert all(b.step <= snapshot.step and b.bytes != HELD_BYTES for b in snapshot.blocks)
        assert sum(b.bytes for b in snapshot.blocks) == snapshot.allocator.allocated


def test_a_late_peak_inside_the_rate_limit_is_the_last_peak_snapshot(tmp_path: Path) -> None:
    hooks.reset_step(0)
    spike_step = train_with_late_spike(tmp_path / "run", 40, spike_at=30)
    run_dir = str(tmp_path / "run")
    step, peak_bytes = _highest_step_peak(run_dir)
    assert step == spike_step and peak_bytes > SPIKE_BYTES  # the oracle: the logged step peaks
    highest = max(_peaks(run_dir), key=lambda s: s.allocator.allocated)
    assert (highest.step, highest.allocator.allocated) == (spike_step, peak_bytes)
    assert sum(b.bytes for b in highest.blocks) == peak_bytes
    assert [b.step for b in highest.blocks if b.bytes == SPIKE_BYTES] == [spike_step]
    assert all(b.step <= spike_step for b in highest.blocks)
