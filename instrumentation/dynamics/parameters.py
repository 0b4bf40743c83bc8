"""Per-parameter gradient norms and update ratios ‖Δw‖/‖w‖, from snapshots taken around optimizer.step()."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class ParameterStats:
    """One optimizer step: for each parameter that had a gradient, ‖g‖₂, ‖w‖₂ before the step and ‖Δw‖₂."""

    step: int
    names: tuple[str, ...]
    grad_norms: np.ndarray
    weight_norms: np.ndarray
    update_norms: np.ndarray

    @property
    def update_ratios(self) -> np.ndarray:
        """‖Δw‖/‖w‖ with w the weights the update was applied to (inf where ‖w‖ = 0 and Δw ≠ 0, nan for 0/0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.update_norms / self.weight_norms


class ParameterTracker:
    """Copies weights and gradients into preallocated float64 buffers at ``begin`` and measures the change at
    ``end``: whatever the optimizer did (momentum, weight decay, Adam's moments) is in Δw.

    The buffers hold 3 × 8 bytes per parameter element; they live outside the engine's allocator. Work per
    step: three ``np.copyto`` per parameter and a few whole-buffer reductions (``np.add.reduceat``).
    """

    def __init__(self, named_parameters: list[tuple[str, Any]]) -> None:
        self.names = tuple(name for name, _ in named_parameters)
        self.params = [param for _, param in named_parameters]
        sizes = [int(param.numpy().size) for param in self.params]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp) if sizes else np.zeros(0, np.intp)
        total = int(sum(sizes))
        self._before = np.zeros(total)
        self._after = np.zeros(total)
        self._grads = np.zeros(total)
        self._views = [(self._before[o:o + n], self._after[o:o + n], self._grads[o:o + n])
                       for o, n in zip(self.offsets.tolist(), sizes)]
        self._active = np.zeros(len(self.params), bool)
        self._step: int | None = None

    def begin(self, step: int) -> None:
        """Snapshot weights and gradients before the optimizer updates them."""
        active = self._active
        for index, (param, (before, _, grads)) in enumerate(zip(self.params, self._views)):
            grad = param.grad
            if grad is None:
                active[index] = False
                continue
            active[index] = True
            np.copyto(before, param.numpy().reshape(-1))
            np.copyto(grads, grad.numpy().reshape(-1))
        self._step = step

    def end(self) -> ParameterStats | None:
        """The stats of the step begun last (None without a ``begin``); parameters without a gradient are left out."""
        if self._step is None or not len(self.params):
            return None
        step, self._step = self._step, None
        active = self._active
        for index, (param, (before, after, _)) in enumerate(zip(self.params, self._views)):
            if active[index]:
                np.subtract(param.numpy().reshape(-1), before, out=after)
        grad_sq = _segment_sums_of_squares(self._grads, self.offsets)
        update_sq = _segment_sums_of_squares(self._after, self.offsets)
        weight_sq = _segment_sums_of_squares(self._before, self.offsets)
        keep = np.flatnonzero(active)
        return ParameterStats(step, tuple(self.names[i] for i in keep), np.sqrt(grad_sq[keep]),
                              np.sqrt(weight_sq[keep]), np.sqrt(update_sq[keep]))


def _segment_sums_of_squares(buffer: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    # NOTE: squares in place: the buffer is refilled before it is read again.
    np.multiply(buffer, buffer, out=buffer)
    return np.add.reduceat(buffer, offsets)
