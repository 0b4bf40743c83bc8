"""Fixtures of the watch() tests: one BLAS thread (as tests/engine/test_training.py) and the digits data."""
from __future__ import annotations

import pytest

import engine


@pytest.fixture(autouse=True)
def one_blas_thread():
    """Tiny matmuls gain nothing from BLAS threads, and on a shared machine OpenBLAS's spinning threads can slow
    them badly; one thread also keeps each run's arithmetic, and so its alerts, identical from run to run."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(1):
        yield


@pytest.fixture(scope="session")
def digits():
    return engine.datasets.load_digits(seed=0)
