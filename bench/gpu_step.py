"""GPU speed, ratios from one run on one device (needs CuPy and a CUDA device; torch CUDA for the step comparison).

1. A training step (forward, cross-entropy, backward, Adam) of the engine on CUDA vs torch CUDA eager: an MLP
   784-1024-1024-10 at batch 512 and a CNN on 32x32x3 inputs at batch 256 (target: engine / torch <= 1.5).
2. Each fused kernel of engine/backend/cuda/kernels.py vs the unfused composition of CuPy calls it replaces, and the
   generated kernel of a traced graph's fused elementwise chain vs its ufunc chain (one CuPy launch per op), timed
   with CUDA events by ``cupyx.profiler.benchmark`` (target: unfused / fused >= 2).

``python bench/gpu_step.py [--json FILE] [--repeats N]``. Nothing is downloaded: inputs are random.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STEP_TARGET, FUSED_TARGET = 1.5, 2.0


def gpu_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median GPU time of one call in ms (CUDA events around each call, after warm-up)."""
    from cupyx.profiler import benchmark

    result = benchmark(fn, (), n_repeat=repeats, n_warmup=max(3, repeats // 10))
    return float(np.median(result.gpu_times[0]) * 1e3)


# --- fused kernels vs the CuPy compositions they replace --------------------------------------------------------

def fused_cases(cp: Any, kernels: Any) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    """name -> (fused call, unfused CuPy composition), on the sizes of the two benchmark models."""
    from cupyx.scipy.special import erf

    rng = cp.random.default_rng(0)
    f32 = cp.float32
    logits, labels = rng.standard_normal((512, 10), dtype=f32), rng.integers(0, 10, 512).astype(cp.int64)
    rows = cp.arange(512)
    _, probs = kernels.softmax_cross_entropy_forward(logits, labels, -100)
    row_scale = cp.full(512, 1 / 512, f32)

    def xent_unfused():
        shifted = logits - logits.max(axis=1, keepdims=True)
        e = cp.exp(shifted)
        total = e.sum(axis=1)
        return cp.log(total) - shifted[rows, labels], e / total[:, None]

    def xent_backward_unfused():
        g = probs * row_scale[:, None]
        g[rows, labels] -= row_scale
        return g

    x, bias, grad_y = (rng.standard_normal((512, 1024), dtype=f32), rng.standard_normal(1024, dtype=f32),
                       rng.standard_normal((512, 1024), dtype=f32))

    def gelu_unfused():
        v = x + bias
        return v * (0.5 * (1 + erf(v * 0.7071067811865476)))

    def gelu_backward_unfused():
        v = x + bias
        g = grad_y * (0.5 * (1 + erf(v * 0.7071067811865476)) + v * cp.exp(-0.5 * v * v) * 0.3989422804014327)
        return g, g.sum(axis=0)

    def relu_backward_unfused():
        g = grad_y * ((x + bias) > 0)
        return g, g.sum(axis=0)

    image = rng.standard_normal((256, 32, 34, 34), dtype=f32)  # the CNN's second conv input, padded
    cols = kernels.im2col(image, 3, 3, 1, 1)

    def im2col_unfused():
        view = cp.lib.stride_tricks.as_strided(
            image, (256, 32, 3, 3, 32, 32), image.strides[:2] + image.strides[2:] * 2)
        return view.reshape(256, 32 * 9, 1024)  # a copy: the view is not contiguous

    def col2im_unfused():
        out = cp.zeros(image.shape, f32)
        patches = cols.reshape(256, 32, 3, 3, 32, 32)
        for i in range(3):
            for j in range(3):
                out[:, :, i:i + 32, j:j + 32] += patches[:, :, i, j]
        return out

    pooled_in = rng.standard_normal((256, 32, 32, 32), dtype=f32)
    pooled, argmax = kernels.max_pool2d_forward(pooled_in, 2, 2, 2, 2)
    offsets = [pooled_in[:, :, i::2, j::2] for i in range(2) for j in range(2)]

    def max_pool_unfused():
        out, index = offsets[0].copy(), cp.zeros(pooled.shape, cp.int8)
        for k, view in enumerate(offsets[1:], start=1):
            better = view > out
            out = cp.maximum(out, view)
            index = cp.where(better, k, index)
        return out, index

    def max_pool_backward_unfused():
        out = cp.zeros(pooled_in.shape, f32)
        index = max_pool_unfused()[1]
        for k in range(4):
            out[:, :, k // 2::2, k % 2::2] = pooled * (index == k)
        return out

    def avg_pool_unfused():
        out = cp.zeros(pooled.shape, f32)
        for view in offsets:
            out += view
        return out * f32(0.25)

    sizes = (784 * 1024, 1024, 1024 * 1024, 1024, 1024 * 10, 10)  # the MLP's parameters
    state = [[rng.standard_normal(n, dtype=f32) for n in sizes] for _ in range(4)]
    hyper = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, step=10, decoupled=True)

    def adam_unfused():
        for p, g, m, v in zip(*state):
            p *= 1 - 1e-5
            m += (g - m) * 0.1
            v *= 0.999
            v += (g * 0.001) * g
            p += (m * -1e-3) / (cp.sqrt(v) / 0.1 + 1e-8)

    flat = cp.concatenate([a for arrays in state[:3] for a in arrays])
    starts = np.cumsum([0] + [a.size for arrays in state[:3] for a in arrays][:-1])
    lengths = np.array([a.size for arrays in state[:3] for a in arrays])

    def stats_unfused():  # per segment: the reductions watch() needs, each its own launch
        out = []
        for start, size in zip(starts.tolist(), lengths.tolist()):
            seg = flat[start:start + size]
            finite = cp.isfinite(seg)
            out.append((cp.dot(seg, seg), cp.where(finite, seg, cp.inf).min(), cp.where(finite, seg, -cp.inf).max(),
                        cp.isnan(seg).sum(), cp.isinf(seg).sum()))
        return out

    activations = cp.maximum(x, 0)
    chain_in = [rng.standard_normal((512, 1024), dtype=f32) for _ in range(3)]
    return {
        "graph chain Add+Neg+Mul+Sub": (graph_fused_chain(chain_in), lambda: ufunc_chain(cp, *chain_in)),
        "softmax_xent_forward": (lambda: kernels.softmax_cross_entropy_forward(logits, labels, -100), xent_unfused),
        "softmax_xent_backward": (lambda: kernels.softmax_cross_entropy_backward(probs, labels, row_scale, -100),
                                  xent_backward_unfused),
        "bias_relu_forward": (lambda: kernels.bias_activation_forward(x, bias, "relu"),
                              lambda: cp.maximum(x + bias, 0)),
        "bias_relu_backward": (lambda: kernels.bias_activation_backward(x, bias, grad_y, "relu"),
                               relu_backward_unfused),
        "bias_gelu_forward": (lambda: kernels.bias_activation_forward(x, bias, "gelu"), gelu_unfused),
        "bias_gelu_backward": (lambda: kernels.bias_activation_backward(x, bias, grad_y, "gelu"),
                               gelu_backward_unfused),
        "im2col": (lambda: kernels.im2col(image, 3, 3, 1, 1), im2col_unfused),
        "col2im": (lambda: kernels.col2im(cols, image.shape, 3, 3, 1, 1), col2im_unfused),
        "max_pool_forward": (lambda: kernels.max_pool2d_forward(pooled_in, 2, 2, 2, 2), max_pool_unfused),
        "max_pool_backward": (lambda: kernels.max_pool2d_backward(pooled, argmax, pooled_in.shape),
                              max_pool_backward_unfused),
        "avg_pool_forward": (lambda: kernels.avg_pool2d_forward(pooled_in, 2, 2, 2, 2), avg_pool_unfused),
        "adam_step (6 tensors)": (lambda: kernels.adam_step(*state, **hyper), adam_unfused),
        "segment_statistics (18 segments)": (lambda: kernels.segment_statistics_packed(flat, starts, lengths),
                                             stats_unfused),
        "dead_unit_counts": (lambda: kernels.dead_unit_counts(activations),
                             lambda: cp.count_nonzero(~(activations > 0), axis=0)),
    }


def graph_fused_chain(arrays: list[Any]) -> Callable[[], Any]:
    """The fused node engine.function makes of -(a + b) * c - a (no gradients: Mul fuses), called on ``arrays``."""
    import engine

    traced = engine.function(lambda a, b, c: -(a + b) * c - a)
    traced(*[engine.tensor(a) for a in arrays])
    node = next(n for n in traced.graphs()[0][1].nodes if n.kind == "fused")
    assert node.fused_ops == ["Add", "Neg", "Mul", "Sub"], node.op
    return lambda: node.run(*arrays)


def ufunc_chain(cp: Any, a: Any, b: Any, c: Any) -> Any:
    """What a fused node ran on the GPU before its generated kernel: the ufuncs one by one into one buffer."""
    out = cp.empty_like(a)
    cp.add(a, b, out=out)
    cp.negative(out, out=out)
    cp.multiply(out, c, out=out)
    return cp.subtract(out, a, out=out)


def fused_rows(repeats: int) -> list[dict[str, Any]]:
    import cupy as cp

    from engine.backend.cuda import kernels

    rows = []
    for name, (fused, unfused) in fused_cases(cp, kernels).items():
        fused_ms, unfused_ms = gpu_ms(fused, repeats), gpu_ms(unfused, repeats)
        rows.append(dict(kernel=name, fused_ms=fused_ms, unfused_ms=unfused_ms, speedup=unfused_ms / fused_ms))
        print(f"{name:34s} fused {fused_ms:8.4f} ms  unfused {unfused_ms:8.4f} ms  "
              f"speedup {unfused_ms / fused_ms:5.2f}x (target >= {FUSED_TARGET}x)", flush=True)
    return rows


# --- training steps: engine CUDA vs torch CUDA eager -------------------------------------------------------------

def batch(workload: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    n, shape = (512, (784,)) if workload == "MLP" else (256, (3, 32, 32))
    return rng.random((n,) + shape, dtype=np.float32), rng.integers(0, 10, n).astype(np.int64)


def engine_step(workload: str) -> Callable[[], Any]:
    import engine
    from engine import hooks, nn
    from engine.nn import functional as F

    engine.manual_seed(0)
    if workload == "MLP":
        model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    else:
        model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(64 * 8 * 8, 10))
    model.to("cuda")
    optimizer = engine.optim.Adam(model.parameters(), lr=1e-3)
    x, y = batch(workload)
    x_t, y_t = engine.tensor(x).to("cuda"), engine.tensor(y).to("cuda")

    def step() -> None:
        hooks.mark_step_begin()
        optimizer.zero_grad()
        F.cross_entropy(model(x_t), y_t).backward()
        optimizer.step()
    return step


def torch_step(workload: str) -> Callable[[], Any]:
    import torch

    torch.manual_seed(0)
    tnn = torch.nn
    if workload == "MLP":
        model = tnn.Sequential(tnn.Linear(784, 1024), tnn.ReLU(), tnn.Linear(1024, 1024), tnn.ReLU(),
                               tnn.Linear(1024, 10))
    else:
        model = tnn.Sequential(tnn.Conv2d(3, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                               tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
                               tnn.Linear(64 * 8 * 8, 10))
    model.cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    x, y = batch(workload)
    x_t, y_t = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()

    def step() -> None:
        optimizer.zero_grad()
        tnn.functional.cross_entropy(model(x_t), y_t).backward()
        optimizer.step()
    return step


def step_ms(steps: dict[str, Callable[[], Any]], sync: dict[str, Callable[[], Any]], repeats: int,
            per_repeat: int) -> dict[str, float]:
    """Median wall ms per step, each repeat synchronised at its end; repeats interleaved between implementations."""
    for name, step in steps.items():
        for _ in range(5):
            step()
        sync[name]()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(per_repeat):
                step()
            sync[name]()
            times[name].append((time.perf_counter() - start) * 1e3 / per_repeat)
    return {name: statistics.median(values) for name, values in times.items()}


def step_rows(repeats: int) -> list[dict[str, Any]]:
    import cupy
    import torch

    rows = []
    sync = {"engine": lambda: cupy.cuda.Device().synchronize(), "torch": torch.cuda.synchronize}
    for workload in ("MLP", "CNN"):
        try:
            steps = {"engine": engine_step(workload), "torch": torch_step(workload)}
            ms = step_ms(steps, sync, repeats, 10)
        except Exception as error:  # noqa: BLE001 - report and go on with the other figures
            print(f"{workload} step: not measured: {type(error).__name__}: {error}", flush=True)
            rows.append(dict(workload=workload, error=f"{type(error).__name__}: {error}"))
            continue
        ratio = ms["engine"] / ms["torch"]
        rows.append(dict(workload=workload, engine_ms=ms["engine"], torch_ms=ms["torch"], ratio=ratio))
        print(f"{workload} step: engine CUDA {ms['engine']:.3f} ms, torch CUDA eager {ms['torch']:.3f} ms, "
              f"ratio {ratio:.2f}x (target <= {STEP_TARGET}x)", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--repeats", type=int, default=50, help="timed repeats per figure (default: 50)")
    args = parser.parse_args(argv)
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    print(f"device: {device}; CuPy {cupy.__version__}", flush=True)
    report = dict(device=device, fused=fused_rows(args.repeats), steps=step_rows(max(5, args.repeats // 5)))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
