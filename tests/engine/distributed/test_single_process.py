"""engine.distributed without init(): a group of one where collectives are identity operations, DDP only forwards,
the errors that name the bad argument, and init()'s message when mpi4py is missing."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import engine
import engine.distributed as dist
from engine import nn


def test_a_process_without_init_is_rank_0_of_1_and_collectives_are_identities():
    assert not dist.is_initialized() and dist.rank() == 0 and dist.world_size() == 1
    x = np.arange(6.0).reshape(2, 3)
    for op in ("sum", "mean", "max", "min"):
        assert dist.all_reduce(x, op) is x
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(2, 3))
    t = engine.tensor(np.ones(3))
    assert dist.broadcast(t) is t
    gathered = dist.all_gather(np.array([1, 2]))
    assert gathered.shape == (1, 2) and gathered.tolist() == [[1, 2]]
    dist.barrier()


@pytest.mark.parametrize("call, error, message", [
    (lambda: dist.all_reduce(np.ones(2), "prod"), ValueError, "op must be one of sum, mean, max, min, got 'prod'"),
    (lambda: dist.all_reduce(np.ones(2, dtype=np.int64), "mean"), TypeError, "needs a floating-point array"),
    (lambda: dist.all_reduce([1.0, 2.0]), TypeError, "takes an engine Tensor or an array"),
    (lambda: dist.broadcast(np.ones(2), root=1), ValueError, r"root must be a rank in \[0, 1\), got 1"),
    (lambda: dist.DistributedDataParallel(lambda x: x), TypeError, "wraps an engine.nn.Module, got function"),
    (lambda: dist.DistributedDataParallel(nn.Linear(2, 2), bucket_cap_mb=0), ValueError, "bucket_cap_mb must be"),
    (lambda: dist.at_abort(3), TypeError, "at_abort takes a callable, got int"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_ddp_without_a_group_forwards_and_delegates():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    ddp = dist.DistributedDataParallel(model)
    x = engine.tensor(np.ones((2, 3), dtype=np.float32))
    np.testing.assert_array_equal(ddp(x).numpy(), model(x).numpy())
    assert [n for n, _ in ddp.named_parameters()] == [n for n, _ in model.named_parameters()]
    assert all(a is b for a, b in zip(ddp.parameters(), model.parameters()))
    assert ddp.state_dict().keys() == model.state_dict().keys()
    assert ddp.module is model and ddp.bucket_sizes_bytes == []
    with ddp.no_sync():
        ddp(x).sum().backward()
    assert model[0].weight.grad is not None


def test_init_without_mpi4py_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'flowscope\[mpi\]'"):
        dist.init()
    assert not dist.is_initialized()


def test_the_dropout_stream_per_rank_differs_while_init_draws_agree():
    from engine import random as engine_random
    masks, weights = [], []
    try:
        for rank in (0, 1):
            engine_random.set_dropout_stream(rank)
            engine.manual_seed(5)
            weights.append(nn.Linear(8, 8).weight.numpy().copy())
            masks.append(nn.functional.dropout(engine.tensor(np.ones(1000)), 0.5).numpy())
            weights.append(nn.Linear(8, 8).weight.numpy().copy())  # the shared generator did not move for dropout
        engine_random.set_dropout_stream(1)
        engine.manual_seed(5)
        nn.Linear(8, 8)
        again = nn.functional.dropout(engine.tensor(np.ones(1000)), 0.5).numpy()
    finally:
        engine_random.set_dropout_stream(None)
    np.testing.assert_array_equal(weights[0], weights[2])
    np.testing.assert_array_equal(weights[1], weights[3])
    assert (masks[0] != masks[1]).mean() > 0.3  # independent masks disagree on about half the units
    np.testing.assert_array_equal(again, masks[1])  # manual_seed restarts the rank's dropout stream
