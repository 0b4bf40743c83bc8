"""Traced (``engine.function``) against eager training steps on the digits MLP and CNN, and PyTorch eager.

Run ``python bench/graph_step.py [--threads N] [--repeats R] [--steps S]``. One process, random digits-shaped
batches (nothing downloaded), warm-up first; the step functions are interleaved per repeat (so load drift hits all
alike) and timed with ``time.process_time`` (CPU time of this process; wall time is meaningless on a shared
machine). Reports the median ms/step, the ratios (with, for the MLP, ``numpy``: the step written by hand in NumPy
with the engine's arithmetic, the floor of a replay), the engine allocator's peak bytes above the step's start
(eager vs traced) and the tracing time per signature. Targets (issue 19): traced MLP <= 0.7x eager and <= 1.0x
torch; traced CNN <= 1.0x eager; traced peak <= 0.8x eager.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from engine import memory, nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402

BATCH = 64


def engine_model(workload: str) -> nn.Module:
    engine.manual_seed(0)
    if workload == "MLP":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.DigitsCNN()


def engine_step(workload: str, traced: bool, passes: Any = None) -> tuple[Callable[[Any, Any], Any], Any]:
    model = engine_model(workload)
    optimizer = engine.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return (engine.function(step, passes=passes) if traced else step), model


class NumpyStep:
    """The MLP step written by hand in NumPy with the engine's arithmetic (its ufuncs, in its order, so the same
    bits): forward, cross-entropy, backward, SGD with momentum, no framework. What a step costs with no Python in
    the way but the NumPy calls themselves: the floor of a replayed step."""

    def __init__(self, model: nn.Module, lr: float = 0.05, momentum: float = 0.9) -> None:
        self.params = [p.numpy().copy() for p in model.parameters()]  # w1, b1, w2, b2
        self.buffers = [np.zeros_like(p) for p in self.params]
        self.scratch = [np.zeros_like(p) for p in self.params]
        self.lr, self.momentum, self.rows, self.first = lr, momentum, np.arange(BATCH), True

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        w1, b1, w2, b2 = self.params
        z1 = np.matmul(x, w1.T)
        z1 += b1
        a1 = np.maximum(z1, 0)
        logits = np.matmul(a1, w2.T)
        logits += b2
        shifted = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(shifted)
        total = p.sum(axis=1)
        log_total = np.log(total)
        p /= total[:, None]
        loss = np.asarray((log_total - shifted[self.rows, y]).sum(dtype=np.float32) / len(y), dtype=np.float32)
        scale = np.float32(1.0 / len(y))
        g = p * scale
        g[self.rows, y] -= scale
        grads = [None, None, np.matmul(g.T, a1), g.sum(axis=0)]
        d1 = np.matmul(g, w2)
        d1 = d1 * (a1 > 0)
        grads[0], grads[1] = np.matmul(d1.T, x), d1.sum(axis=0)
        for param, grad, buffer, product in zip(self.params, grads, self.buffers, self.scratch):
            if self.first:
                np.copyto(buffer, grad)
            else:
                np.multiply(buffer, self.momentum, out=buffer)
                np.add(buffer, grad, out=buffer)
            np.multiply(buffer, -self.lr, out=product)
            np.add(param, product, out=param)
        self.first = False
        return loss


def torch_step(torch: Any, workload: str) -> Callable[[Any, Any], Any]:
    torch.manual_seed(0)
    tnn = torch.nn
    if workload == "MLP":
        model = tnn.Sequential(tnn.Linear(64, 128), tnn.ReLU(), tnn.Linear(128, 10))
    else:
        model = tnn.Sequential(tnn.Unflatten(1, (1, 8, 8)), tnn.Conv2d(1, 16, 3, padding=1), tnn.ReLU(),
                               tnn.MaxPool2d(2), tnn.Conv2d(16, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                               tnn.Flatten(), tnn.Linear(32 * 2 * 2, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        optimizer.zero_grad()
        loss = tnn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss
    return step


def batches(n: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(rng.random((BATCH, 64), dtype=np.float32), rng.integers(0, 10, BATCH)) for _ in range(n)]


def peak_bytes_per_step(step: Callable, data: list) -> int:
    """The allocator's highest allocated bytes during one step, above what was allocated when it began."""
    worst = 0
    for x, y in data:
        start = memory.allocated_bytes()
        memory.reset_peak()
        step(x, y)
        worst = max(worst, memory.stats().peak_bytes - start)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed block")
    args = parser.parse_args()
    try:
        import threadpoolctl
        threadpoolctl.threadpool_limits(args.threads)
    except ImportError:
        pass
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    raw = batches(args.steps)
    data = [(engine.tensor(x), engine.tensor(y)) for x, y in raw]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; BLAS threads {args.threads}; "
          f"batch {BATCH}; CPU time (process_time), median of {args.repeats} interleaved blocks of {args.steps} steps")
    for workload in ("MLP", "CNN"):
        eager, _ = engine_step(workload, traced=False)
        traced, _ = engine_step(workload, traced=True)
        started = time.perf_counter()
        traced(*data[0])
        first_call_ms = (time.perf_counter() - started) * 1e3
        steps: dict[str, Callable] = {"eager": lambda x, y, s=eager: s(x, y), "traced": traced}
        inputs: dict[str, list] = {"eager": data, "traced": data}
        if workload == "MLP":
            steps["numpy"] = NumpyStep(engine_model(workload))
            inputs["numpy"] = raw
        if torch is not None:
            steps["torch"] = torch_step(torch, workload)
            inputs["torch"] = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in raw]
        for name, step in steps.items():
            for x, y in inputs[name][:3]:
                step(x, y)
        times: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(args.repeats):
            for name, step in steps.items():
                begin = time.process_time()
                for x, y in inputs[name]:
                    step(x, y)
                times[name].append((time.process_time() - begin) / len(inputs[name]) * 1e3)
        ms = {name: statistics.median(values) for name, values in times.items()}
        line = "  ".join(f"{name} {value:.3f} ms" for name, value in ms.items())
        print(f"{workload}: {line}")
        print(f"  traced/eager {ms['traced'] / ms['eager']:.2f}x" +
              (f"  traced/torch {ms['traced'] / ms['torch']:.2f}x" if "torch" in ms else "") +
              (f"  numpy/eager {ms['numpy'] / ms['eager']:.2f}x (the floor)" if "numpy" in ms else ""))
        eager_peak = peak_bytes_per_step(eager, data[:5])
        traced_peak = peak_bytes_per_step(traced, data[:5])
        print(f"  peak bytes per step (engine allocator): eager {eager_peak}  traced {traced_peak}  "
              f"traced/eager {traced_peak / eager_peak:.2f}x")
        print(f"  tracing: {traced.trace_ms[0]:.1f} ms per signature (first call {first_call_ms:.1f} ms, "
              f"{len(traced.graphs()[0][0].nodes)} nodes -> {len(traced.graphs()[0][1].nodes)} after the passes)")


if __name__ == "__main__":
    main()
