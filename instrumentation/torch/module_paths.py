"""Which module an op belongs to: the module running now (forward), or the one whose forward created the autograd
node running now (backward, by the node's sequence number)."""
from __future__ import annotations

import functools
from bisect import bisect_right
from typing import Any

from torch._C._autograd import _get_sequence_nr

ROOT = ""  # the watched model itself, as the engine names it


class ModulePaths:
    """Forward pre-hooks and hooks on every module of ``model`` keep a stack of dotted paths (``current()``) and,
    as modules are entered and left, the autograd sequence number then with the path from there on: a node's
    sequence number is taken when its forward op runs, so ``at_sequence(node._sequence_nr())`` is the module
    that ran it. The marks are kept from the first forward of the current step (``step``), a few per module call."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.stack = [ROOT]
        self._sequence_numbers: list[int] = []
        self._paths: list[str] = []
        self._handles: list[Any] = []
        self._marked_step: int | None = None

    def attach(self, step_of: Any) -> None:
        """Hook every module; ``step_of()`` is the step in progress (the marks start again at a new one)."""
        self._step_of = step_of
        for path, module in self.model.named_modules():
            self._handles.append(module.register_forward_pre_hook(functools.partial(self._enter, path)))
            self._handles.append(module.register_forward_hook(functools.partial(self._leave, path), always_call=True))

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.stack = [ROOT]

    def current(self) -> str:
        return self.stack[-1]

    def at_sequence(self, sequence_number: int) -> str:
        """The module that was running when the autograd sequence number was ``sequence_number``."""
        index = bisect_right(self._sequence_numbers, sequence_number) - 1
        return self._paths[index] if index >= 0 else ROOT

    def _enter(self, path: str, module: Any, args: Any) -> None:
        if path == ROOT:
            step = self._step_of()
            if step != self._marked_step:  # a new step: the graphs of the ones before are gone
                self._marked_step = step
                self._sequence_numbers.clear()
                self._paths.clear()
        self.stack.append(path)
        self._mark(path)

    def _leave(self, path: str, module: Any, args: Any, output: Any) -> None:
        if len(self.stack) > 1:
            self.stack.pop()
        self._mark(self.stack[-1])

    def _mark(self, path: str) -> None:
        number = _get_sequence_nr()
        numbers = self._sequence_numbers
        if numbers and numbers[-1] == number:
            self._paths[-1] = path
        else:
            numbers.append(number)
            self._paths.append(path)
