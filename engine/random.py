"""The engine's random state: one seeded generator that layers, dropout and init draw from."""
from __future__ import annotations

import numpy as np

from typing import Any

_seed = 0
_generator = np.random.default_rng(_seed)
_device_generators: dict[int, Any] = {}  # CUDA device index -> cupy Generator, made on first use


def manual_seed(seed: int) -> np.random.Generator:
    """Seed every random draw of the engine (host and GPU); two runs with the same seed are bit-identical."""
    global _generator, _seed
    _seed = int(seed)
    _generator = np.random.default_rng(_seed)
    _device_generators.clear()
    return _generator


def generator() -> np.random.Generator:
    return _generator


def generator_for(array: Any) -> Any:
    """The generator to draw with next to ``array``: the host one, or its CUDA device's (seeded by manual_seed)."""
    if type(array) is np.ndarray:
        return _generator
    import cupy  # only reached with a CuPy array in hand
    index = array.device.id
    found = _device_generators.get(index)
    if found is None:
        with array.device:
            found = _device_generators[index] = cupy.random.default_rng(_seed + index)
    return found
