"""check_numerics for torch models: the first aten op (forward or backward) whose output is not finite, from a
``TorchDispatchMode``, and the parameters after each optimizer step, reported as the engine's ``NumericsObserver``
reports them."""
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
# Ops not checked: their outputs hold no value their inputs did not (a NaN there was found where it was made), or
# no value at all yet (empty: uninitialised memory, any bits). Views are not checked either (``OpOverload.is_view``).
UNCHECKED_OPS = frozenset({
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
    "aten::relu", "aten::relu_", "aten::threshold_backward", "aten::max_pool2d_with_indices",
    "aten::max_pool2d_with_indices_backward", "aten::clone", "aten::copy_", "aten::zero_", "aten::zeros_like",
    "aten::ones_like", "aten::cat", "aten::stack", "aten::index_select", "aten::gather", "aten::embedding",
    "aten::_unsafe_view", "aten::contiguous"})


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
    """Every aten op's outputs handed to ``check``, but those of ``UNCHECKED_OPS`` and views (decided once per op)."""

    def __init__(self, check: Callable[..., None]) -> None:
        super().__init__()
        self.check = check
        self.checked: dict[Any, bool] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        checked = self.checked.get(func)
        if checked is None:
            checked = self.checked[func] = not func.is_view and func._schema.name not in UNCHECKED_OPS
        if checked:
            self.check(func, args, out)
        return out


class TorchNumerics(NumericsObserver):
    """A ``NumericsObserver`` whose ops come from a dispatch mode, entered at ``attach()`` and left at ``detach()``
    (leave any mode entered after it first) and, a recorder of the step clock, left for the optimizer's step: after
    it, ``Watch`` checks the parameters (``check_parameters``: the op is ``<Optimizer>.step``, the module the
    parameter's name, as the engine reports it). An op is named as torch names it (``aten::log``), its module by
    ``ModulePaths``, its phase ``backward`` while an autograd node runs."""

    def __init__(self, report: Callable[[Alert], None], raise_error: bool, model: Any, clock: Any) -> None:
        super().__init__(report, raise_error)
        self.clock = clock
        self.paths = ModulePaths(model)
        self._mode: _Mode | None = None
        self._entered = False

    def attach(self) -> None:
        if self._mode is not None:
            return
        self.paths.attach(self.clock.current_step)
        self._mode = _Mode(self.check)
        self._enter()
        self.clock.add_recorder(self)

    def detach(self) -> None:
        self.clock.remove_recorder(self)
        self._leave()
        self._mode = None
        self.paths.detach()

    def _enter(self) -> None:
        if self._mode is not None and not self._entered:
            self._mode.__enter__()
            self._entered = True

    def _leave(self) -> None:
        if self._entered:
            self._entered = False
            self._mode.__exit__(None, None, None)

    def optimizer_step_begin(self, event: Any) -> None:
        self._leave()

    def optimizer_step_end(self, event: Any) -> None:
        self._enter()

    def check(self, func: Any, args: tuple, out: Any) -> None:
        if self.found is not None:
            return
        outputs = _tensors(out)
        if not any(map(has_nonfinite, outputs)):
            return
        node = _current_node()
        if node is not None:
            phase, module = "backward", self.paths.at_sequence(node._sequence_nr())
        else:
            phase, module = "forward", self.paths.current()
        inputs = tuple(to_numpy(tensor) for tensor in _tensors(args))
        self.fail(nonfinite_alert(func._schema.name, module, phase, self.clock.current_step(), inputs,
                                  tuple(to_numpy(tensor) for tensor in outputs)))
