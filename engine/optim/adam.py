"""Adam (L2 weight decay, optional AMSGrad) and AdamW (decoupled weight decay), as in PyTorch."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from engine.backend import get_array_module
from engine.optim.optimizer import Optimizer
from engine.tensor import Tensor


class Adam(Optimizer):
    """``torch.optim.Adam``: m ← m + (1 − β1)(g − m), v ← β2·v + (1 − β2)·g², and
    p ← p − lr/(1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + eps), with g = grad + weight_decay·p (L2 penalty);
    AMSGrad uses the running maximum of v."""

    cuda_kernel = "adam"  # kernels/adam.cu: every CuPy parameter in one launch (as engine.op.Function.cuda_kernel)

    _decoupled_weight_decay = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad))

    def _validate_group(self, group: dict[str, Any]) -> None:
        beta1, beta2 = group["betas"]
        if group["lr"] < 0:
            raise ValueError(f"invalid learning rate: {group['lr']}")
        if group["eps"] < 0:
            raise ValueError(f"invalid epsilon value: {group['eps']}")
        if not 0.0 <= beta1 < 1.0 or not 0.0 <= beta2 < 1.0:
            raise ValueError(f"invalid beta parameters {group['betas']}: each must be in [0, 1)")
        if group["weight_decay"] < 0:
            raise ValueError(f"invalid weight_decay value: {group['weight_decay']}")

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        lr, eps, weight_decay, amsgrad = group["lr"], group["eps"], group["weight_decay"], group["amsgrad"]
        beta1, beta2 = group["betas"]
        on_device: dict[tuple, list[Tensor]] = {}
        for p in params:
            state = self.state.get(p)
            if state is None:
                state = self.state[p] = {"step": 0, "exp_avg": self._state_array(p),
                                         "exp_avg_sq": self._state_array(p)}
            data, grad = p._data, p.grad._data
            if type(state["exp_avg"]._data) is not type(data):
                self._follow_device(p, state)
            if type(data) is not np.ndarray:  # GPU parameters: one fused launch per (device, dtype, step) below
                on_device.setdefault((str(p.device), data.dtype, state["step"]), []).append(p)
                continue
            exp_avg, exp_avg_sq = state["exp_avg"]._data, state["exp_avg_sq"]._data
            first, second = self._scratch_for(p)
            state["step"] = step = state["step"] + 1
            if weight_decay != 0:
                if self._decoupled_weight_decay:
                    np.multiply(data, 1 - lr * weight_decay, out=data)
                else:
                    np.multiply(data, weight_decay, out=first)
                    grad = np.add(grad, first, out=first)
            # NOTE: the operation order follows torch's kernels (lerp; addcmul = v + (c·g)·g;
            # addcdiv = p + (s·m)/d) so that results agree with torch.optim to the last bit or two.
            np.subtract(grad, exp_avg, out=second)
            np.multiply(second, 1 - beta1, out=second)
            np.add(exp_avg, second, out=exp_avg)
            np.multiply(exp_avg_sq, beta2, out=exp_avg_sq)
            np.multiply(grad, 1 - beta2, out=second)
            np.multiply(second, grad, out=second)
            np.add(exp_avg_sq, second, out=exp_avg_sq)
            step_size = lr / (1 - beta1 ** step)
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            if amsgrad:
                if "max_exp_avg_sq" not in state:
                    state["max_exp_avg_sq"] = self._state_array(p)
                max_exp_avg_sq = state["max_exp_avg_sq"]._data
                np.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                np.sqrt(max_exp_avg_sq, out=second)
            else:
                np.sqrt(exp_avg_sq, out=second)
            np.divide(second, bias_correction2_sqrt, out=second)
            np.add(second, eps, out=second)
            np.multiply(exp_avg, -step_size, out=first)
            np.divide(first, second, out=first)
            np.add(data, first, out=data)
        for (_, _, step), same in on_device.items():
            self._update_fused(group, same, step + 1)

    def _update_fused(self, group: dict[str, Any], params: list[Tensor], step: int) -> None:
        """The CuPy branch: every parameter of ``params`` (one device, dtype and step count) in one kernel launch."""
        from engine.backend.cuda import kernels
        beta1, beta2 = group["betas"]
        states = [self.state[p] for p in params]
        amsgrad_max = None
        if group["amsgrad"]:
            for p, state in zip(params, states):
                if "max_exp_avg_sq" not in state:
                    state["max_exp_avg_sq"] = self._state_array(p)
            amsgrad_max = [state["max_exp_avg_sq"]._data for state in states]
        xp = get_array_module(params[0]._data)
        grads = [xp.ascontiguousarray(p.grad._data, dtype=p._data.dtype) for p in params]  # no copy when it is so
        kernels.adam_step([p._data for p in params], grads, [s["exp_avg"]._data for s in states],
                          [s["exp_avg_sq"]._data for s in states], lr=group["lr"], beta1=beta1, beta2=beta2,
                          eps=group["eps"], weight_decay=group["weight_decay"], step=step,
                          decoupled=self._decoupled_weight_decay, amsgrad_max=amsgrad_max)
        for state in states:
            state["step"] = step


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with decoupled weight decay, p ← p·(1 − lr·weight_decay) before the update."""

    _decoupled_weight_decay = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)
