"""CUDA C of a fused elementwise chain (engine/graph/passes/fusion.py): one ``extern "C" __global__`` kernel per
(chain, dtype, input layouts), a grid-stride loop over the n output elements that evaluates the chain's steps in
order into one register, rounding after each step as the ufunc chain does. No CuPy needed: ``python -m engine.cuda
--check`` compiles ``SAMPLES`` with NVRTC.

Covered: float32 and float64 chains of add, subtract, multiply, (true) divide and negative (all the pass fuses) whose
inputs all have the chain's dtype and element strides (any broadcast, any view). Anything else (float16, integer,
bool or complex chains, an input of another dtype, strides that are not a whole number of elements) is not
covered: ``layout`` or ``covers`` says so and the caller runs the ufunc chain.
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np

OPS = {"add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}", "divide": "{0} / {1}",
       "negative": "-{0}"}
C_TYPES = {np.dtype(np.float32): ("float", "f32"), np.dtype(np.float64): ("double", "f64")}
Steps = Sequence[tuple[Any, Sequence[int]]]  # (NumPy ufunc, sources: input index, or -1 for the previous result)
Layout = Any  # "c" (the output's own shape, C-contiguous), "s" (one element), or element strides per output dimension


def covers(steps: Steps, dtype: Any) -> str | None:
    """None when the generator covers the chain in ``dtype``, else why not."""
    if np.dtype(dtype) not in C_TYPES:
        return f"dtype {np.dtype(dtype)} (the fused kernel covers float32 and float64)"
    for ufunc, _ in steps:
        if getattr(ufunc, "__name__", None) not in OPS:
            return f"op {getattr(ufunc, '__name__', ufunc)!r}"
    return None


def layout(array: Any, shape: tuple[int, ...], dtype: np.dtype) -> Layout | None:
    """How the kernel reads ``array`` (numpy or cupy) broadcast to ``shape``, or None when it cannot."""
    if array.dtype != dtype:
        return None
    if array.shape == shape and array.flags.c_contiguous:
        return "c"
    if array.ndim > len(shape):
        return None
    pad = len(shape) - array.ndim
    sizes, strides = (1,) * pad + tuple(array.shape), (0,) * pad + tuple(array.strides)
    elements = []
    for size, stride, out in zip(sizes, strides, shape):
        if size != out and size != 1:
            return None  # not broadcastable: the ufunc chain raises NumPy's error
        if stride % dtype.itemsize:
            return None
        elements.append(0 if size == 1 or out == 1 else stride // dtype.itemsize)
    return "s" if not any(elements) else tuple(elements)


def _index(k: int, lay: Layout) -> str:
    return f"x{k}[i]" if lay == "c" else f"x{k}[0]" if lay == "s" else f"x{k}[o{k}]"


def kernel(steps: Steps, dtype: Any, layouts: Sequence[Layout], shape: tuple[int, ...]) -> tuple[str, str]:
    """(kernel name, CUDA C source) of the chain; launch with (inputs..., output, long long n)."""
    why = covers(steps, dtype)
    if why is not None:
        raise ValueError(f"fused kernel: not covered: {why}")
    c_type, suffix = C_TYPES[np.dtype(dtype)]
    lines = []
    if any(lay not in ("c", "s") for lay in layouts):
        lines.append("long long r = i;")
        for d in range(len(shape) - 1, 0, -1):
            lines.append(f"const long long c{d} = r % {shape[d]}LL; r /= {shape[d]}LL;")
        lines.append("const long long c0 = r;")
        for k, lay in enumerate(layouts):
            if lay not in ("c", "s"):
                terms = [f"c{d} * {s}LL" for d, s in enumerate(lay) if s] or ["0LL"]
                lines.append(f"const long long o{k} = {' + '.join(terms)};")
    for j, (ufunc, sources) in enumerate(steps):
        args = ["v" if s < 0 else _index(s, layouts[s]) for s in sources]
        lines.append(f"{c_type + ' ' if j == 0 else ''}v = {OPS[ufunc.__name__].format(*args)};")
    lines.append("y[i] = v;")
    body = "\n        ".join(lines)
    digest = hashlib.sha256(f"{body}|{layouts}".encode()).hexdigest()[:12]
    name = f"fused_{digest}_{suffix}"
    params = "".join(f"const {c_type}* x{k}, " for k in range(len(layouts)))
    source = (f'extern "C" __global__ void {name}({params}{c_type}* y, long long n) {{\n'
              f"    const long long stride = (long long)blockDim.x * gridDim.x;\n"
              f"    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{\n"
              f"        {body}\n    }}\n}}\n")
    return name, source


# Chains compiled by ``python -m engine.cuda --check`` (name -> (steps, layouts, shape)), float32 and float64 each.
SAMPLES = {
    "fused_add_neg_mul_sub": ([(np.add, [0, 1]), (np.negative, [-1]), (np.multiply, [-1, 2]),
                               (np.subtract, [-1, 0])], ["c", "c", "c"], (64, 32)),
    "fused_broadcast_div_add": ([(np.true_divide, [0, 1]), (np.add, [-1, 2]), (np.subtract, [3, -1])],
                                ["c", (0, 1), "s", (1, 0)], (64, 32)),
    "fused_accumulate": ([(np.add, [0, 1]), (np.add, [-1, 2]), (np.add, [-1, 3])], ["c"] * 4, (1024,)),
}


def sample_sources() -> list[tuple[str, str]]:
    """(name, source) of each sample chain, its float32 and float64 kernels in one module."""
    return [(name, "".join(kernel(steps, dtype, layouts, shape)[1] for dtype in C_TYPES))
            for name, (steps, layouts, shape) in SAMPLES.items()]
