"""The engine's random state: one seeded generator that layers, dropout and init draw from.

In a data-parallel job (``engine.distributed.init()``) dropout draws from a stream of its own, seeded by
(seed, rank) (``set_dropout_stream``): replicas drop different units while initialisation, which keeps drawing from
the shared generator, agrees across ranks (``DistributedDataParallel`` broadcasts the parameters anyway)."""
from __future__ import annotations

import numpy as np

from typing import Any

_seed = 0
_generator = np.random.default_rng(_seed)
_device_generators: dict[int, Any] = {}  # CUDA device index -> cupy Generator, made on first use
_dropout_rank: int | None = None  # set by set_dropout_stream: dropout's own stream, seeded by (seed, rank)
_dropout_generators: dict[Any, Any] = {}  # "cpu" or a CUDA device index -> the dropout stream's generator


def manual_seed(seed: int) -> np.random.Generator:
    """Seed every random draw of the engine (host and GPU); two runs with the same seed are bit-identical."""
    global _generator, _seed
    _seed = int(seed)
    _generator = np.random.default_rng(_seed)
    _device_generators.clear()
    _dropout_generators.clear()
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


def set_dropout_stream(rank: int | None) -> None:
    """Draw dropout masks from a stream seeded by (seed, ``rank``) (None: from the shared generator again)."""
    global _dropout_rank
    _dropout_rank = None if rank is None else int(rank)
    _dropout_generators.clear()


def dropout_generator_for(array: Any) -> Any:
    """The generator dropout draws its mask for ``array`` with: ``generator_for(array)`` unless a dropout stream is
    set; then that stream, restarted by ``manual_seed`` like the others."""
    if _dropout_rank is None:
        return generator_for(array)
    key = "cpu" if type(array) is np.ndarray else array.device.id
    found = _dropout_generators.get(key)
    if found is None:
        seeds = np.random.SeedSequence([_seed, _dropout_rank] + ([] if key == "cpu" else [key]))
        if key == "cpu":
            found = np.random.default_rng(seeds)
        else:
            import cupy
            with array.device:
                found = cupy.random.default_rng(int(seeds.generate_state(1)[0]))
        _dropout_generators[key] = found
    return found
