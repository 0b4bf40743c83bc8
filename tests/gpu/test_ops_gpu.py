"""Every op forward and backward on the GPU: against the engine's CPU backend (float64, equal to rounding) and
against torch CUDA (the oracle). Skipped, saying why, where CUDA is unavailable (tests/gpu/conftest.py)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import engine
from engine import nn
from engine.backend import DeviceMismatchError
from engine.nn import functional as F

RTOL, ATOL = 1e-9, 1e-11  # float64 throughout: only summation order differs between the backends


def _u(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape)


def _pos(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, size=shape)


_LABELS = np.array([0, 3, 1, 3, 2, 0], dtype=np.int64)
_LABELS_IGNORED = np.array([0, -100, 1, 3, -100, 2], dtype=np.int64)
_LABELS_4D = np.random.default_rng(7).integers(0, 3, size=(2, 4, 5))
_CLASS_WEIGHT = np.array([0.5, 2.0, 1.0, 1.5])


def _probs(rng: np.random.Generator, rows: int, classes: int) -> np.ndarray:
    p = rng.uniform(0.1, 1.0, size=(rows, classes))
    return p / p.sum(axis=1, keepdims=True)


def _t(array: np.ndarray, like: Any) -> Any:
    import torch
    return torch.tensor(array, device=like.device)


# name: (inputs from rng, indices of inputs that get gradients, engine fn, torch fn)
CASES: dict[str, tuple[Callable, tuple[int, ...], Callable, Callable]] = {
    "add_broadcast": (lambda r: [_u(r, 3, 4), _u(r, 4)], (0, 1), lambda a, b: a + b, lambda a, b: a + b),
    "add_scalar": (lambda r: [_u(r, 3, 4)], (0,), lambda a: 2.5 + a, lambda a: 2.5 + a),
    "sub": (lambda r: [_u(r, 3, 4), _u(r, 3, 1)], (0, 1), lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda r: [_u(r, 2, 3, 4), _u(r, 1, 3, 1)], (0, 1), lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda r: [_u(r, 3, 4), _pos(r, 3, 4)], (0, 1), lambda a, b: a / b, lambda a, b: a / b),
    "pow": (lambda r: [_pos(r, 3, 4), _u(r, 3, 4)], (0, 1), lambda a, b: a ** b, lambda a, b: a ** b),
    "neg": (lambda r: [_u(r, 5)], (0,), lambda a: -a, lambda a: -a),
    "matmul_2d": (lambda r: [_u(r, 3, 4), _u(r, 4, 5)], (0, 1), lambda a, b: a @ b, lambda a, b: a @ b),
    "matmul_batched": (lambda r: [_u(r, 2, 3, 4), _u(r, 4, 5)], (0, 1), lambda a, b: a @ b, lambda a, b: a @ b),
    "matmul_vector": (lambda r: [_u(r, 4), _u(r, 4, 5)], (0, 1), lambda a, b: a @ b, lambda a, b: a @ b),
    "exp": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.exp(), lambda a: a.exp()),
    "log": (lambda r: [_pos(r, 3, 4)], (0,), lambda a: a.log(), lambda a: a.log()),
    "sqrt": (lambda r: [_pos(r, 3, 4)], (0,), lambda a: a.sqrt(), lambda a: a.sqrt()),
    "abs": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.abs(), lambda a: a.abs()),
    "clip": (lambda r: [_u(r, 4, 5)], (0,), lambda a: a.clip(-0.3, 0.5), lambda a: a.clamp(-0.3, 0.5)),
    "clip_low": (lambda r: [_u(r, 4, 5)], (0,), lambda a: a.clip(min=-0.2), lambda a: a.clamp(min=-0.2)),
    "tanh": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.tanh(), lambda a: a.tanh()),
    "sigmoid": (lambda r: [_u(r, 3, 4) * 30], (0,), lambda a: a.sigmoid(), lambda a: a.sigmoid()),
    "relu": (lambda r: [_u(r, 3, 4)], (0,), F.relu, lambda a: a.relu()),
    "leaky_relu": (lambda r: [_u(r, 3, 4)], (0,), lambda a: F.leaky_relu(a, 0.1),
                   lambda a: __import__("torch").nn.functional.leaky_relu(a, 0.1)),
    "gelu": (lambda r: [_u(r, 3, 4) * 3], (0,), F.gelu, lambda a: __import__("torch").nn.functional.gelu(a)),
    "softmax": (lambda r: [_u(r, 3, 5) * 4], (0,), lambda a: F.softmax(a, 1), lambda a: a.softmax(1)),
    "log_softmax": (lambda r: [_u(r, 3, 5) * 4], (0,), lambda a: F.log_softmax(a, 0), lambda a: a.log_softmax(0)),
    "sum_axis": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.sum(axis=1), lambda a: a.sum(dim=1)),
    "sum_all": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.sum(), lambda a: a.sum()),
    "mean_keepdims": (lambda r: [_u(r, 2, 3, 4)], (0,), lambda a: a.mean(axis=(0, 2), keepdims=True),
                      lambda a: a.mean(dim=(0, 2), keepdim=True)),
    "max_axis": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.max(axis=1), lambda a: a.amax(dim=1)),
    "min_all": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.min(), lambda a: a.amin()),
    "reshape": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.reshape(2, 6), lambda a: a.reshape(2, 6)),
    "transpose": (lambda r: [_u(r, 2, 3, 4)], (0,), lambda a: a.transpose(1, 2, 0), lambda a: a.permute(1, 2, 0)),
    "transpose_T": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.T, lambda a: a.T),
    "flatten": (lambda r: [_u(r, 2, 3, 4)], (0,), lambda a: a.flatten(1), lambda a: a.flatten(1)),
    "getitem_basic": (lambda r: [_u(r, 4, 5)], (0,), lambda a: a[1:, ::2], lambda a: a[1:, ::2]),
    "getitem_repeated": (lambda r: [_u(r, 4, 5)], (0,), lambda a: a[[0, 2, 0]], lambda a: a[[0, 2, 0]]),
    "getitem_pairs": (lambda r: [_u(r, 4, 5)], (0,), lambda a: a[[0, 3, 0], [1, 1, 1]],
                      lambda a: a[[0, 3, 0], [1, 1, 1]]),
    "concat": (lambda r: [_u(r, 2, 3), _u(r, 2, 4)], (0, 1), lambda a, b: engine.concat([a, b], axis=1),
               lambda a, b: __import__("torch").cat([a, b], dim=1)),
    "stack": (lambda r: [_u(r, 2, 3), _u(r, 2, 3)], (0, 1), lambda a, b: engine.stack([a, b], axis=1),
              lambda a, b: __import__("torch").stack([a, b], dim=1)),
    "where": (lambda r: [_u(r, 3, 4), _u(r, 3, 4)], (0, 1), lambda a, b: engine.where(a > b, a, b * 2),
              lambda a, b: __import__("torch").where(a > b, a, b * 2)),
    "linear": (lambda r: [_u(r, 6, 4), _u(r, 3, 4), _u(r, 3)], (0, 1, 2), F.linear,
               lambda x, w, b: __import__("torch").nn.functional.linear(x, w, b)),
    "conv2d_pad": (lambda r: [_u(r, 2, 3, 7, 6), _u(r, 4, 3, 3, 2), _u(r, 4)], (0, 1, 2),
                   lambda x, w, b: F.conv2d(x, w, b, padding=1),
                   lambda x, w, b: __import__("torch").nn.functional.conv2d(x, w, b, padding=1)),
    "conv2d_stride": (lambda r: [_u(r, 2, 2, 9, 8), _u(r, 3, 2, 3, 3)], (0, 1),
                      lambda x, w: F.conv2d(x, w, stride=2),
                      lambda x, w: __import__("torch").nn.functional.conv2d(x, w, stride=2)),
    "max_pool2d": (lambda r: [_u(r, 2, 3, 6, 8)], (0,), lambda x: F.max_pool2d(x, 2),
                   lambda x: __import__("torch").nn.functional.max_pool2d(x, 2)),
    "max_pool2d_overlap": (lambda r: [_u(r, 2, 2, 7, 7)], (0,), lambda x: F.max_pool2d(x, 3, 2, 1),
                           lambda x: __import__("torch").nn.functional.max_pool2d(x, 3, 2, 1)),
    "avg_pool2d": (lambda r: [_u(r, 2, 3, 6, 8)], (0,), lambda x: F.avg_pool2d(x, 2),
                   lambda x: __import__("torch").nn.functional.avg_pool2d(x, 2)),
    "avg_pool2d_pad": (lambda r: [_u(r, 2, 2, 5, 6)], (0,), lambda x: F.avg_pool2d(x, 3, 1, 1),
                       lambda x: __import__("torch").nn.functional.avg_pool2d(x, 3, 1, 1)),
    "batch_norm_train": (lambda r: [_u(r, 5, 3, 4), _pos(r, 3), _u(r, 3)], (0, 1, 2),
                         lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                         lambda x, w, b: __import__("torch").nn.functional.batch_norm(x, None, None, w, b,
                                                                                      training=True)),
    "batch_norm_eval": (lambda r: [_u(r, 5, 3, 4), _u(r, 3), _pos(r, 3), _pos(r, 3), _u(r, 3)], (0, 3, 4),
                        lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=False),
                        lambda x, m, v, w, b: __import__("torch").nn.functional.batch_norm(x, m, v, w, b,
                                                                                           training=False)),
    "cross_entropy": (lambda r: [_u(r, 6, 4) * 3], (0,), lambda x: F.cross_entropy(x, _LABELS),
                      lambda x: __import__("torch").nn.functional.cross_entropy(x, _t(_LABELS, x))),
    "cross_entropy_weight_ignore": (
        lambda r: [_u(r, 6, 4) * 3], (0,), lambda x: F.cross_entropy(x, _LABELS_IGNORED, weight=_CLASS_WEIGHT),
        lambda x: __import__("torch").nn.functional.cross_entropy(x, _t(_LABELS_IGNORED, x),
                                                                  weight=_t(_CLASS_WEIGHT, x))),
    "cross_entropy_smoothing": (
        lambda r: [_u(r, 6, 4) * 3], (0,), lambda x: F.cross_entropy(x, _LABELS, label_smoothing=0.1),
        lambda x: __import__("torch").nn.functional.cross_entropy(x, _t(_LABELS, x), label_smoothing=0.1)),
    "cross_entropy_sum": (lambda r: [_u(r, 6, 4)], (0,), lambda x: F.cross_entropy(x, _LABELS, reduction="sum"),
                          lambda x: __import__("torch").nn.functional.cross_entropy(x, _t(_LABELS, x),
                                                                                    reduction="sum")),
    "cross_entropy_none": (lambda r: [_u(r, 6, 4)], (0,), lambda x: F.cross_entropy(x, _LABELS, reduction="none"),
                           lambda x: __import__("torch").nn.functional.cross_entropy(x, _t(_LABELS, x),
                                                                                     reduction="none")),
    "cross_entropy_4d": (lambda r: [_u(r, 2, 3, 4, 5)], (0,), lambda x: F.cross_entropy(x, _LABELS_4D),
                         lambda x: __import__("torch").nn.functional.cross_entropy(x, _t(_LABELS_4D, x))),
    "cross_entropy_soft": (
        lambda r: [_u(r, 5, 4), _probs(r, 5, 4)], (0,), lambda x, p: F.cross_entropy(x, p),
        lambda x, p: __import__("torch").nn.functional.cross_entropy(x, p)),
    "nll_loss": (lambda r: [_u(r, 6, 4)], (0,), lambda x: F.nll_loss(F.log_softmax(x, 1), _LABELS),
                 lambda x: __import__("torch").nn.functional.nll_loss(x.log_softmax(1), _t(_LABELS, x))),
    "mse_loss": (lambda r: [_u(r, 3, 4), _u(r, 3, 4)], (0, 1), F.mse_loss,
                 lambda a, b: __import__("torch").nn.functional.mse_loss(a, b)),
    "bce_with_logits": (
        lambda r: [_u(r, 4, 3) * 5, _probs(r, 4, 3), _pos(r, 3)], (0, 1),
        lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
        lambda x, t, pw: __import__("torch").nn.functional.binary_cross_entropy_with_logits(x, t, pos_weight=pw)),
    "cast_float32": (lambda r: [_u(r, 3, 4)], (0,), lambda a: a.astype("float32") * 3,
                     lambda a: a.to(__import__("torch").float32) * 3),
    "to_cpu_and_back": (lambda r: [_u(r, 3, 4)], (0,), lambda a: (a.cpu() * 2).to(a.device) + a,
                        lambda a: (a.cpu() * 2).to(a.device) + a),
}


def _engine_run(fn: Callable, arrays: list[np.ndarray], wrt: tuple[int, ...], device: str,
                upstream: np.ndarray | None = None) -> tuple[engine.Tensor, list[engine.Tensor], np.ndarray]:
    tensors = [engine.tensor(a, requires_grad=i in wrt, device=device) for i, a in enumerate(arrays)]
    out = fn(*tensors)
    if upstream is None:
        upstream = np.asarray(np.random.default_rng(1).standard_normal(out.shape))
    out.backward(engine.tensor(upstream, dtype=out.dtype, device=device))
    return out, [tensors[i].grad for i in wrt], upstream


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_on_gpu_matches_cpu_backend(name, rng):
    make, wrt, fn, _ = CASES[name]
    arrays = make(rng)
    cpu_out, cpu_grads, upstream = _engine_run(fn, arrays, wrt, "cpu")
    gpu_out, gpu_grads, _ = _engine_run(fn, arrays, wrt, "cuda", upstream)
    device = f"cuda:{engine.cuda.current_device()}"
    assert gpu_out.device == device and gpu_out.is_cuda and type(gpu_out.numpy()) is np.ndarray
    assert (gpu_out.shape, gpu_out.dtype) == (cpu_out.shape, cpu_out.dtype)
    tolerance = dict(rtol=1e-6, atol=1e-7) if gpu_out.dtype == np.float32 else dict(rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(gpu_out.numpy(), cpu_out.numpy(), err_msg=f"{name} forward", **tolerance)
    for i, gpu_grad, cpu_grad in zip(wrt, gpu_grads, cpu_grads):
        assert gpu_grad.device == device and gpu_grad.dtype == cpu_grad.dtype
        np.testing.assert_allclose(gpu_grad.numpy(), cpu_grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=f"{name} gradient of input {i}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_on_gpu_matches_torch_cuda(name, rng):
    torch = pytest.importorskip("torch")
    make, wrt, fn, torch_fn = CASES[name]
    arrays = make(rng)
    gpu_out, gpu_grads, upstream = _engine_run(fn, arrays, wrt, "cuda")
    inputs = [torch.tensor(a, device="cuda", requires_grad=i in wrt) for i, a in enumerate(arrays)]
    expected = torch_fn(*inputs)
    expected.backward(torch.tensor(upstream, dtype=expected.dtype, device="cuda"))
    tolerance = dict(rtol=1e-6, atol=1e-7) if gpu_out.dtype == np.float32 else dict(rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gpu_out.numpy(), expected.detach().cpu().numpy(), err_msg=name, **tolerance)
    for i, grad in zip(wrt, gpu_grads):
        np.testing.assert_allclose(grad.numpy(), inputs[i].grad.cpu().numpy(), rtol=1e-8, atol=1e-10,
                                   err_msg=f"{name} gradient of input {i}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_cross_entropy_in_float32_and_float64(dtype, rng):
    """The fused kernel path (no smoothing) in both float widths against the CPU backend."""
    x = (_u(rng, 64, 10) * 4).astype(dtype)
    labels = rng.integers(0, 10, 64)
    labels[::7] = -100
    results = []
    for device in ("cpu", "cuda"):
        logits = engine.tensor(x, requires_grad=True, device=device)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        results.append((loss.item(), logits.grad.numpy()))
    rtol = 1e-5 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=rtol)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=rtol, atol=rtol * 1e-2)


def test_comparisons_and_argmax_on_gpu(rng):
    a, b = _u(rng, 4, 5), _u(rng, 4, 5)
    ga, gb = engine.tensor(a, device="cuda"), engine.tensor(b, device="cuda")
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        result = getattr(ga, op)(gb)
        assert result.is_cuda and result.dtype == np.bool_
        np.testing.assert_array_equal(result.numpy(), getattr(a, op)(b))
    assert (ga > 0.0).is_cuda and ga.argmax(axis=1).is_cuda
    np.testing.assert_array_equal(ga.argmax(axis=1).numpy(), a.argmax(axis=1))
    assert int(ga.argmax().item()) == int(a.argmax())


def test_dropout_on_gpu_keeps_the_expected_fraction_and_repeats_with_the_seed():
    x = engine.tensor(np.ones((200, 500), np.float32), requires_grad=True, device="cuda")
    masks = []
    for _ in range(2):
        engine.manual_seed(11)
        out = F.dropout(x, p=0.3)
        assert out.is_cuda
        masks.append(out.numpy())
    kept = masks[0] != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(masks[0][kept], 1 / 0.7, rtol=1e-6)
    np.testing.assert_array_equal(masks[0], masks[1])
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), masks[1])


def test_ops_on_two_devices_name_the_op_devices_and_module():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU()).to("cuda")
    device = f"cuda:{engine.cuda.current_device()}"
    with pytest.raises(DeviceMismatchError, match=rf"op 'Linear' in module '0' got inputs on different devices: "
                                                  rf"cpu and {device}"):
        model(engine.tensor(np.ones((2, 3), np.float32)))
    with pytest.raises(DeviceMismatchError, match=rf"op 'Add' outside any module .*{device} and cpu"):
        engine.tensor([1.0], device="cuda") + engine.tensor([1.0])
    with pytest.raises(DeviceMismatchError, match="op 'Less'"):
        engine.tensor([1.0], device="cuda") < engine.tensor([1.0])


def test_tensor_device_api_on_gpu(cp):
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = engine.tensor(host, device="cuda")
    index = engine.cuda.current_device()
    assert t.device == f"cuda:{index}" and t.device.type == "cuda" and t.device.index == index
    assert t.to("cuda") is t and t.cuda() is t and isinstance(t._data, cp.ndarray)
    back = t.cpu()
    assert back.device == "cpu" and type(back._data) is np.ndarray and np.array_equal(back.numpy(), host)
    assert np.array_equal(t.numpy(), host) and t.numpy() is not t.numpy()  # a fresh host copy each time
    assert t.sum().item() == 15.0 and float(t[1, 2]) == 5.0 and "device='cuda:" in repr(t)
    for result in (t * np.float32(2), t + 1, 1.5 - t, t ** 2, t / np.float64(4)):  # scalars join on the device
        assert result.is_cuda and result.dtype == np.float32
    wrapped = engine.tensor(cp.ones(3))  # a CuPy array stays on its device
    assert wrapped.is_cuda and wrapped.dtype == np.float64
    cast = t.to("cpu", "float64")
    assert cast.device == "cpu" and cast.dtype == np.float64
    engine.cuda.synchronize()
    assert engine.cuda.is_available() and engine.cuda.device_count() >= 1
