"""What watch() costs a torch training step (CPU): a small CNN unwatched, under watch() defaults, every=1 and
check_numerics, beside W&B-style gradient histograms from ``register_hook`` at ``log_freq=1`` and
``torch.autograd.detect_anomaly`` (the usual way to find a NaN's origin in torch).

Run ``python bench/torch_watch_overhead.py [--pairs 30] [--block-steps 40]``. One torch thread. Each variant has
its own model, optimizer and writer, built and run for ``WARM_STEPS`` first (its pacers settle) and, for watch()
variants, paused between its blocks (the numerics' dispatch mode is per thread: it must not see the others'
steps). Then, pair after pair, each variant runs a block of steps next to an "off" block as long, in random order,
so the machine's drift between pairs cancels out; each block ends with its writer's ``flush()`` (the writer
thread's work is charged to the block). Time is measured twice: wall clock, and the process's CPU time (all its
threads, the writer's included; a loaded machine's waits for a CPU are not in it). The ratio is all of a variant's
blocks over all their paired "off" blocks; median and quartiles of the pairs' ratios show the noise.
Targets (issue 31): defaults <= 1.05x, every=1 <= 1.20x, check_numerics <= 1.5x.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from instrumentation import SummaryWriter, watch  # noqa: E402

BATCH, SIZE = 24, 16  # ≈ 5 ms of CPU a step on this machine's cores, one thread
WARM_STEPS = 200
WANDB, ANOMALY = "W&B-style register_hook histograms, log_freq=1", "torch.autograd.detect_anomaly"
EMPTY_MODE = "floor: an empty TorchDispatchMode"
VARIANTS: dict[str, Any] = {"watch() defaults": {}, "watch() every=1": {"every": 1},
                            "watch() check_numerics": {"check_numerics": True}, EMPTY_MODE: None, WANDB: None,
                            ANOMALY: None}
TARGETS = {"watch() defaults": 1.05, "watch() every=1": 1.20, "watch() check_numerics": 1.5}


def cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * (SIZE // 4) ** 2, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def wandb_style_hooks(model: nn.Module, writer: SummaryWriter) -> Callable[[int], None]:
    """What ``wandb.watch(model, log="gradients", log_freq=1)`` does per step: a ``Tensor.register_hook`` on each
    parameter computing a 64-bin ``torch.histc`` of its gradient, logged (here through our writer's raw histogram).
    Returns a setter for the step the hooks log at."""
    step = [0]

    def hook_for(name: str) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            flat = grad.detach().float().reshape(-1)
            low, high = flat.min().item(), flat.max().item()
            if high == low:
                high = low + 1e-12
            counts = torch.histc(flat, bins=64, min=low, max=high)
            limits = torch.linspace(low, high, 65)[1:]
            writer.add_histogram_raw("gradients/" + name, low, high, flat.numel(), flat.sum().item(),
                                     flat.dot(flat).item(), limits.tolist(), counts.tolist(), step[0])
        return hook

    for name, param in model.named_parameters():
        param.register_hook(hook_for(name))

    def set_step(value: int) -> None:
        step[0] = value
    return set_step


class EmptyMode(TorchDispatchMode):
    """Every aten op through Python and nothing else: what any dispatch-mode numerics check costs at least."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        return func(*args, **(kwargs or {}))


class Runner:
    """One variant: its model, optimizer, data, writer and observer; ``block(n)`` runs n steps, returns (wall, cpu)."""

    def __init__(self, name: str, options: dict[str, Any] | None, logdir: str) -> None:
        torch.manual_seed(0)
        self.name, self.model = name, cnn()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.x, self.y = torch.randn(BATCH, 1, SIZE, SIZE), torch.randint(0, 10, (BATCH,))
        self.writer = SummaryWriter(os.path.join(logdir, name.replace(" ", "_").replace("/", "_")))
        self.handle = watch(self.model, self.writer, optimizer=self.optimizer, **options) if options is not None \
            else None
        self.set_step = wandb_style_hooks(self.model, self.writer) if name == WANDB else None
        self.steps = 0
        self.block(WARM_STEPS)
        if self.handle is not None:
            self.handle.pause()

    def _step(self) -> None:
        self.optimizer.zero_grad()
        loss = nn.functional.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.optimizer.step()
        if self.handle is not None:
            self.handle.log_loss(loss)
        self.steps += 1
        if self.set_step is not None:
            self.set_step(self.steps)

    def block(self, steps: int) -> tuple[float, float]:
        if self.handle is not None:
            self.handle.resume()
        wall, cpu = time.perf_counter(), time.process_time()
        if self.name in (ANOMALY, EMPTY_MODE):
            with torch.autograd.detect_anomaly(check_nan=True) if self.name == ANOMALY else EmptyMode():
                for _ in range(steps):
                    self._step()
        else:
            for _ in range(steps):
                self._step()
        self.writer.flush()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if self.handle is not None:
            self.handle.pause()
        return wall, cpu

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
        self.writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=30, help="pairs of blocks per variant")
    parser.add_argument("--block-steps", type=int, default=40, help="steps per block")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import warnings

    warnings.filterwarnings("ignore", message="Anomaly Detection has been enabled")
    load_before = open("/proc/loadavg").read().strip()
    with tempfile.TemporaryDirectory() as logdir:
        off = Runner("off", None, logdir)
        runners = [Runner(name, options, logdir) for name, options in VARIANTS.items()]
        pairs: dict[str, list[tuple[tuple[float, float], tuple[float, float]]]] = {r.name: [] for r in runners}
        rng = random.Random(0)
        for _ in range(args.pairs):
            for runner in rng.sample(runners, len(runners)):
                if rng.random() < 0.5:
                    base = off.block(args.block_steps)
                    measured = runner.block(args.block_steps)
                else:
                    measured = runner.block(args.block_steps)
                    base = off.block(args.block_steps)
                pairs[runner.name].append((measured, base))
        for runner in [off, *runners]:
            runner.close()
    load_after = open("/proc/loadavg").read().strip()
    print(f"torch {torch.__version__}, CNN batch {BATCH} {SIZE}x{SIZE}, 1 thread, {args.pairs} pairs of "
          f"{args.block_steps}-step blocks per variant; /proc/loadavg before: {load_before}; after: {load_after}")
    print(f"{'variant':<50} {'clock':>5} {'ms/step':>8} {'off':>7} {'ratio':>7} {'median':>7} {'p25-p75':>13} "
          f"{'target':>8}")
    for name, results in pairs.items():
        for index, clock in ((1, "cpu"), (0, "wall")):
            measured = [m[index] for m, _ in results]
            base = [b[index] for _, b in results]
            ratios = sorted(m / b for m, b in zip(measured, base))
            quartiles = statistics.quantiles(ratios, n=4)
            ratio = sum(measured) / sum(base)
            target = TARGETS.get(name)
            verdict = "" if target is None or index == 0 else \
                f"<= {target:.2f}x {'ok' if ratio <= target else 'MISSED'}"
            print(f"{name:<50} {clock:>5} {1e3 * sum(measured) / (len(measured) * args.block_steps):8.3f} "
                  f"{1e3 * sum(base) / (len(base) * args.block_steps):7.3f} {ratio:6.3f}x "
                  f"{statistics.median(ratios):6.3f}x {quartiles[0]:6.3f}-{quartiles[2]:5.3f}  {verdict}")


if __name__ == "__main__":
    main()
