"""tests/gpu: run only where CUDA works (CuPy imports and a device answers); elsewhere each test is skipped with the
reason CUDA is unavailable. Every test collected here is marked ``gpu`` (select with ``-m gpu``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = engine.cuda.unavailable_reason()
    for item in items:
        if _HERE not in Path(str(item.path)).parents:
            continue
        item.add_marker(pytest.mark.gpu)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"no CUDA device/CuPy: {reason}"))


@pytest.fixture
def cp():
    """The cupy module (only reached when CUDA is available)."""
    import cupy
    return cupy


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
