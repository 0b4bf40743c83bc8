"""Errors an observer raises on purpose to stop the computation (they pass through ``engine.hooks``)."""
from __future__ import annotations

from engine.hooks import PropagatingError


class NonFiniteError(PropagatingError, FloatingPointError):
    """An op produced NaN/Inf: ``op``, ``module`` (dotted path), ``phase`` and ``step`` say where it first did."""

    def __init__(self, message: str, *, op: str = "", module: str = "", phase: str = "", step: int = 0) -> None:
        super().__init__(message)
        self.op, self.module, self.phase, self.step = op, module, phase, int(step)
