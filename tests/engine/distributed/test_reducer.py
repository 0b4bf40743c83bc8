"""The DDP reducer in one process against a scripted communicator (the other rank contributes ones): buckets in
reverse parameter order under the cap, launched during backward strictly in index order (to the communication
thread), unused parameters sent as zeros, averages written into .grad (a view of the bucket), device gradients
staged through host memory (the CPU CUDA emulator), the events, a failed AllReduce."""
from __future__ import annotations

import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import hooks, nn
from engine.backend import cuda_backend
from engine.distributed.reducer import Reducer, make_buckets

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import cuda_emulator  # noqa: E402

IN_PLACE, SUM = object(), object()


class Comm:
    """The reducer's communicator, scripted: the other rank contributes ones; the calls are logged."""

    def __init__(self):
        self.log = []

    def Dup(self):
        return self

    def Allreduce(self, send, buffer, op):
        assert send is IN_PLACE and op is SUM and buffer.flags.c_contiguous
        buffer += 1
        self.log.append(buffer.size)


def _group():
    return types.SimpleNamespace(MPI=types.SimpleNamespace(IN_PLACE=IN_PLACE, SUM=SUM), comm=Comm(), rank=0, size=2,
                                 cuda_aware=False)


def _model():
    engine.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4, dtype="float64"), nn.Tanh(), nn.Linear(4, 5, dtype="float64"), nn.Tanh(),
                         nn.Linear(5, 2, dtype="float64"))


def test_buckets_take_parameters_in_reverse_order_under_the_cap_and_split_by_dtype():
    params = [engine.tensor(np.zeros(n, dtype=dtype), requires_grad=True) for n, dtype in
              [(10, np.float32), (4, np.float32), (3, np.float32), (30, np.float32), (2, np.float64), (2, np.float64)]]
    buckets = make_buckets(params, cap_bytes=64)
    index = {id(p): i for i, p in enumerate(params)}
    assert [[index[id(p)] for p in b.params] for b in buckets] == [[5, 4], [3], [2, 1], [0]]
    assert [b.nbytes for b in buckets] == [32, 120, 28, 40]  # a parameter over the cap gets a bucket of its own
    assert buckets[2].offsets == [0, 3]


def test_buckets_launch_during_backward_in_index_order_and_the_average_lands_in_grad():
    model = _model()
    group = _group()
    reducer = Reducer(list(model.parameters()), group, cap_bytes=100)
    x = engine.tensor(np.random.default_rng(1).normal(size=(6, 3)))
    expected = {}
    loss = (model(x) ** 2).sum()
    local = engine.grad(loss, list(model.parameters()), retain_graph=True)
    loss.backward()
    backward_end_ns = time.perf_counter_ns()
    assert reducer.next_bucket == len(reducer.buckets)  # every bucket was launched before backward returned
    assert all(b.start_ns < backward_end_ns for b in reducer.buckets)
    for p, g in zip(model.parameters(), local):
        expected[id(p)] = (g.numpy() + 1) / 2  # (own + the other rank's ones) / 2
    reducer.finish()
    assert group.comm.log == [b.numel for b in reducer.buckets]  # AllReduced in index order
    for p in model.parameters():
        np.testing.assert_allclose(p.grad.numpy(), expected[id(p)], rtol=1e-12)
        bucket, slot = reducer.slot_of[id(p)]
        assert np.shares_memory(p.grad._data, bucket.flat)  # .grad is a view of its bucket
    assert not reducer.active and reducer.next_bucket == 0


def test_complete_buckets_wait_for_an_earlier_incomplete_one_whose_missing_gradient_is_sent_as_zeros():
    model = _model()
    group = _group()
    reducer = Reducer(list(model.parameters()), group, cap_bytes=100)
    last_bias = model[4].bias
    assert reducer.slot_of[id(last_bias)][0].index == 0 and len(reducer.buckets) > 2
    last_bias.requires_grad_(False)  # no gradient this step: bucket 0 stays incomplete
    (model(engine.tensor(np.ones((2, 3)))) ** 2).sum().backward()
    assert reducer.next_bucket == 0 and group.comm.log == []  # the later, complete buckets were held back
    assert all(b.ready_count == len(b.params) for b in reducer.buckets[1:])
    last_bias.requires_grad_(True)
    reducer.finish()
    assert group.comm.log == [b.numel for b in reducer.buckets]
    np.testing.assert_array_equal(last_bias.grad.numpy(), np.full(2, 0.5))  # (0 + the other rank's 1) / 2


