"""Backend selection from the data: numpy arrays run on the CPU, cupy arrays on their CUDA device."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backend import cuda_backend


def get_array_module(array: Any) -> Any:
    """``numpy`` for host arrays, ``cupy`` for device arrays (chainer's ``get_array_module``)."""
    if type(array) is np.ndarray or cuda_backend.cupy is None:
        return np
    return cuda_backend.cupy.get_array_module(array)


def device_of(array: Any) -> str:
    if type(array) is np.ndarray or cuda_backend.cupy is None:
        return "cpu"
    if isinstance(array, cuda_backend.cupy.ndarray):
        return f"cuda:{array.device.id}"
    return "cpu"
