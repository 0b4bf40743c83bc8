"""Small real training loops for the memory tests; every planted leak's allocation line carries a ``# leak:`` marker."""
from __future__ import annotations

import collections
from pathlib import Path

import numpy as np

import engine
from engine import hooks, memory, nn
from engine.nn import functional as F
from instrumentation import SummaryWriter
from instrumentation.memory import MemoryTracker

BATCH, FEATURES, HIDDEN, CLASSES = 32, 64, 48, 10
SOURCE = Path(__file__)


def line_of(marker: str) -> int:
    """The line of this file holding ``marker`` (an oracle for allocation sites that does not use the tracker)."""
    for number, text in enumerate(SOURCE.read_text().splitlines(), start=1):
        if marker in text and "line_of" not in text:
            return number
    raise AssertionError(f"no line with {marker!r} in {SOURCE}")


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: engine.Tensor) -> engine.Tensor:
        h = self.fc1(x)  # leak: fc1 output
        h = h.relu()  # leak: relu output
        return self.fc2(h)  # leak: fc2 output


def batches(seed: int = 0):
    """An endless stream of random (x, y) batches (NumPy), the same for the same seed."""
    rng = np.random.default_rng(seed)
    while True:
        yield rng.standard_normal((BATCH, FEATURES)).astype(np.float32), rng.integers(0, CLASSES, BATCH)


class UnboundedPrefetcher:
    """A user-side prefetch queue that reads two batches ahead for every one consumed: it grows without bound."""

    def __init__(self, source) -> None:
        self.source, self.queue = source, collections.deque()

    def get(self):
        for _ in range(2):
            xb, yb = next(self.source)
            self.queue.append((engine.tensor(xb), engine.tensor(yb)))  # leak: prefetch queue
        return self.queue.popleft()


def train(steps: int, leak: str = "", seed: int = 0, on_step=None) -> list[int]:
    """Train an MLP with SGD for ``steps`` steps, with one planted mistake; returns the engine's allocated bytes
    after each step (``engine.memory.stats``: the oracle the tracker's figures are checked against)."""
    engine.manual_seed(seed)
    model = MLP()
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05)
    source = batches(seed)
    prefetcher = UnboundedPrefetcher(source)
    total, kept, created, cache = 0.0, [], [], {}
    if leak == "hook":
        model.fc1.register_forward_hook(lambda module, inputs, output: kept.append(output))
    allocated = []
    for step in range(steps):
        if leak == "prefetch":
            x, y = prefetcher.get()
        else:
            xb, yb = next(source)
            x, y = engine.tensor(xb), engine.tensor(yb)
        if leak == "cache" and step < 20:
            cache[step] = engine.tensor(np.zeros(256, np.float32))  # a cache that fills for 20 steps, then stops
        optimizer.zero_grad()
        logits = model(x)
        if leak == "parameters":
            extra = nn.Linear(CLASSES, CLASSES)  # leak: parameters in step
            created.append(extra)
            optimizer.add_param_group({"params": list(extra.parameters())})
            logits = extra(logits)
        loss = F.cross_entropy(logits, y)  # leak: loss
        if leak == "retain_graph":
            loss.backward(retain_graph=True)
            kept.append(loss)  # the graph stays referenced
        else:
            loss.backward()
        if leak == "sum_losses":
            total = total + loss  # leak: running total
        optimizer.step()
        if on_step is not None:
            on_step(step)
        allocated.append(memory.stats("cpu").allocated_bytes)
    return allocated


def oracle_bytes_per_step(allocated: list[int], warmup: int = 10) -> float:
    """Growth per step of the engine's own allocated bytes after the warm-up (end-to-end, not robust: planted
    leaks are exact)."""
    return (allocated[-1] - allocated[warmup]) / (len(allocated) - 1 - warmup)


SPIKE_BYTES = 1 << 20  # train_with_late_spike's spike: far above the MLP's own step peaks


def train_with_late_spike(run_dir: Path, steps: int, spike_at: int, held_bytes: int = 0, stacks: bool = False) -> int:
    """Train with a tracker on its defaults (30 s between peak snapshots; ``stacks``) and hold SPIKE_BYTES for a
    moment after step ``spike_at`` (and ``held_bytes`` all along); returns the step the spike was allocated in (the
    engine's step counter then)."""
    spiked: list[int] = []

    def on_step(step: int) -> None:
        if step == spike_at:
            spiked.append(hooks.current_step())
            spike = engine.tensor(np.ones(SPIKE_BYTES // 4, np.float32))
            del spike

    with SummaryWriter(run_dir) as writer:
        tracker = MemoryTracker(writer, stacks=stacks, leak=None, host_rss=False)
        held = engine.tensor(np.ones(held_bytes // 4, np.float32)) if held_bytes else None
        train(steps, on_step=on_step)
        tracker.close()
        del held
    return spiked[0]
