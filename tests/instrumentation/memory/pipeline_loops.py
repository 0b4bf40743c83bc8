"""Real training loops fed by engine.data pipelines; the lines building a stage that a test names carry ``# stage:``."""
from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

import engine
from engine import hooks, memory, nn
from engine.data import Dataset, stage_of
from engine.data import buffers
from instrumentation import SummaryWriter
from instrumentation.memory import MemoryTracker

MiB = 1 << 20
FEATURES, ROWS = 64, 32
SOURCE = Path(__file__)


def stage_site(marker: str, function: str) -> str:
    """``"pipeline_loops.py:<line> <function>"`` of the line holding ``marker`` (an oracle that does not use the
    engine)."""
    for number, text in enumerate(SOURCE.read_text().splitlines(), start=1):
        if marker in text and "stage_site" not in text:
            return f"{SOURCE.name}:{number} {function}"
    raise AssertionError(f"no line with {marker!r} in {SOURCE}")


def filled(size_bytes: int):
    """A map function: element ``i`` as ``size_bytes`` of float32 equal to ``i``."""
    return lambda i: np.full(size_bytes // 4, i, np.float32)


def oversized_prefetch(elements: int) -> Dataset:
    return Dataset.from_tensor_slices(np.arange(elements)).map(filled(MiB)).prefetch(100)  # stage: prefetch(100)


def growing_cache(elements: int, element_bytes: int) -> Dataset:
    return Dataset.from_tensor_slices(np.arange(elements)).map(filled(element_bytes)).cache()  # stage: cache


def healthy_pipeline(elements: int) -> Dataset:
    x = np.random.default_rng(0).standard_normal((elements, FEATURES)).astype(np.float32)
    return Dataset.from_tensor_slices(x).batch(ROWS).map(lambda b: b * 2, num_parallel_calls=2).prefetch(2)


def input_bytes() -> int:
    return memory.category_bytes("cpu").get("input", 0)


def stage_bytes() -> int:
    """Bytes of the buffers the pipeline's stages hold (registered with a stage's op), other input tensors aside."""
    return sum(block.bytes for block in memory.live_blocks("cpu") if stage_of(block.op))


def wait_for_stages(expected: int, tries: int = 4000) -> int:
    """The stages' bytes once the pipeline's threads reached ``expected`` (settled as a fetch would; ``tries`` bounds
    the wait so that a regression fails instead of hanging)."""
    for _ in range(tries):
        buffers.settle()
        if stage_bytes() == expected:
            break
        time.sleep(0.005)
    return stage_bytes()


def train_on(batches: Iterator[np.ndarray], steps: int, on_fetch: Callable[[], object] | None = None) -> None:
    """``steps`` SGD steps of a linear model on the first ``ROWS`` rows of each element (reshaped to ``FEATURES``);
    ``on_fetch()`` runs after each fetch."""
    engine.manual_seed(0)
    model = nn.Linear(FEATURES, 2)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        element = next(batches)
        if on_fetch is not None:
            on_fetch()
        x = engine.tensor(element.reshape(-1, FEATURES)[:ROWS])
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


PREFETCHED = 101 * MiB  # a full prefetch(100) of 1 MiB elements and the one its producer waits to put


def write_prefetch_run(run_dir: Path, steps: int = 30) -> tuple[int, list[int]]:
    """A tracked run fed by ``oversized_prefetch``, whose queue is let fill up after each fetch (so every step end sees
    ``PREFETCHED`` bytes in the stage). Returns the input bytes live before the run (other tests' tensors) and the
    stage bytes each wait reached."""
    gc.collect()  # tensors of earlier tests held in reference cycles must not be freed inside the run
    hooks.reset_step(0)
    before, filled_bytes = input_bytes(), []
    with SummaryWriter(run_dir) as writer:
        tracker = MemoryTracker(writer, every=1)  # every step logged: the test reads each step
        iterator = iter(oversized_prefetch(steps + 120))
        try:
            train_on(iterator, steps, on_fetch=lambda: filled_bytes.append(wait_for_stages(PREFETCHED)))
        finally:
            iterator.close()
            tracker.close()
    hooks.reset_step(0)
    return before, filled_bytes
