"""The host buffer MPI reads and writes for an array: the array itself when MPI can use it in place, else a
contiguous host copy that is written back afterwards (a non-contiguous NumPy view, or a CUDA device array when MPI
is not CUDA-aware: host staging)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backend import cuda_backend, is_device_array


class Staged:
    """``buffer``: what to hand to MPI; ``finish()`` copies it back into ``array`` when it was a copy."""

    __slots__ = ("array", "buffer", "copied")

    def __init__(self, array: Any, cuda_aware: bool) -> None:
        self.array = array
        if type(array) is np.ndarray or not is_device_array(array):
            self.copied = not array.flags.c_contiguous
            self.buffer = np.ascontiguousarray(array) if self.copied else array
        elif cuda_aware:
            self.copied = not array.flags.c_contiguous
            self.buffer = cuda_backend.cupy.ascontiguousarray(array) if self.copied else array
        else:
            self.copied = True
            self.buffer = np.ascontiguousarray(cuda_backend.to_host(array))

    def finish(self) -> Any:
        if self.copied:
            copy_from_host(self.array, self.buffer)
        return self.array


def copy_from_host(array: Any, host: np.ndarray) -> None:
    """``array[...] = host`` for a NumPy or a device array (a device one gets a host-to-device copy)."""
    if type(array) is np.ndarray or not is_device_array(array):
        array[...] = host.reshape(array.shape)
    else:
        array[...] = cuda_backend.cupy.asarray(host.reshape(array.shape))


def host_copy(array: Any) -> np.ndarray:
    """``array`` as a host array (itself for NumPy; a device-to-host copy otherwise)."""
    return array if type(array) is np.ndarray or not is_device_array(array) else cuda_backend.to_host(array)
