"""What watch() costs per training step: digits MLP and CNN with watch off, with defaults, with check_numerics.

Run ``python bench/watch_overhead.py [--seconds 60] [--block-ms 200]``. One BLAS thread, one process and one writer
per model. Each variant's handle is created once, run for ``WARM_STEPS`` (its pacers settle; its memory tracker, if
any, until it is ``settled``: the rows are the steady state) and paused; then,
pair after pair for about ``--seconds`` per model, each variant is resumed for a block of steps (about
``--block-ms``) next to an "off" block as long, in alternating order (``Watch.pause()``/``resume()``), so the
machine's drift between pairs cancels out. Each block ends with ``writer.flush()``: the writer thread's work for a
variant's steps is charged to that variant's block. The table gives per variant the ratio of all its blocks' time to
all the "off" blocks' (the verdict: it counts the sampled steps and histograms wherever they fall), and the median
and quartiles of the per-pair ratios. Targets: defaults <= 1.05x, check_numerics <= 1.3x, every=1 on the CNN <=
1.15x. The "floor" row runs only the NumPy calls of watch()'s statistics from minimal hooks (no alerts, writer or
memory tracker): what computing those statistics this way costs at least. The "loss + step_end only" row is the
part of watch() that is never thinned (``log_loss`` at every step, the handle's one ``step_end`` comparison), with the
statistics every 1000 steps and no histograms or memory tracker: no budget can take a watch below it.
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

from bench.memory_overhead import settle  # noqa: E402  (a memory tracker until it is settled)

BATCH = 64
FLOOR = "floor: the stats' NumPy calls only"
NEVER_THINNED = "loss + step_end only (every=1000)"
VARIANTS = {"defaults": {}, "defaults, no memory tracker": {"memory": False},
            NEVER_THINNED: {"every": 1000, "histograms_every": 0, "memory": False, "capture_requests": False},
            "check_numerics": {"check_numerics": True}, "every=1": {"every": 1}, "every=10": {"every": 10}, FLOOR: None}
TARGETS = {"defaults": 1.05, "check_numerics": 1.3}
CNN_TARGETS = {"every=1": 1.15}
# per variant, untimed, before its first block: past the budget's warm-up (every step observed) and settling
# (docs/dynamics.md), and the first steps of a new watch() that pay for building its tags
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
        self.layers = [module for module in model.modules() if type(module).__name__ in ("ReLU", "Linear", "Conv2d")]
        self.handles: list[Any] = []
        self.resume()

    def resume(self) -> None:
        self.handles = [module.register_forward_hook(self._relu if type(module).__name__ == "ReLU" else self._affine)
                        for module in self.layers]
        hooks.subscribe(self)

    def pause(self) -> None:
        hooks.unsubscribe(self)
        for handle in self.handles:
            handle.remove()
        self.handles = []

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
        self.pause()


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
MIN_PAIRS = 5
MIN_BLOCK_STEPS = 16


def timed_block(step: Callable[[Any], None], handle: Any, steps: int, writer: SummaryWriter,
                clock: Callable[[], float]) -> float:
    """Seconds for ``steps`` steps and the ``writer.flush()`` after them (the writer thread's work for them)."""
    start = clock()
    for _ in range(steps):
        step(handle)
    writer.flush()
    return clock() - start


def measure(model: nn.Module, batches: list[tuple[Any, Any]], logdir: str, seconds: float, block_ms: float,
            clock: Callable[[], float] = time.perf_counter, variants: dict[str, Any] | None = None,
            ) -> dict[str, tuple[float, float, float, list[float], int]]:
    """Per variant (of ``variants``, default all): (ms/step with it, all its blocks' time over all the "off"
    blocks', that ratio's standard error, the per-pair ratios, steps per block)."""
    step, optimizer = step_function(model, batches)
    with SummaryWriter(logdir, flush_secs=2.0) as writer:
        for _ in range(WARM_STEPS):
            step(None)
        step_ms = timed_block(step, None, MIN_BLOCK_STEPS, writer, clock) * 1e3 / MIN_BLOCK_STEPS
        block_steps = max(MIN_BLOCK_STEPS, round(block_ms / step_ms))
        handles: dict[str, Any] = {}
        for name, options in (VARIANTS if variants is None else variants).items():
            handle = ArrayWorkFloor(model) if name == FLOOR else watch(model, writer, optimizer=optimizer, **options)
            for _ in range(WARM_STEPS):
                step(handle)
            for component in getattr(handle, "attached", ()):  # its memory tracker, until it keeps one step end in k
                settle(lambda: step(handle), component)
            handle.pause()
            handles[name] = handle
        times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in handles}
        deadline, pair = time.monotonic() + seconds, 0
        try:
            while time.monotonic() < deadline or pair < MIN_PAIRS:
                for name, handle in handles.items():
                    for with_it in ((True, False) if pair % 2 else (False, True)):
                        if with_it:
                            handle.resume()
                        times[name][0 if with_it else 1].append(
                            timed_block(step, handle if with_it else None, block_steps, writer, clock))
                        if with_it:
                            handle.pause()
                pair += 1
        finally:
            for handle in handles.values():
                handle.close()
    return {name: (statistics.median(with_it) * 1e3 / block_steps, sum(with_it) / sum(off),
                   ratio_error(with_it, off), [w / o for w, o in zip(with_it, off)], block_steps)
            for name, (with_it, off) in times.items()}


