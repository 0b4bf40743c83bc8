"""Helpers for the engine.nn tests: torch as an oracle (float64), weight copying and numerical gradients."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

import engine


def rand(shape: tuple[int, ...], seed: int = 0, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, size=shape)


def copy_weights(module, torch_module: torch.nn.Module) -> None:
    """Load the engine module's parameters and buffers into ``torch_module`` (as float64)."""
    state = {k: torch.tensor(np.array(v.numpy())) for k, v in module.state_dict().items()}
    torch_module.double()
    torch_module.load_state_dict(state)


def to_torch(array: np.ndarray, requires_grad: bool = True) -> torch.Tensor:
    return torch.tensor(np.array(array, dtype=np.float64), requires_grad=requires_grad)


def assert_close(actual, expected, atol: float = 1e-10, rtol: float = 1e-8, msg: str = "") -> None:
    actual = actual.numpy() if hasattr(actual, "numpy") and not isinstance(actual, np.ndarray) else actual
    if isinstance(expected, torch.Tensor):
        expected = expected.detach().numpy()
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), atol=atol, rtol=rtol, err_msg=msg)


def numeric_grad(fn: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar ``fn`` at ``x`` (float64)."""
    grad = np.zeros_like(x)
    flat_x, flat_g = x.reshape(-1), grad.reshape(-1)
    for i in range(flat_x.size):
        saved = flat_x[i]
        flat_x[i] = saved + eps
        plus = fn(x)
        flat_x[i] = saved - eps
        minus = fn(x)
        flat_x[i] = saved
        flat_g[i] = (plus - minus) / (2 * eps)
    return grad


def check_numeric(fn: Callable[..., engine.Tensor], arrays: Sequence[np.ndarray], wrt: Sequence[int] = (0,),
                  seed: int = 3, atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Backward of ``sum(fn(*tensors) * upstream)`` against central differences, all in float64."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    inputs = [engine.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = fn(*inputs)
    upstream = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(upstream)

    for i in wrt:
        def scalar(x, i=i):
            with engine.no_grad():
                args = [engine.tensor(x if j == i else a) for j, a in enumerate(arrays)]
                return float(np.sum(fn(*args).numpy() * upstream))
        expected = numeric_grad(scalar, arrays[i].copy())
        np.testing.assert_allclose(inputs[i].grad.numpy(), expected, atol=atol, rtol=rtol,
                                   err_msg=f"gradient of input {i}")


def compare_with_torch(engine_fn: Callable, torch_fn: Callable, arrays: Sequence[np.ndarray], seed: int = 9,
                       atol: float = 1e-10, rtol: float = 1e-8) -> tuple[list, list]:
    """Run both functions on float64 copies of ``arrays`` (all requiring grad), back-propagate the same random
    upstream gradient, and compare outputs and input gradients; returns (engine inputs, torch inputs)."""
    ours = [engine.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]
    theirs = [to_torch(a) for a in arrays]
    out, expected = engine_fn(*ours), torch_fn(*theirs)
    assert out.shape == tuple(expected.shape), f"output shape {out.shape}, torch {tuple(expected.shape)}"
    assert_close(out, expected, atol=atol, rtol=rtol, msg="forward")
    upstream = rand(tuple(expected.shape), seed=seed)
    out.backward(upstream)
    expected.backward(torch.tensor(upstream))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert_close(a.grad, b.grad, atol=atol, rtol=rtol, msg=f"gradient of input {i}")
    return ours, theirs
