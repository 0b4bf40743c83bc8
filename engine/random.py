"""The engine's random state: one seeded generator that layers, dropout and init draw from."""
from __future__ import annotations

import numpy as np

_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> np.random.Generator:
    """Seed every random draw of the engine; two runs with the same seed are bit-identical."""
    global _generator
    _generator = np.random.default_rng(int(seed))
    return _generator


def generator() -> np.random.Generator:
    return _generator
