"""What watch() costs per training step: digits MLP and CNN with watch off, with defaults, with check_numerics.

Run ``python bench/watch_overhead.py [--repeats N] [--steps N]``. One BLAS thread; all variants in one process on
one model each, with repeats interleaved (off, defaults, numerics, off, …) so that load drift hits all alike; the
table shows the median ms/step and the median over repeats of the ratio to "off" measured in the same repeat. A variant's time includes the
SummaryWriter thread's work for its steps (each timing ends with a flush). Targets: defaults ≤ 1.05×,
check_numerics ≤ 1.3×. The "floor" row runs only the NumPy calls of watch()'s statistics from minimal hooks (no
alerts, writer or memory tracker): what computing those statistics this way costs at least.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import engine  # noqa: E402
from engine import hooks, nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from instrumentation import SummaryWriter, watch  # noqa: E402
from instrumentation.dynamics.segment_stats import Segments, pack, segment_stats  # noqa: E402

BATCH = 64
FLOOR = "floor: the stats' NumPy calls only"
VARIANTS = {"off": None, "defaults": {}, "defaults, no memory tracker": {"memory": False},
            "check_numerics": {"check_numerics": True}, "every=1": {"every": 1}, "every=10": {"every": 10}, FLOOR: None}
TARGETS = {"defaults": 1.05, "check_numerics": 1.3}
CNN_TARGETS = {"every=1": 1.15}
# per variant and repeat, untimed: past the budget's warm-up (every step observed) and settling (docs/dynamics.md),
# and the first steps of a new watch() that pay for building its tags
WARM_STEPS = 200


def models() -> dict[str, nn.Module]:
    engine.manual_seed(0)
    return {"MLP 64-128-10": nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)), "CNN": nn.DigitsCNN()}


class ArrayWorkFloor:
    """The array work of watch()'s per-step statistics and nothing else — no alerts, no writer, no memory tracker:
    the parameter pass (g and w copied into one flat buffer before the step, Δw appended after it, one
    ``segment_stats`` call without min/max), and per watched layer output the passes watch() makes (ReLU: two
    matrix-vector products; Linear/Conv2d: abs and a dot). What a step costs at least while these statistics are
    computed with NumPy calls from Python hooks."""

    def __init__(self, model: nn.Module) -> None:
        self.params = list(model.parameters())
        sizes = [p.numpy().size for p in self.params]
        self.segments = Segments.from_sizes(sizes * 3)
        self.buffer = np.empty(self.segments.total, np.float32)
        self.weights_start, self.delta_start = (int(self.segments.starts[i]) for i in (len(sizes), 2 * len(sizes)))
        self.pads = self.segments.pads(self.buffer.dtype)
        self.handles = [module.register_forward_hook(self._relu if type(module).__name__ == "ReLU" else self._affine)
                        for module in model.modules() if type(module).__name__ in ("ReLU", "Linear", "Conv2d")]
        hooks.subscribe(self)

    @staticmethod
    def _ones(size: int, dtype: Any, cache: dict = {}) -> np.ndarray:  # noqa: B006 - a cache on purpose
        ones = cache.get((size, dtype))
        if ones is None:
            ones = cache[(size, dtype)] = np.ones(size, dtype)
        return ones

    def _relu(self, module: nn.Module, inputs: tuple, output: Any) -> None:
        a = output.numpy()
        if a.ndim > 2:
            a = (a.reshape(a.shape[0] * a.shape[1], -1) @ self._ones(a[0, 0].size, a.dtype)).reshape(a.shape[:2])
        self._ones(a.shape[0], a.dtype) @ a

    def _affine(self, module: nn.Module, inputs: tuple, output: Any) -> None:
        flat = np.abs(output.numpy()).reshape(-1)
        np.dot(flat, self._ones(flat.size, flat.dtype))

    def optimizer_step_begin(self, event: Any) -> None:
        arrays = [p.grad.numpy().reshape(-1) for p in self.params] + [p.numpy().reshape(-1) for p in self.params]
        pack(arrays, self.pads[:len(arrays)], self.buffer[:self.delta_start])

    def optimizer_step_end(self, event: Any) -> None:
        n = len(self.params)
        delta = pack([p.numpy().reshape(-1) for p in self.params], self.pads[2 * n:], self.buffer[self.delta_start:])
        np.subtract(delta, self.buffer[self.weights_start:self.delta_start], out=delta)
        segment_stats(self.buffer, self.segments, extremes=False)

    def log_loss(self, value: float) -> None:
        pass

    def close(self) -> None:
        hooks.unsubscribe(self)
        for handle in self.handles:
            handle.remove()


def step_function(model: nn.Module, batches: list[tuple[Any, Any]]) -> tuple[Callable[[Any], None], Any]:
    """One training step as engine.fit runs it (the step opened before the batch), the loss to ``log_loss``."""
    optimizer = engine.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    tensors = [(engine.tensor(x), engine.tensor(y)) for x, y in batches]
    position = [0]

    def step(handle: Any) -> None:
        hooks.mark_step_begin()
        x, y = tensors[position[0] % len(tensors)]
        position[0] += 1
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if handle is not None:
            handle.log_loss(loss.item())
    return step, optimizer


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # cpu: every thread of the process, the writer's too


def measure(model: nn.Module, batches: list[tuple[Any, Any]], logdir: str, repeats: int,
            steps: int, clock: Callable[[], float] = time.perf_counter) -> dict[str, tuple[float, float]]:
    """Per variant: (median ms/step, median over repeats of its ratio to "off" in the same repeat). Each timing ends with ``writer.flush()``: the writer thread's work for the
    variant's steps (encoding and writing their events) is charged to that variant, not to whichever runs next."""
    step, optimizer = step_function(model, batches)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with SummaryWriter(logdir, flush_secs=2.0) as writer:
        for repeat in range(repeats + 1):  # the first round warms up
            for name, options in VARIANTS.items():
                handle = ArrayWorkFloor(model) if name == FLOOR else \
                    None if options is None else watch(model, writer, optimizer=optimizer, **options)
                try:
                    for _ in range(WARM_STEPS):
                        step(handle)
                    writer.flush()
                    start = clock()
                    for _ in range(steps):
                        step(handle)
                    writer.flush()
                    elapsed_ms = (clock() - start) * 1e3 / steps
                finally:
                    if handle is not None:
                        handle.close()
                    writer.flush()
                if repeat:
                    times[name].append(elapsed_ms)
    return {name: (statistics.median(values), statistics.median(v / off for v, off in zip(values, times["off"])))
            for name, values in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--steps", type=int, default=300, help="steps per repeat (the CNN runs a fifth of them)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: elapsed time; cpu: the process's CPU time, all threads (on a loaded machine the "
                             "time spent waiting for a CPU is not counted)")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    (x, y), _ = engine.datasets.load_digits(seed=0)
    batches = [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x) - BATCH + 1, BATCH)]
    print(f"watch() overhead: digits, batch {BATCH}, SGD momentum, one BLAS thread; {args.clock} clock; median of "
          f"{args.repeats} interleaved repeats; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(f"defaults = budget 0.05 (intervals chosen by the pacers), histograms at most every 100 steps; every=k: "
          f"statistics every k steps; targets: defaults <= {TARGETS['defaults']}x, check_numerics <= "
          f"{TARGETS['check_numerics']}x, every=1 on the CNN <= {CNN_TARGETS['every=1']}x\n")
    print(f"{'model':<15} {'variant':<36} {'ms/step':>9} {'ratio':>7}  target")
    with threadpool_limits(1), tempfile.TemporaryDirectory() as logdir:
        for label, model in models().items():
            steps = args.steps if label.startswith("MLP") else max(args.steps // 5, 5)
            results = measure(model, batches, os.path.join(logdir, label.split()[0]), args.repeats, steps,
                              CLOCKS[args.clock])
            for name, (ms, ratio) in results.items():
                target = (CNN_TARGETS if label == "CNN" else {}).get(name, TARGETS.get(name))
                verdict = "" if target is None else (f"<= {target}x " + ("ok" if ratio <= target else "MISSED"))
                print(f"{label:<15} {name:<36} {ms:9.3f} {ratio:6.2f}x  {verdict}")


if __name__ == "__main__":
    main()
