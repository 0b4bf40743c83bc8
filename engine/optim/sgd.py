"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay (PyTorch's rules)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from engine import hooks as _hooks
from engine.backend import get_array_module
from engine.optim.optimizer import Optimizer, required
from engine.tensor import Tensor

_multiply, _add = np.multiply, np.add
_EMPTY: dict = {}  # the state of a parameter the optimizer has not seen (read only)


class SGD(Optimizer):
    """``torch.optim.SGD``: with g = grad + weight_decay·p, b = momentum·b + (1 − dampening)·g (b = g on the first
    step), the update is p −= lr·(g + momentum·b) with Nesterov, else p −= lr·b (p −= lr·g without momentum)."""

    def __init__(self, params: Iterable[Any], lr: float = required, momentum: float = 0, dampening: float = 0,  # type: ignore[assignment]
                 nesterov: bool = False, weight_decay: float = 0) -> None:
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, nesterov=nesterov,
                                      weight_decay=weight_decay))

    def _validate_group(self, group: dict[str, Any]) -> None:
        if group["lr"] < 0:
            raise ValueError(f"invalid learning rate: {group['lr']}")
        if group["momentum"] < 0:
            raise ValueError(f"invalid momentum value: {group['momentum']}")
        if group["weight_decay"] < 0:
            raise ValueError(f"invalid weight_decay value: {group['weight_decay']}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        nesterov, weight_decay = group["nesterov"], group["weight_decay"]
        for p in params:
            data, grad = p._data, p.grad._data
            xp = get_array_module(data)
            direction, product = self._scratch_for(p)
            if weight_decay != 0:
                xp.multiply(data, weight_decay, out=direction)
                grad = xp.add(grad, direction, out=direction)
            if momentum != 0:
                state = self.state.setdefault(p, {})
                buffer = state.get("momentum_buffer")
                if buffer is not None and type(buffer._data) is not type(data):
                    self._follow_device(p, state)
                    buffer = state["momentum_buffer"]
                if buffer is None:
                    buffer = state["momentum_buffer"] = self._state_array(p)
                    xp.copyto(buffer._data, grad)
                else:
                    xp.multiply(buffer._data, momentum, out=buffer._data)
                    if dampening != 0:
                        xp.multiply(grad, 1 - dampening, out=product)
                        xp.add(buffer._data, product, out=buffer._data)
                    else:
                        xp.add(buffer._data, grad, out=buffer._data)
                if nesterov:
                    xp.multiply(buffer._data, momentum, out=product)
                    grad = xp.add(grad, product, out=direction)
                else:
                    grad = buffer._data
            xp.multiply(grad, -lr, out=product)
            xp.add(data, product, out=data)

    def replay_kernel(self, node: Any) -> Callable[..., Any] | None:
        """For a traced graph's step node (``node.run``: the update, then ``mark_step_end``): when every group has
        momentum and no weight decay, dampening or Nesterov, and every parameter with a gradient has its momentum
        buffer and lives in host memory (all checked per call, before anything is updated; else ``node.run``),
        ``_update_group``'s NumPy calls on the same arrays without its per-parameter branches. Observed steps take
        ``node.run``."""
        if type(self) is not SGD:
            return None
        generic, groups, state, scratch = node.run, self.param_groups, self.state, self._scratch_for

        def run(*params: Any) -> None:
            if _hooks.optimizer_observed:
                return generic(*params)
            for group in groups:
                if (group["weight_decay"] != 0 or group["dampening"] != 0 or group["nesterov"]
                        or group["momentum"] == 0):
                    return generic(*params)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    buffer = state.get(p, _EMPTY).get("momentum_buffer")
                    if buffer is None or type(buffer._data) is not np.ndarray or type(p._data) is not np.ndarray:
                        return generic(*params)
            for group in groups:
                momentum, step = group["momentum"], -group["lr"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    data, buffer, (_, product) = p._data, state[p]["momentum_buffer"]._data, scratch(p)
                    _multiply(buffer, momentum, out=buffer)
                    _add(buffer, p.grad._data, out=buffer)
                    _multiply(buffer, step, out=product)
                    _add(data, product, out=data)
            _hooks.mark_step_end()
        return run
