"""Fixtures of the torch watch() tests: one thread (torch's and BLAS's), seeded, and the digits data."""
from __future__ import annotations

import pytest
import torch

import engine


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models gain nothing from threads, and one keeps each run's arithmetic, and so its alerts, the same."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def digits():
    """((x_train, y_train), (x_test, y_test)) as torch tensors: float32 (n, 64) in [0, 1] and int64 labels."""
    (x_train, y_train), (x_test, y_test) = engine.datasets.load_digits(seed=0)
    return ((torch.from_numpy(x_train).float(), torch.from_numpy(y_train).long()),
            (torch.from_numpy(x_test).float(), torch.from_numpy(y_test).long()))
