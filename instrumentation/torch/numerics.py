"""check_numerics for torch models: the first aten op (forward, backward or optimizer) whose output is not finite,
from a ``TorchDispatchMode``, reported as the engine's ``NumericsObserver`` reports it."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from instrumentation.dynamics.numerics import NumericsObserver, nonfinite_alert
from instrumentation.format.alerts import Alert
from instrumentation.torch.arrays import to_numpy
from instrumentation.torch.module_paths import ModulePaths

_current_node = torch._C._current_autograd_node
_isfinite = math.isfinite
_WIDENED = {torch.float16: torch.float32, torch.bfloat16: torch.float32}


def _tensors(value: Any) -> tuple[Any, ...]:
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, (tuple, list)):
        return tuple(item for item in value if isinstance(item, torch.Tensor))
    return ()


def has_nonfinite(tensor: Any) -> bool:
    """Cheap test first: the sum is finite when no element is NaN/Inf (inf - inf is NaN); when it is not — a NaN/Inf,
    or a sum that overflows — the element-wise check decides."""
    if not tensor.is_floating_point() or tensor.numel() == 0:
        return False
    if _isfinite(tensor.sum(dtype=_WIDENED.get(tensor.dtype)).item()):
        return False
    return not bool(torch.isfinite(tensor).all())


class _Mode(TorchDispatchMode):
    """Every aten op's outputs handed to ``check`` (views are skipped: they show what their base holds)."""

    def __init__(self, check: Callable[..., None]) -> None:
        super().__init__()
        self.check = check

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            self.check(func, args, out)
        return out


class TorchNumerics(NumericsObserver):
    """A ``NumericsObserver`` whose ops come from a dispatch mode, entered at ``attach()`` and left at ``detach()``
    (leave any mode entered after it first); the op is named as torch names it (``aten::log``), its module by
    ``ModulePaths``, its phase ``backward`` while an autograd node runs, ``optimizer`` inside ``optimizer.step()``."""

    def __init__(self, report: Callable[[Alert], None], raise_error: bool, model: Any, clock: Any) -> None:
        super().__init__(report, raise_error)
        self.clock = clock
        self.paths = ModulePaths(model)
        self._mode: _Mode | None = None

    def attach(self) -> None:
        if self._mode is not None:
            return
        self.paths.attach(self.clock.current_step)
        self._mode = _Mode(self.check)
        self._mode.__enter__()

    def detach(self) -> None:
        mode, self._mode = self._mode, None
        if mode is not None:
            mode.__exit__(None, None, None)
        self.paths.detach()

    def _parameter_of(self, outputs: tuple[Any, ...]) -> str:
        """The name of the parameter an optimizer op wrote (its output's memory), as the engine names it there."""
        addresses = {tensor.data_ptr() for tensor in outputs}
        return next((name for name, param in self.paths.model.named_parameters() if param.data_ptr() in addresses), "")

    def check(self, func: Any, args: tuple, out: Any) -> None:
        if self.found is not None:
            return
        outputs = _tensors(out)
        if not any(map(has_nonfinite, outputs)):
            return
        node = _current_node()
        if node is not None:
            phase, module = "backward", self.paths.at_sequence(node._sequence_nr())
        elif self.clock.in_optimizer:
            phase, module = "optimizer", self._parameter_of(outputs)
        else:
            phase, module = "forward", self.paths.current()
        inputs = tuple(to_numpy(tensor) for tensor in _tensors(args))
        self.fail(nonfinite_alert(func._schema.name, module, phase, self.clock.current_step(), inputs,
                                  tuple(to_numpy(tensor) for tensor in outputs)))