def test_device_gradients_are_staged_through_host_memory(monkeypatch):
    monkeypatch.setattr(cuda_backend, "cupy", cuda_emulator)
    params = [engine.tensor(np.zeros((2, 3)), requires_grad=True), engine.tensor(np.zeros(3), requires_grad=True)]
    group = _group()
    reducer = Reducer(params, group, cap_bytes=1 << 20)
    device_grads = [cuda_emulator.asarray(np.arange(6.0).reshape(2, 3)), cuda_emulator.asarray(np.full(3, 3.0))]
    for p, g in zip(params, device_grads):
        p.grad = types.SimpleNamespace(_data=g)  # a device gradient (the emulator's arrays are not registrable)
        reducer.grad_ready(p)
    bucket = reducer.buckets[0]
    assert type(bucket.flat) is np.ndarray  # MPI is not CUDA-aware: the bucket is on the host
    reducer.finish()
    for p, g, own in zip(params, device_grads, [np.arange(6.0).reshape(2, 3), np.full(3, 3.0)]):
        assert p.grad._data is g and type(g) is cuda_emulator.ndarray  # written back into the device array
        np.testing.assert_array_equal(np.asarray(g), (own + 1) / 2)


def test_events_one_per_bucket_then_the_wait():
    model = _model()
    group = _group()
    reducer = Reducer(list(model.parameters()), group, cap_bytes=100)
    seen = []

    class Log:
        def communication(self, event):
            seen.append(("communication", event.bucket, event.nbytes, event.start_ns <= event.end_ns))

        def comm_wait(self, event):
            seen.append(("comm_wait", event.buckets, event.nbytes, event.duration_ns >= 0))

    log = hooks.add_recorder(Log())
    try:
        (model(engine.tensor(np.ones((2, 3)))) ** 2).sum().backward()
        reducer.finish()
        reducer.finish()  # nothing pending: nothing reported
    finally:
        hooks.remove_recorder(log)
    sizes = [b.nbytes for b in reducer.buckets]
    assert seen == [("communication", i, n, True) for i, n in enumerate(sizes)] + [
        ("comm_wait", len(sizes), sum(sizes), True)]


def test_a_second_backward_before_the_step_is_refused():
    model = _model()
    reducer = Reducer(list(model.parameters()), _group(), cap_bytes=1 << 20)
    loss = (model(engine.tensor(np.ones((2, 3)))) ** 2).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="got a gradient twice before the optimizer step.*no_sync"):
        loss.backward()
    reducer.remove_hooks()


def test_a_failed_allreduce_is_raised_on_the_training_thread():
    model = _model()
    group = _group()

    def broken(send, buffer, op):
        raise OSError("MPI_ERR_TRUNCATE: message truncated")

    group.comm.Allreduce = broken
    reducer = Reducer(list(model.parameters()), group, cap_bytes=1 << 20)
    (model(engine.tensor(np.ones((2, 3)))) ** 2).sum().backward()
    with pytest.raises(RuntimeError, match="AllReduce of gradient bucket 0 failed: MPI_ERR_TRUNCATE"):
        reducer.finish()
    assert not reducer.active


def test_staging_copies_only_what_mpi_cannot_use_in_place(monkeypatch):
    from engine.distributed.staging import Staged
    monkeypatch.setattr(cuda_backend, "cupy", cuda_emulator)
    contiguous = np.arange(6.0)
    assert Staged(contiguous, cuda_aware=False).buffer is contiguous
    base = np.arange(12.0).reshape(3, 4)
    staged = Staged(base[:, ::2], cuda_aware=False)
    assert staged.buffer.flags.c_contiguous and not np.shares_memory(staged.buffer, base)
    staged.buffer *= -1
    staged.finish()
    np.testing.assert_array_equal(base[:, ::2], -np.arange(12.0).reshape(3, 4)[:, ::2])
    device = cuda_emulator.asarray(np.ones(4))
    assert Staged(device, cuda_aware=True).buffer is device  # CUDA-aware MPI reads the device buffer itself
    staged = Staged(device, cuda_aware=False)
    assert type(staged.buffer) is np.ndarray
    staged.buffer[:] = 7
    assert staged.finish() is device and np.asarray(device).tolist() == [7.0] * 4


def test_a_dropped_reducer_keeps_no_parameter_alive():
    import weakref
    model = _model()
    reducer = Reducer(list(model.parameters()), _group(), cap_bytes=100)
    references = [weakref.ref(p) for p in model.parameters()] + [weakref.ref(reducer)]
    del model, reducer
    assert all(reference() is None for reference in references)  # freed at once: the hooks hold the reducer weakly
