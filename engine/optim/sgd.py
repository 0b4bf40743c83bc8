"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay (PyTorch's rules)."""
from __future__ import annotations

from typing import Any, Iterable

from engine.backend import get_array_module

from engine.optim.optimizer import Optimizer, required
from engine.tensor import Tensor


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
