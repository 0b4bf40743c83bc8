"""Memory tracker and system sampler overhead on a digits MLP training step, as ratios to no instrumentation.

`python bench/memory_overhead.py [--repeats 9] [--steps 300]`. The configurations run interleaved, repeat after
repeat, in one process; each figure is the median over repeats of (mean step time with it) / (mean step time
without anything, measured in the same repeat); a mean includes the writer thread's work for those steps. The
sampler rows are timed over ``--sampler-window-s`` (2 s: twenty 0.1 s samples), each against an "off" timed as long
in the same repeat: a window shorter than the interval would see no sample at all. Targets: tracker without stacks
<= 1.05x, with stacks <= 1.25x, sampler at 0.1 s <= 1.02x. The tracemalloc row (host attribution) is informational: it is opt-in because it is costly.
"""
from __future__ import annotations

import os

# NOTE: one BLAS thread. On a loaded machine OpenBLAS's spinning workers turn any extra Python work between two
# matmuls into multi-millisecond stalls, which would measure thread contention instead of the instrumentation.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from contextlib import ExitStack  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402

import engine  # noqa: E402
from engine import hooks, nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from instrumentation import MemoryTracker, SummaryWriter, SystemSampler  # noqa: E402

WORKLOADS = {"digits MLP 64-128-10, batch 64": ((128,), 64), "digits MLP 64-512-512-10, batch 512": ((512, 512), 512)}
WARM_STEPS = 15  # past the tracker's warm-up, so the tracemalloc row measures tracing


def make_step(hidden: tuple[int, ...], batch: int) -> Callable[[], None]:
    (x_train, y_train), _ = engine.datasets.load_digits(seed=0)
    engine.manual_seed(0)
    widths = (64, *hidden)
    layers: list[nn.Module] = []
    for n_in, n_out in zip(widths, widths[1:]):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(widths[-1], 10))
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)

    def step() -> None:  # what a user's loop does; its lines are the "user frames" of the allocation stacks
        index = rng.integers(0, len(x_train), batch)
        x, y = engine.tensor(x_train[index]), engine.tensor(y_train[index])
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

    return step


class _EmptyObserver:
    """Does nothing: its row is what the engine itself spends building and emitting memory events."""

    def alloc(self, event: object) -> None:
        pass

    def free(self, event: object) -> None:
        pass


LONG = ("off, sampler window", "sampler 1 s", "sampler 0.1 s")  # timed over --sampler-window-s, against the first


def configurations(writer: SummaryWriter) -> dict[str, Callable[[ExitStack], None]]:
    return {
        "off": lambda stack: None,
        "empty alloc/free observer": lambda stack: stack.callback(hooks.unsubscribe, hooks.subscribe(_EmptyObserver())),
        "tracker, stacks off": lambda stack: stack.callback(MemoryTracker(writer, stacks=False).close),
        "tracker, stacks on": lambda stack: stack.callback(MemoryTracker(writer, stacks=True).close),
        "tracker + tracemalloc": lambda stack: stack.callback(MemoryTracker(writer, host_attribution=True).close),
        "off, sampler window": lambda stack: None,
        "sampler 1 s": lambda stack: stack.callback(SystemSampler(writer, interval=1.0, gpus=False).close),
        "sampler 0.1 s": lambda stack: stack.callback(SystemSampler(writer, interval=0.1, gpus=False).close),
    }


def mean_step_ms(step: Callable[[], None], steps: int, writer: SummaryWriter) -> float:
    """Mean over ``steps`` steps, ending with ``writer.flush()``: a background thread's work (the sampler's samples,
    the writer encoding the tracker's scalars) is charged to the configuration that caused it. A median per step
    would hide exactly that work, which lands on a few steps."""
    writer.flush()
    start = time.perf_counter_ns()
    for _ in range(steps):
        step()
    writer.flush()
    return (time.perf_counter_ns() - start) / steps / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--sampler-window-s", type=float, default=2.0,
                        help="timed window of the sampler rows: several sampling intervals, not a fraction of one")
    parser.add_argument("--workload", default="", help="run only the workloads whose name contains this text")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1) * 0.7:
        print(f"warning: load average {load:.1f} on {os.cpu_count()} CPUs; figures will be noisy")
    for workload, (hidden, batch) in WORKLOADS.items():
        if args.workload not in workload:
            continue
        step = make_step(hidden, batch)
        with tempfile.TemporaryDirectory() as logdir, SummaryWriter(logdir) as writer:
            configs = configurations(writer)
            times: dict[str, list[float]] = {name: [] for name in configs}
            for _ in range(WARM_STEPS):
                step()
            long_steps = min(max(args.steps, round(args.sampler_window_s * 1e3 / mean_step_ms(step, 100, writer))),
                             20 * args.steps)
            for _ in range(args.repeats):
                for name, attach in configs.items():
                    hooks.reset_step(0)
                    with ExitStack() as stack:
                        attach(stack)
                        for _ in range(WARM_STEPS):
                            step()
                        times[name].append(mean_step_ms(step, long_steps if name in LONG else args.steps, writer))
        print(f"{workload}, Adam: mean step time over {args.steps} steps ({long_steps} steps, about "
              f"{args.sampler_window_s:g} s, for the sampler rows and their own 'off') incl. the writer's work for them; "
              f"median of {args.repeats} interleaved repeats of the ratio to 'off' in the same repeat")
        print(f"{'configuration':28s} {'step ms':>9s} {'ratio':>7s}  ratio p25-p75")
        for name, values in times.items():
            reference = times[LONG[0] if name in LONG else "off"]
            ratios = sorted(v / off for v, off in zip(values, reference))
            quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
            print(f"{name:28s} {statistics.median(values):9.3f} {statistics.median(ratios):6.3f}x  "
                  f"{quartiles[0]:.3f}-{quartiles[2]:.3f}x")
        print()

if __name__ == "__main__":
    main()
