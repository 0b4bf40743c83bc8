"""Allocator accounting: views counted once, frees, peak, and the limit's OutOfMemoryError in forward/backward."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import engine
from engine import memory


@pytest.fixture(autouse=True)
def no_limit():
    gc.collect()
    yield
    memory.set_limit(None)


def _allocated() -> int:
    return memory.stats().allocated_bytes


def test_views_share_one_buffer():
    x = engine.tensor(np.zeros((8, 16), dtype=np.float32))
    before = memory.stats()
    views = [x.reshape(16, 8), x.transpose(), x.T, x.detach(), x[1:3], x.flatten(), x.reshape(128)[::2]]
    after = memory.stats()
    assert after.allocated_bytes == before.allocated_bytes
    assert after.live_buffers == before.live_buffers and after.live_tensors == before.live_tensors + len(views)
    del x
    assert _allocated() == before.allocated_bytes  # the views keep the buffer alive
    del views
    assert _allocated() == before.allocated_bytes - 8 * 16 * 4


def test_copies_are_counted_and_freed_after_del():
    base = _allocated()
    x = engine.tensor(np.zeros(1000, dtype=np.float64))
    y = x[np.array([0, 1, 2])]  # advanced indexing copies
    z = x * 2
    assert _allocated() == base + 8000 + 24 + 8000
    del y, z, x
    assert _allocated() == base


def test_graph_and_gradients_return_to_baseline():
    base = memory.stats()
    x = engine.tensor(np.ones((32, 16), dtype=np.float32), requires_grad=True)
    w = engine.tensor(np.ones((16, 8), dtype=np.float32), requires_grad=True)
    loss = (x @ w).tanh().mean()
    loss.backward()
    assert x.grad is not None and _allocated() > base.allocated_bytes
    del x, w, loss
    stats = memory.stats()
    assert (stats.allocated_bytes, stats.live_tensors, stats.live_buffers) == (
        base.allocated_bytes, base.live_tensors, base.live_buffers)


def test_peak_tracks_the_high_water_mark():
    memory.reset_peak()
    base = _allocated()
    assert memory.stats().peak_bytes == base
    big = engine.tensor(np.zeros(10_000, dtype=np.float32))
    del big
    small = engine.tensor(np.zeros(10, dtype=np.float32))
    stats = memory.stats()
    assert stats.peak_bytes == base + 40_000 and stats.allocated_bytes == base + 40
    del small


def test_oom_in_forward_names_bytes_limit_and_op_then_succeeds_without_limit():
    x = engine.tensor(np.ones((100, 100), dtype=np.float32), requires_grad=True)
    base = memory.stats()
    memory.set_limit(base.allocated_bytes + 1000)
    with pytest.raises(engine.OutOfMemoryError) as info:
        x.exp()
    error = info.value
    assert isinstance(error, MemoryError) and error.op == "Exp"
    message = str(error)
    for part in ("op 'Exp'", "40000 bytes", f"{base.allocated_bytes} bytes) in use",
                 f"({base.allocated_bytes + 1000} bytes)", "cpu"):
        assert part in message, (part, message)
    assert (error.requested_bytes, error.allocated_bytes, error.limit_bytes) == (40000, base.allocated_bytes,
                                                                                base.allocated_bytes + 1000)
    stats = memory.stats()
    assert (stats.allocated_bytes, stats.live_tensors, stats.live_buffers) == (
        base.allocated_bytes, base.live_tensors, base.live_buffers)
    memory.set_limit(None)
    y = x.exp().sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.e, rtol=1e-6)


def _consistent() -> bool:
    """The device total equals the sum over live buffers (nothing leaked or double-counted)."""
    return sum(entry[1] for entry in memory.live_buffers() if entry[2] == "cpu") == _allocated()


def test_oom_in_backward_leaves_grad_untouched_and_accounting_consistent():
    start = _allocated()
    x = engine.tensor(np.ones(1000), requires_grad=True)
    (x * 3).sum().backward()
    grad_before = x.grad.numpy().copy()
    loss = (x.exp() * x.tanh()).sum()
    base = _allocated()
    # seed + the sum's gradient fit; the product's two 8 KB input gradients do not (the graph is freed as it goes)
    memory.set_limit(base + 12_000)
    with pytest.raises(engine.OutOfMemoryError, match="MulBackward"):
        loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), grad_before)
    assert _consistent() and _allocated() <= base
    with pytest.raises(RuntimeError, match="second time"):  # the part already walked was freed
        loss.backward()
    memory.set_limit(None)
    (x.exp() * x.tanh()).sum().backward()
    expected = grad_before + np.e * np.tanh(1.0) + np.e * (1 - np.tanh(1.0) ** 2)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)
    del x, loss
    assert _allocated() == start and _consistent()


def test_oom_while_creating_leaf_grads_sets_none_of_them():
    start = _allocated()
    a = engine.tensor(np.ones(1000), requires_grad=True)
    b = engine.tensor(np.ones(1000), requires_grad=True)
    product = a * b  # kept alive, so freeing the graph releases nothing
    loss = product.sum()
    base = _allocated()
    memory.set_limit(base + 12_000)  # backward temporaries (8 KB) and a.grad fit; b.grad does not
    with pytest.raises(engine.OutOfMemoryError, match="'grad'"):
        loss.backward()
    assert a.grad is None and b.grad is None
    assert _allocated() == base and _consistent()
    del a, b, product, loss
    assert _allocated() == start


def test_set_limit_validates():
    with pytest.raises(ValueError, match="non-negative number of bytes"):
        memory.set_limit(-1)
    with pytest.raises(ValueError, match="non-negative number of bytes"):
        memory.set_limit(1.5)
    memory.set_limit(10**12)
    assert memory.stats().limit_bytes == 10**12


def test_live_buffers_lists_categories():
    x = engine.tensor(np.zeros(3), requires_grad=True)
    (x * 2).sum().backward()
    categories = {entry[3] for entry in memory.live_buffers()}
    assert {"input", "gradient"} <= categories
    assert memory.format_bytes(512) == "512 B" and memory.format_bytes(3 * 1024**2) == "3.0 MiB"


def test_deepcopy_of_a_tensor_owns_and_accounts_its_buffer():
    import copy

    import engine

    before = engine.memory.stats().allocated_bytes
    original = engine.tensor(np.ones(256, dtype=np.float32), requires_grad=True)
    (original * 2).sum().backward()
    copied = copy.deepcopy(original)
    assert not np.shares_memory(copied.numpy(), original.numpy())
    assert copied.requires_grad and np.array_equal(copied.grad.numpy(), original.grad.numpy())
    assert engine.memory.stats().allocated_bytes == before + 4 * 1024
    del copied
    assert engine.memory.stats().allocated_bytes == before + 2 * 1024
    del original
    assert engine.memory.stats().allocated_bytes == before
