"""Training-step speed of the engine against hand-written NumPy and PyTorch eager (CPU), and the hooks' overhead.

Run ``python bench/engine_step.py [--threads N] [--profile]``. Everything is measured in the same process on
random MNIST-shaped data (nothing is downloaded): warm-up steps first, then the median over several repeats.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
import timeit
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from engine import hooks, nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from engine.ops.arithmetic import Add  # noqa: E402

from numpy_mlp import NumpyMLP  # noqa: E402

MLP_BATCH, CNN_BATCH = 128, 64
TARGETS = {"MLP": 1.5, "CNN": 2.0}  # engine step time / torch step time
HOOK_TARGET_PERCENT = 2.0


@dataclass(frozen=True)
class Row:
    workload: str
    implementation: str
    ms_per_step: float | None
    note: str = ""


def median_ms(steps_by_name: dict[str, Callable[[], Any]], warmup: int, repeats: int,
              steps: int) -> dict[str, float]:
    """Median ms/step of each step function; repeats are interleaved so that load drift hits all of them alike."""
    for step in steps_by_name.values():
        for _ in range(warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps_by_name}
    for _ in range(repeats):
        for name, step in steps_by_name.items():
            start = time.perf_counter()
            for _ in range(steps):
                step()
            times[name].append((time.perf_counter() - start) * 1e3 / steps)
    return {name: statistics.median(values) for name, values in times.items()}


def mnist_batch(batch: int, image: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (batch, 1, 28, 28) if image else (batch, 784)
    return rng.random(shape, dtype=np.float32), rng.integers(0, 10, batch).astype(np.int64)


# --- the engine -------------------------------------------------------------------------------------------

class EngineCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(32 * 5 * 5, 10)

    def forward(self, x: engine.Tensor) -> engine.Tensor:
        features = self.features(x)
        return self.classifier(features.reshape(features.shape[0], -1))


def engine_model(workload: str) -> nn.Module | None:
    engine.manual_seed(0)
    if workload == "MLP":
        return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    if not all(hasattr(nn, name) for name in ("Conv2d", "MaxPool2d")):
        return None
    return EngineCNN()


def engine_step(model: nn.Module, x: np.ndarray, y: np.ndarray, with_optimizer: bool = True) -> Callable[[], Any]:
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    x_t, y_t = engine.tensor(x), engine.tensor(y)

    def step() -> None:
        hooks.mark_step_begin()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x_t), y_t)
        loss.backward()
        if with_optimizer:
            optimizer.step()
        else:
            hooks.mark_step_end()
    return step


# --- PyTorch ----------------------------------------------------------------------------------------------

def torch_step(torch: Any, workload: str, x: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
    torch.manual_seed(0)
    tnn = torch.nn
    if workload == "MLP":
        model = tnn.Sequential(tnn.Linear(784, 64), tnn.ReLU(), tnn.Linear(64, 10))
    else:
        model = tnn.Sequential(tnn.Conv2d(1, 16, 3), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(16, 32, 3), tnn.ReLU(),
                               tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(32 * 5 * 5, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_t, y_t = torch.from_numpy(x), torch.from_numpy(y)

    def step() -> None:
        optimizer.zero_grad()
        loss = tnn.functional.cross_entropy(model(x_t), y_t)
        loss.backward()
        optimizer.step()
    return step


# --- hooks' overhead ----------------------------------------------------------------------------------------

class NoOpObserver:
    def op_start(self, event: Any) -> None:
        pass

    def op_end(self, event: Any) -> None:
        pass


class OpCounter:
    def __init__(self) -> None:
        self.forward = self.backward = 0

    def op_start(self, event: Any) -> None:
        if event.phase == "backward":
            self.backward += 1
        else:
            self.forward += 1


def hook_overhead(args: argparse.Namespace, x: np.ndarray, y: np.ndarray) -> list[str]:
    step = engine_step(engine_model("MLP"), x, y, with_optimizer=False)
    counter = hooks.subscribe(OpCounter())
    try:
        step()
    finally:
        hooks.unsubscribe(counter)
    observer = NoOpObserver()

    def observed_step() -> None:
        hooks.subscribe(observer)  # NOTE: a no-op when already subscribed; unsubscribed after the block below
        step()

    def plain_step() -> None:
        hooks.unsubscribe(observer)
        step()

    try:
        result = median_ms({"plain": plain_step, "observed": observed_step}, args.warmup, args.repeats, args.steps)
    finally:
        hooks.unsubscribe(observer)
    plain_ms, observed_ms = result["plain"], result["observed"]

    a, b = engine.tensor(np.ones(4, np.float32)), engine.tensor(np.ones(4, np.float32))
    calls = 200_000
    call_ns = min(timeit.repeat(lambda: Add()(a, b), number=calls, repeat=5)) / calls * 1e9
    forward_ns = min(timeit.repeat(lambda: Add().forward(a._data, b._data), number=calls, repeat=5)) / calls * 1e9
    setup = "from engine import hooks as _hooks"
    check_ns = (min(timeit.repeat("_hooks.call_hooks_due", setup, number=calls * 5,
                                  repeat=5))
                - min(timeit.repeat("pass", number=calls * 5, repeat=5))) / (calls * 5) * 1e9
    checks_per_step = counter.forward + 1  # one per forward op, one per backward pass
    check_percent = check_ns * checks_per_step / (plain_ms * 1e6) * 100
    wrapper_percent = (call_ns - forward_ns) * counter.forward / (plain_ms * 1e6) * 100
    verdict = "meets" if check_percent <= HOOK_TARGET_PERCENT else "MISSES"
    return [
        f"ops per MLP step: {counter.forward} forward, {counter.backward} backward",
        f"forward+backward, no observer:            {plain_ms:8.3f} ms/step",
        f"forward+backward, a no-op op observer:    {observed_ms:8.3f} ms/step "
        f"(+{(observed_ms / plain_ms - 1) * 100:.1f} %: the cost of observing every op)",
        f"Function.__call__ on a 4-element add:     {call_ns:8.0f} ns; forward() alone {forward_ns:.0f} ns "
        f"-> {call_ns - forward_ns:.0f} ns of engine bookkeeping per op ({wrapper_percent:.2f} % of the step)",
        f"the disabled hook check alone:            {check_ns:8.1f} ns per op -> {check_percent:.3f} % of the step "
        f"(target <= {HOOK_TARGET_PERCENT:g} %: {verdict})",
    ]


# --- driver -------------------------------------------------------------------------------------------------

def configure_threads(requested: int | None, torch: Any) -> tuple[int | None, str, Any]:
    try:
        import threadpoolctl
    except ImportError:
        return None, "threadpoolctl not installed: NumPy and PyTorch keep their default thread counts", None
    blas = [info for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]
    numpy_threads = max((info["num_threads"] for info in blas), default=1)
    threads = requested or numpy_threads
    limiter = threadpoolctl.threadpool_limits(threads)
    if torch is not None:
        torch.set_num_threads(threads)
    libraries = ", ".join(sorted({f"{i['internal_api']} {i.get('version') or ''}".strip() for i in blas}))
    return threads, f"{threads} thread(s) for NumPy's BLAS ({libraries}) and torch.set_num_threads", limiter


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def profile_engine(workload: str, steps: int) -> None:
    model = engine_model(workload)
    if model is None:
        return
    x, y = mnist_batch(CNN_BATCH if workload == "CNN" else MLP_BATCH, workload == "CNN")
    step = engine_step(model, x, y)
    step()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        step()
    profiler.disable()
    print(f"\ncProfile of {steps} engine {workload} steps (top 15 by own time):")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(15)


def format_table(rows: list[Row]) -> list[str]:
    lines = [f"{'workload':<9}{'implementation':<18}{'ms/step':>9}{'steps/s':>10}{'engine/this':>13}  note",
             "-" * 75]
    for row in rows:
        if row.ms_per_step is None:
            lines.append(f"{row.workload:<9}{row.implementation:<18}{'-':>9}{'-':>10}{'-':>13}  {row.note}")
            continue
        engine_row = next((r for r in rows if r.workload == row.workload and r.implementation == "engine"), None)
        ratio = (f"{engine_row.ms_per_step / row.ms_per_step:.2f}x"
                 if engine_row is not None and engine_row.ms_per_step is not None else "-")
        lines.append(f"{row.workload:<9}{row.implementation:<18}{row.ms_per_step:>9.3f}{1e3 / row.ms_per_step:>10.0f}"
                     f"{ratio:>13}  {row.note}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="BLAS/torch threads (default: NumPy's count)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=30, help="steps per repeat")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of the engine's steps")
    args = parser.parse_args(argv)

    torch = import_torch()
    threads, thread_note, _limiter = configure_threads(args.threads, torch)
    print(f"numpy {np.__version__}; torch {torch.__version__ if torch else 'not installed'}; {thread_note}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"MLP 784-64-10, batch {MLP_BATCH}; CNN 1x28x28 conv3x3x16-relu-pool2-conv3x3x32-relu-pool2-linear10, "
          f"batch {CNN_BATCH}; softmax cross-entropy + Adam; median of {args.repeats} x {args.steps} steps after "
          f"{args.warmup} warm-up steps")
    if threads and os.getloadavg()[0] + threads > (os.cpu_count() or 1) + 0.5:
        print("note: other processes are using these CPUs; BLAS and torch threads that spin-wait on busy cores slow "
              "every implementation (most with more than one thread): compare ratios, or rerun with --threads 1")
    print()

    rows: list[Row] = []
    for workload in ("MLP", "CNN"):
        x, y = mnist_batch(CNN_BATCH if workload == "CNN" else MLP_BATCH, workload == "CNN")
        steps: dict[str, Callable[[], Any]] = {}
        missing: dict[str, str] = {}
        model = engine_model(workload)
        if model is None:
            missing["engine"] = "engine.nn has no Conv2d/MaxPool2d yet"
        else:
            steps["engine"] = engine_step(model, x, y)
        if workload == "MLP":
            steps["numpy (by hand)"] = lambda mlp=NumpyMLP(784, 64, 10), x=x, y=y: mlp.step(x, y)
        if torch is None:
            missing["torch eager"] = "torch not installed"
        else:
            steps["torch eager"] = torch_step(torch, workload, x, y)
        timed = median_ms(steps, args.warmup, args.repeats, args.steps)
        for name in ("engine", "numpy (by hand)", "torch eager"):
            if name in timed or name in missing:
                rows.append(Row(workload, name, timed.get(name), missing.get(name, "")))
    print("\n".join(format_table(rows)))
    print()
    for workload, limit in TARGETS.items():
        ours = next(r.ms_per_step for r in rows if r.workload == workload and r.implementation == "engine")
        peer = next(r.ms_per_step for r in rows if r.workload == workload and r.implementation == "torch eager")
        if ours is not None and peer is not None:
            verdict = "meets" if ours / peer <= limit else "MISSES"
            print(f"target {workload}: engine <= {limit:g}x torch's step time: {ours / peer:.2f}x ({verdict})")
    print("\nhook overhead (engine MLP forward+backward, no optimizer):")
    x, y = mnist_batch(MLP_BATCH, False)
    print("\n".join("  " + line for line in hook_overhead(args, x, y)))
    if args.profile:
        for workload in ("MLP", "CNN"):
            profile_engine(workload, 200 if workload == "MLP" else 30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
