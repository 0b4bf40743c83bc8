"""watch() of a torch model: the engine's ``Watch`` with torch's step clock, parameters, layer outputs and numerics."""
from __future__ import annotations

from typing import Any

import torch

from instrumentation.dynamics import DynamicsThresholds, Watch
from instrumentation.torch.activations import torch_activation_stats
from instrumentation.torch.arrays import TorchArray
from instrumentation.torch.clock import TorchSteps
from instrumentation.torch.numerics import TorchNumerics


class TorchWatch(Watch):
    """``Watch`` over a ``torch.nn.Module``: steps from ``TorchSteps`` (attached: closed with the handle),
    parameters as NumPy arrays (views of CPU tensors), layer outputs reduced by torch first, numerics from
    ``TorchNumerics``."""

    _grad_enabled = staticmethod(torch.is_grad_enabled)
    _activation_stats = staticmethod(torch_activation_stats)

    def log_loss(self, value: Any, step: int | None = None) -> None:
        """``Watch.log_loss``; a tensor is read without its graph (``float()`` of one that requires grad warns)."""
        super().log_loss(value.detach().item() if isinstance(value, torch.Tensor) else value, step)

    def _parameters_of(self, model: Any) -> list[tuple[str, Any]]:
        return [(name, TorchArray(param)) for name, param in model.named_parameters()]

    def _numerics_observer(self, raise_error: bool) -> TorchNumerics:
        return TorchNumerics(self._report, raise_error, self.model, self._hooks)


def watch_torch(model: Any, writer: Any, *, budget: float, every: int | None, histograms_every: int, optimizer: Any,
                check_numerics: bool, raise_on_nonfinite: bool, thresholds: DynamicsThresholds | None, memory: bool,
                capture_requests: bool, ranks: bool | None) -> TorchWatch:
    """``instrumentation.watch`` for a torch model (its arguments checked there). Not yet for torch models: the
    memory tracker, Capture requests and the rank monitor (``memory`` and ``capture_requests`` are ignored, the
    statistics get the whole budget; ``ranks=True`` raises)."""
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"watch: optimizer must be a torch.optim.Optimizer for a torch model, got "
                        f"{type(optimizer).__name__}")
    if ranks:
        raise NotImplementedError("watch: ranks=True (the RankMonitor) is not available for torch models yet")
    del memory, capture_requests  # NOTE: engine-only for now (docs/torch.md)
    clock = TorchSteps(model, optimizer)
    try:
        handle = TorchWatch(model, writer, every=every, histograms_every=histograms_every, optimizer=optimizer,
                            check_numerics=check_numerics, raise_on_nonfinite=raise_on_nonfinite,
                            thresholds=thresholds or DynamicsThresholds(), budget=budget, clock=clock)
    except BaseException:
        clock.close()
        raise
    handle.attach(clock)
    return handle
