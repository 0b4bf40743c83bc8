"""The ops' CuPy branches on any machine: NumPy stands in for CuPy (an ``xp`` that is not ``numpy``) and the kernels'
NumPy references (same signatures) for the CUDA kernels, so the branches' own logic — layouts, argument order,
ignored labels, padding crops, the one-launch Adam over parameter groups — is checked against the NumPy path.
The kernels themselves are checked against the same references on a GPU (tests/gpu)."""
from __future__ import annotations

import importlib
import sys
import types

import numpy as np
import pytest

import engine
from engine import nn
from engine.op import Function
from engine.nn import functional as F

from engine.backend import kernel_reference as reference


class _NumpyAsCupy:
    """An array module that is not ``numpy`` but computes with it: ops take their CuPy branch."""

    def __getattr__(self, name: str):
        return getattr(np, name)


class _DeviceArray(np.ndarray):
    """An array whose type is not ``np.ndarray``: parameters holding it take the optimizers' GPU branch."""


@pytest.fixture
def kernels_are_references(monkeypatch):
    try:
        package = importlib.import_module("engine.backend.cuda")
    except ImportError:
        package = types.ModuleType("engine.backend.cuda")
        monkeypatch.setitem(sys.modules, "engine.backend.cuda", package)
    monkeypatch.setattr(package, "kernels", reference, raising=False)
    monkeypatch.setitem(sys.modules, "engine.backend.cuda.kernels", reference)


def _run(fn, arrays, wrt):
    tensors = [engine.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = fn(*tensors)
    out.backward(engine.tensor(np.random.default_rng(1).standard_normal(out.shape), dtype=out.dtype))
    return [out.numpy()] + [tensors[i].grad.numpy() for i in wrt]


_RNG = np.random.default_rng(0)
_LABELS = np.array([0, 3, -100, 1, 2, 3])
_LABELS_4D = _RNG.integers(0, 3, (2, 4, 5))
CASES = {
    "cross_entropy": (lambda x: F.cross_entropy(x, _LABELS), [_RNG.normal(size=(6, 4))], (0,)),
    "cross_entropy_weight": (lambda x: F.cross_entropy(x, _LABELS, weight=np.array([0.5, 2.0, 1.0, 1.5])),
                             [_RNG.normal(size=(6, 4))], (0,)),
    "cross_entropy_sum": (lambda x: F.cross_entropy(x, _LABELS, reduction="sum"), [_RNG.normal(size=(6, 4))], (0,)),
    "cross_entropy_none": (lambda x: F.cross_entropy(x, _LABELS, reduction="none"), [_RNG.normal(size=(6, 4))],
                           (0,)),
    "cross_entropy_4d": (lambda x: F.cross_entropy(x, _LABELS_4D),
                         [_RNG.normal(size=(2, 3, 4, 5))], (0,)),
    "conv2d_pad": (lambda x, w, b: F.conv2d(x, w, b, padding=1),
                   [_RNG.normal(size=(2, 3, 7, 6)), _RNG.normal(size=(4, 3, 3, 2)), _RNG.normal(size=4)], (0, 1, 2)),
    "conv2d_stride": (lambda x, w: F.conv2d(x, w, stride=2), [_RNG.normal(size=(2, 2, 9, 8)),
                                                               _RNG.normal(size=(3, 2, 3, 3))], (0, 1)),
    "max_pool2d_overlap": (lambda x: F.max_pool2d(x, 3, 2, 1), [_RNG.normal(size=(2, 2, 7, 7))], (0,)),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [_RNG.normal(size=(2, 3, 6, 8))], (0,)),
    "avg_pool2d_pad": (lambda x: F.avg_pool2d(x, 3, 1, 1), [_RNG.normal(size=(2, 2, 5, 6))], (0,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cupy_branch_of_op_equals_numpy_path(name, kernels_are_references, monkeypatch):
    fn, arrays, wrt = CASES[name]
    expected = _run(fn, arrays, wrt)
    monkeypatch.setattr(Function, "xp", _NumpyAsCupy())
    got = _run(fn, arrays, wrt)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("options", [dict(), dict(weight_decay=0.1, amsgrad=True)])
@pytest.mark.parametrize("optimizer_class", [engine.optim.Adam, engine.optim.AdamW])
def test_one_launch_adam_branch_equals_numpy_adam(optimizer_class, options, kernels_are_references):
    rng = np.random.default_rng(0)
    shapes = [(5, 4), (4,), (3, 3, 2)]
    values = [rng.normal(size=s) for s in shapes]
    grads = [[rng.normal(size=s) for s in shapes] for _ in range(3)]
    results = []
    for device_like in (False, True):
        params = [nn.Parameter(engine.tensor(v)) for v in values]
        if device_like:
            for p in params:
                p._data = p._data.view(_DeviceArray)
        optimizer = optimizer_class(params, lr=0.01, **options)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = engine.tensor(g)
            optimizer.step()
        assert all(state["step"] == 3 for state in optimizer.state.values())
        results.append([np.asarray(p._data).copy() for p in params])
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)
