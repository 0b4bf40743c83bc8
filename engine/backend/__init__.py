"""Array backends: NumPy on the CPU, CuPy on CUDA devices; ops pick ``xp`` from their data once."""
from __future__ import annotations

from engine.backend.numpy_backend import device_of, get_array_module

__all__ = ["device_of", "get_array_module"]