def ratio_error(with_it: list[float], off: list[float]) -> float:
    """The standard error of ``sum(with_it) / sum(off)`` over the pairs (the ratio estimator's delta method)."""
    count, ratio = len(off), sum(with_it) / sum(off)
    if count < 2:
        return float("nan")
    spread = sum((w - ratio * o) ** 2 for w, o in zip(with_it, off)) / (count - 1)
    return (spread / count) ** 0.5 / (sum(off) / count)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="time for the pairs of blocks, per model")
    parser.add_argument("--block-ms", type=float, default=200.0,
                        help="length of one block of steps (at least 16 steps)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: elapsed time; cpu: the process's CPU time, all threads (on a loaded machine the "
                             "time spent waiting for a CPU is not counted)")
    parser.add_argument("--model", default="", help="run only the models whose name contains this text")
    parser.add_argument("--variants", default="",
                        help="run only the variants whose name contains one of these texts (comma-separated): "
                             "fewer variants, more pairs each in the same time")
    args = parser.parse_args(argv)
    wanted = [text for text in args.variants.split(",") if text]
    variants = {name: options for name, options in VARIANTS.items()
                if not wanted or any(text in name for text in wanted)}
    if not variants:
        parser.error(f"--variants {args.variants!r} matches none of: {', '.join(VARIANTS)}")
    from threadpoolctl import threadpool_limits

    (x, y), _ = engine.datasets.load_digits(seed=0)
    batches = [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, len(x) - BATCH + 1, BATCH)]
    print(f"watch() overhead: digits, batch {BATCH}, SGD momentum, one BLAS thread; {args.clock} clock; paired "
          f"blocks of ~{args.block_ms:.0f} ms for ~{args.seconds:.0f} s per model; {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.2f}")
    print(f"defaults = budget 0.05 (intervals chosen by the pacers), histograms at most every 100 steps; every=k: "
          f"statistics every k steps; targets: defaults <= {TARGETS['defaults']}x, check_numerics <= "
          f"{TARGETS['check_numerics']}x, every=1 on the CNN <= {CNN_TARGETS['every=1']}x")
    print("ratio: all the variant's blocks over all the paired off blocks (± its standard error over the pairs); "
          "median and p25-p75 of the pairs' ratios\n")
    print(f"{'model':<15} {'variant':<36} {'ms/step':>9} {'ratio':>7} {'±se':>6} {'median':>7} {'p25-p75':>13} "
          f"{'pairs':>5} {'steps':>5}  target")
    with threadpool_limits(1), tempfile.TemporaryDirectory() as logdir:
        for label, model in models().items():
            if args.model not in label:
                continue
            results = measure(model, batches, os.path.join(logdir, label.split()[0]), args.seconds, args.block_ms,
                              CLOCKS[args.clock], variants)
            for name, (ms, ratio, error, ratios, block_steps) in results.items():
                quartiles = statistics.quantiles(ratios, n=4)
                target = (CNN_TARGETS if label == "CNN" else {}).get(name, TARGETS.get(name))
                verdict = "" if target is None else (f"<= {target}x " + ("ok" if ratio <= target else "MISSED"))
                print(f"{label:<15} {name:<36} {ms:9.3f} {ratio:6.3f}x {error:6.3f} {statistics.median(ratios):6.3f}x "
                      f"{quartiles[0]:6.3f}-{quartiles[2]:.3f} {len(ratios):5d} {block_steps:5d}  {verdict}",
                      flush=True)


if __name__ == "__main__":
    main()
