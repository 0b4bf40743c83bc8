"""Input-pipeline memory seen by the tracker: an oversized prefetch(100) as `input` bytes in the mem/ scalars (read
back with TensorBoard), a growing cache() as a leak alert naming the stage and the line that built it, and no alert
for a healthy, bounded pipeline."""
from __future__ import annotations

from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from engine import memory
from engine.data import stage_of
from instrumentation.format import tags
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.format.memory_categories import INPUT
from pipeline_loops import (FEATURES, PREFETCHED, ROWS, growing_cache, healthy_pipeline, stage_site, train_on,
                            write_prefetch_run)

INPUT_TAG = tags.category_tag("cpu", INPUT)
BATCH_TENSOR_BYTES = ROWS * FEATURES * 4  # the float32 tensor each step makes of its element


def scalars(run_dir: str | Path, tag: str) -> dict[int, float]:
    """step → value of ``tag``, read by TensorBoard's own reader."""
    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {event.step: event.value for event in accumulator.Scalars(tag)}


def engine_leaks(run_dir: str | Path) -> list:
    alerts = AlertReader(Path(run_dir) / ALERTS_RELPATH).read()
    return [a for a in alerts if a.kind == "leak" and a.subject != "host RSS"]


def test_an_oversized_prefetch_shows_as_input_bytes_in_the_mem_scalars(tmp_path: Path) -> None:
    before, filled_bytes = write_prefetch_run(tmp_path / "run", steps=30)
    assert filled_bytes == [PREFETCHED] * 30
    values = scalars(tmp_path / "run", INPUT_TAG)
    assert sorted(values) == list(range(30))
    # at each step's peak: the full queue, the batch tensor and (while the next one is made) the previous one
    for step in range(1, 30):
        assert PREFETCHED <= values[step] - before <= PREFETCHED + 2 * BATCH_TENSOR_BYTES, step
    assert not engine_leaks(tmp_path / "run")  # a full queue is flat


@pytest.mark.parametrize("stacks", [True, False])
def test_a_growing_cache_raises_a_leak_alert_naming_the_stage_and_its_line(make_tracker, stacks: bool) -> None:
    tracker = make_tracker(stacks=stacks, every=1)  # every step's scalars (the leak test sees every step anyway)
    element_bytes = 64 * 1024
    train_on(iter(growing_cache(200, element_bytes)), 60)
    tracker.close()
    tracker.writer.flush()
    values = scalars(tracker.run_dir, INPUT_TAG)
    assert all(values[step] - values[step - 1] == element_bytes for step in range(2, 60))  # one cached element a step
    [alert] = engine_leaks(tracker.run_dir)
    assert alert.evidence["bytes_per_step"] == pytest.approx(element_bytes, rel=0.02)
    built_at = stage_site("# stage: cache", "growing_cache")
    top = alert.evidence["groups"][0]
    assert (top["category"], stage_of(top["op"])) == (INPUT, "cache")
    assert top["op"].startswith("cache() at ") and top["op"].endswith(built_at)
    assert top["bytes_per_step"] == pytest.approx(element_bytes, rel=0.02)
    assert built_at in top["site"]  # the line itself with stacks, inside "(no stack) op ..." without
    assert "held by the input pipeline's cache() at " in alert.message and built_at in alert.message
    assert "first pass" in alert.evidence["cause"]


def test_a_healthy_pipeline_raises_no_leak_alert(make_tracker) -> None:
    tracker = make_tracker(every=1)  # every step's scalars are read below
    seen: set[str | None] = set()
    steps = 80
    train_on(iter(healthy_pipeline(steps * ROWS)), steps,
             on_fetch=lambda: seen.update(stage_of(b.op) for b in memory.live_blocks("cpu")))
    tracker.close()
    tracker.writer.flush()
    assert seen & {"map", "prefetch"}  # the stages' buffers were counted at fetches...
    assert len(scalars(tracker.run_dir, INPUT_TAG)) == steps
    assert not engine_leaks(tracker.run_dir)  # ...and released: nothing grows
