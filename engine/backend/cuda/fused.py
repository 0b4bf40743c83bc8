"""A fused elementwise chain on device arrays as one launch of its generated kernel (fused_source.py), compiled
through ``kernels.code_module`` (NVRTC via ``cupy.RawModule``, cached per source and device)."""
from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np

from engine.backend.cuda import fused_source


def _kernels() -> Any:
    return importlib.import_module("engine.backend.cuda.kernels")  # as loaded (the tests load it with an emulator)


class FusedKernel:
    """``__call__(arrays)`` returns the chain's result from one launch, or None when the generator does not cover
    the chain or these inputs (``fallback`` says why; the caller then runs the ufunc chain)."""

    def __init__(self, steps: fused_source.Steps, shape: tuple[int, ...], dtype: Any) -> None:
        self.steps, self.shape, self.dtype = steps, tuple(shape), np.dtype(dtype)
        self.size = math.prod(self.shape)
        self.uncovered = fused_source.covers(steps, self.dtype)
        self.launches = 0
        self.fallback: str | None = self.uncovered
        self._functions: dict[tuple, Any] = {}  # (layouts, device) -> compiled kernel

    def __call__(self, arrays: tuple[Any, ...]) -> Any:
        if self.uncovered is not None:
            return None
        layouts = []
        for k, array in enumerate(arrays):
            found = fused_source.layout(array, self.shape, self.dtype)
            if found is None:
                self.fallback = (f"input {k}: {array.dtype} {tuple(array.shape)} strides {tuple(array.strides)} for "
                                 f"a {self.dtype} {self.shape} chain")
                return None
            layouts.append(found)
        kernels = _kernels()
        cp = kernels.cp
        key = (tuple(layouts), cp.cuda.Device().id)
        function = self._functions.get(key)
        if function is None:
            name, code = fused_source.kernel(self.steps, self.dtype, layouts, self.shape)
            function = self._functions[key] = kernels.code_module(code).get_function(name)
        out = cp.empty(self.shape, self.dtype)
        if self.size:
            function((kernels._blocks(self.size),), (kernels.THREADS,), (*arrays, out, np.int64(self.size)))
        self.launches += 1
        self.fallback = None
        return out
