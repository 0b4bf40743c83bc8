"""Backend selection from the data: numpy arrays run on the CPU, cupy arrays on their CUDA device."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backend import cuda_backend


def get_array_module(*arrays: Any) -> Any:
    """``numpy`` for host arrays, ``cupy`` when any of ``arrays`` is a device array (chainer's ``get_array_module``)."""
    cp = cuda_backend.cupy if cuda_backend.in_use else None
    if cp is not None:
        for array in arrays:
            if isinstance(array, cp.ndarray):
                return cp
    return np


def is_device_array(array: Any) -> bool:
    return cuda_backend.cupy is not None and isinstance(array, cuda_backend.cupy.ndarray)


def device_of(array: Any) -> str:
    """The device of ``array`` as a string: "cpu" or "cuda:N"."""
    if type(array) is np.ndarray or cuda_backend.cupy is None:
        return "cpu"
    if isinstance(array, cuda_backend.cupy.ndarray):
        return f"cuda:{array.device.id}"
    return "cpu"
