"""A stand-in for ``engine.distributed`` with the contract's functions (for the unit tests: rank and world size as
given, ``all_gather`` stacks this rank's array with identical peers', ``at_abort`` keeps what was registered)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


class FakeDistributed:
    def __init__(self, rank: int, world_size: int, initialized: bool = True) -> None:
        self._rank, self._world_size, self._initialized = rank, world_size, initialized
        self.aborts: list[Callable[[], Any]] = []
        self.gathers = 0

    def is_initialized(self) -> bool:
        return self._initialized

    def rank(self) -> int:
        return self._rank

    def world_size(self) -> int:
        return self._world_size

    def all_gather(self, array: Any) -> np.ndarray:
        self.gathers += 1
        return np.stack([np.asarray(array)] * self._world_size)

    def at_abort(self, fn: Callable[[], Any]) -> None:
        self.aborts.append(fn)

    def abort(self) -> None:
        """What the engine does before aborting the job: every registered callable."""
        for fn in self.aborts:
            fn()
