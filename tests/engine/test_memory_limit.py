"""The memory limit prevents, not only counts: an op's output size is checked from shapes and dtypes before it
computes anything, NumPy's MemoryError becomes OutOfMemoryError with the same fields, set_limit takes only ints."""
from __future__ import annotations

import gc

import numpy as np
import psutil
import pytest

import engine
from engine import hooks, memory, nn
from engine.op import Function
from engine.nn import functional as F
from engine.ops.arithmetic import MatMul, Mul
from engine.ops.math import Exp

MiB = 1 << 20
HUGE_BYTES = 1 << 48  # 256 TiB: more than the address space, so NumPy's allocation fails on any machine


@pytest.fixture(autouse=True)
def no_limit():
    gc.collect()
    yield
    memory.set_limit(None)


class OomRecorder:
    """An observer of the engine's ``oom`` hook (as the memory tracker is)."""

    def __init__(self) -> None:
        self.events: list[hooks.OomEvent] = []

    def oom(self, event: hooks.OomEvent) -> None:
        self.events.append(event)


@pytest.fixture
def oom_events():
    recorder = OomRecorder()
    hooks.subscribe(recorder)
    yield recorder.events
    hooks.unsubscribe(recorder)


def _rss_bytes() -> int:
    return psutil.Process().memory_info().rss


@pytest.mark.parametrize("value", [True, False, 1.5, 1e9, np.float64(1e6), "1000", -1, np.int64(-5), [10]])
def test_set_limit_rejects_what_is_not_a_non_negative_int(value):
    with pytest.raises(ValueError, match="non-negative number of bytes \\(an int\\)") as raised:
        memory.set_limit(value)
    assert repr(value) in str(raised.value) and type(value).__name__ in str(raised.value)
    assert memory.stats().limit_bytes is None and not memory.limit_set


def test_set_limit_takes_ints_and_none():
    memory.set_limit(np.int64(10 * MiB))
    assert memory.stats().limit_bytes == 10 * MiB and type(memory.stats().limit_bytes) is int and memory.limit_set
    memory.set_limit(0)
    assert memory.stats().limit_bytes == 0
    memory.set_limit(None)
    assert memory.stats().limit_bytes is None and not memory.limit_set


@pytest.mark.parametrize("observed", [False, True], ids=["plain", "observed"])
def test_a_1_6_gb_op_under_a_10_mb_limit_is_refused_before_anything_is_allocated(observed, oom_events):
    a = engine.tensor(np.ones((20_000, 1), dtype=np.float32))
    b = engine.tensor(np.ones((1, 20_000), dtype=np.float32))
    expected_bytes = 20_000 * 20_000 * 4
    before = memory.stats()
    memory.set_limit(10 * MiB)
    rss_before = _rss_bytes()
    with pytest.raises(engine.OutOfMemoryError) as raised:
        with _ModuleScope("block"):
            (a * b) if not observed else _observed(lambda: a * b)
    rss_delta = _rss_bytes() - rss_before
    assert rss_delta < 50 * MiB, rss_delta  # the old code computed it: RSS 42 -> 1,187 MiB
    error = raised.value
    assert type(error) is engine.OutOfMemoryError
    assert (error.requested_bytes, error.allocated_bytes, error.limit_bytes, error.device, error.op, error.module) == (
        expected_bytes, before.allocated_bytes, 10 * MiB, "cpu", "Mul", "block")
    after = memory.stats()
    assert (after.allocated_bytes, after.peak_bytes, after.live_buffers) == (
        before.allocated_bytes, before.peak_bytes, before.live_buffers)
    [event] = oom_events
    assert (event.requested_bytes, event.allocated_bytes, event.limit_bytes, event.op, event.module) == (
        expected_bytes, before.allocated_bytes, 10 * MiB, "Mul", "block")


class _ModuleScope:
    """Inside a module named ``name`` (as a Module's __call__ is), for the error's module field."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        hooks.module_stack.append(self.name)

    def __exit__(self, *exc: object) -> None:
        hooks.module_stack.pop()


def _observed(compute):
    """Runs ``compute`` with an op observer subscribed (Function.__call__'s observed path)."""

    class Observer:
        def op_end(self, event):
            pass

    observer = Observer()
    hooks.subscribe(observer)
    try:
        return compute()
    finally:
        hooks.unsubscribe(observer)


def _forward_calls(monkeypatch, op_class: type) -> list[int]:
    calls: list[int] = []
    forward = op_class.forward

    def counting(self, *arrays):
        calls.append(1)
        return forward(self, *arrays)

    monkeypatch.setattr(op_class, "forward", counting)
    return calls


def test_ops_whose_output_is_smaller_than_their_inputs_fit_where_elementwise_ones_do_not(monkeypatch):
    x = engine.tensor(np.ones((1000, 1000)))  # 8 MB, float64
    column = engine.tensor(np.ones((1000, 1)))
    row = engine.tensor(np.ones((1, 1000)))
    memory.set_limit(memory.allocated_bytes() + 200_000)  # the results below take ~70 KB; x.exp() 8 MB
    results = [x.sum(axis=0), x.sum(axis=1, keepdims=True), x.mean(axis=0), x.max(axis=1), x.min(), x.sum(),
               x @ column, row @ x, F.mse_loss(x, x), F.softmax(row), F.max_pool2d(x.reshape(1, 1, 1000, 1000), 100),
               F.conv2d(x.reshape(1, 1, 1000, 1000), engine.tensor(np.ones((1, 1, 100, 100))), stride=100)]
    assert [r.shape for r in results] == [(1000,), (1000, 1), (1000,), (1000,), (), (), (1000, 1), (1, 1000), (),
                                          (1, 1000), (1, 1, 10, 10), (1, 1, 10, 10)]
    exp_calls, matmul_calls = _forward_calls(monkeypatch, Exp), _forward_calls(monkeypatch, MatMul)
    with pytest.raises(engine.OutOfMemoryError, match="op 'Exp'") as raised:
        x.exp()
    assert raised.value.requested_bytes == 8_000_000 and exp_calls == []  # refused before forward ran
    with pytest.raises(engine.OutOfMemoryError, match="op 'MatMul'") as raised:
        column @ row
    assert raised.value.requested_bytes == 8_000_000 and matmul_calls == []


def test_conv_pool_and_batched_matmul_sizes_are_refused_from_their_output_shapes(monkeypatch):
    image = engine.tensor(np.ones((1, 1, 8, 8), dtype=np.float32))
    many_filters = engine.tensor(np.ones((4096, 1, 1, 1), dtype=np.float32))
    images = engine.tensor(np.ones((64, 64, 32, 32), dtype=np.float32))
    batch = engine.tensor(np.ones((256, 64, 1), dtype=np.float32))
    row = engine.tensor(np.ones((1, 1024), dtype=np.float32))
    memory.set_limit(memory.allocated_bytes() + 10 * MiB)
    rss_before = _rss_bytes()
    with pytest.raises(engine.OutOfMemoryError, match="op 'Conv2d'") as raised:  # the padded copy alone is 64 MB
        F.conv2d(image, many_filters, padding=2000)
    assert raised.value.requested_bytes == 4096 * 4008 * 4008 * 4
    with pytest.raises(engine.OutOfMemoryError, match="op 'AvgPool2d'") as raised:
        F.avg_pool2d(images, 1)
    assert raised.value.requested_bytes == 64 * 64 * 32 * 32 * 4
    with pytest.raises(engine.OutOfMemoryError, match="op 'MatMul'") as raised:
        batch @ row  # (256, 64, 1024)
    assert raised.value.requested_bytes == 256 * 64 * 1024 * 4
    assert _rss_bytes() - rss_before < 30 * MiB


def _cases():
    """(name, thunk) pairs covering every op's output_nbytes with broadcasting, dtypes and shape changes."""
    rng = np.random.default_rng(0)
    f32 = lambda *shape: engine.tensor(rng.standard_normal(shape).astype(np.float32))  # noqa: E731
    f64 = lambda *shape: engine.tensor(rng.standard_normal(shape))  # noqa: E731
    i32 = engine.tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
    labels = np.array([0, 2, 1])
    image = f32(2, 3, 9, 7)
    weight = f32(5, 3, 3, 2)
    channels = f32(3)
    return [
        ("add broadcast", lambda: f32(3, 1) + f32(1, 4)), ("mixed dtypes", lambda: f32(3, 4) * f64(4)),
        ("python float", lambda: f32(3, 4) - 2.5), ("int sum", lambda: i32.sum()), ("int mean", lambda: i32.mean(0)),
        ("int32 + int32", lambda: i32 + i32), ("div", lambda: f64(2, 3) / f64(2, 1)), ("pow", lambda: f32(4) ** 2),
        ("neg", lambda: -f32(2, 2)), ("matmul 1d@1d", lambda: f32(5) @ f32(5)),
        ("matmul 1d@2d", lambda: f32(5) @ f32(5, 3)),
        ("matmul 2d@1d", lambda: f32(4, 5) @ f32(5)), ("matmul batched", lambda: f32(2, 1, 4, 5) @ f64(3, 5, 6)),
        ("linear", lambda: F.linear(f32(2, 3, 4), f32(6, 4), f32(6))),
        ("conv stride+padding", lambda: F.conv2d(image, weight, f32(5), stride=(2, 1), padding=(1, 2))),
        ("max pool padded", lambda: F.max_pool2d(image, 3, stride=2, padding=1)),
        ("max pool 1x1", lambda: F.max_pool2d(image, 1)), ("avg pool", lambda: F.avg_pool2d(image, (2, 3))),
        ("sum axes", lambda: image.sum(axis=(1, 3))), ("sum keepdims", lambda: image.sum(axis=-1, keepdims=True)),
        ("mean all keepdims", lambda: image.mean(keepdims=True)), ("max axis", lambda: image.max(axis=2)),
        ("min keepdims", lambda: image.min(axis=(0, 2), keepdims=True)),
        ("reshape view", lambda: image.reshape(2, -1)), ("reshape copy", lambda: image.transpose().reshape(-1)),
        ("transpose", lambda: image.transpose(0, 2, 1, 3)), ("slice", lambda: image[:, 1]),
        ("element", lambda: image[0, 0, 0, 0]), ("fancy index", lambda: image[np.array([1, 0, 1])]),
        ("concat", lambda: engine.concat([f32(2, 3), f64(4, 3)], axis=0)),
        ("stack", lambda: engine.stack([f32(2, 3), f32(2, 3), f32(2, 3)], axis=1)),
        ("where", lambda: engine.where(np.array([True, False, True, True]), f32(3, 1), f32(4))),
        ("cast", lambda: f32(3, 5).astype("float64")), ("cast int", lambda: i32.astype("int8")),
        ("exp log sqrt abs clip", lambda: f64(6).exp().log().abs().sqrt().clip(0.1, 0.9)),
        ("activations", lambda: f32(4, 3).tanh().sigmoid().relu().leaky_relu(0.1).gelu()),
        ("softmax", lambda: f32(3, 5).softmax(0).log_softmax(1)), ("dropout", lambda: F.dropout(f32(8, 8), 0.5)),
        ("batch norm train", lambda: F.batch_norm(image, None, None, channels, channels, training=True)),
        ("batch norm eval", lambda: F.batch_norm(f64(4, 3), engine.tensor(np.zeros(3)),
                                                 engine.tensor(np.ones(3)))),
        ("cross entropy none", lambda: F.cross_entropy(f32(3, 4), labels, reduction="none")),
        ("cross entropy mean", lambda: F.cross_entropy(f32(3, 4), labels)),
        ("cross entropy soft", lambda: F.cross_entropy(f32(3, 4, 2), np.full((3, 4, 2), 0.25), reduction="none")),
        ("nll sum", lambda: F.nll_loss(f64(3, 4), labels, reduction="sum")),
        ("mse none broadcast", lambda: F.mse_loss(f32(3, 4), f32(4), reduction="none")),
        ("bce none", lambda: F.binary_cross_entropy_with_logits(f32(3, 4), f32(3, 4), weight=np.ones(4),
                                                                reduction="none", pos_weight=np.ones(4))),
        ("bce mean", lambda: F.binary_cross_entropy_with_logits(f64(3, 4), f64(3, 4))),
    ]


@pytest.mark.parametrize("name", [name for name, _ in _cases()])  # NOTE: names only: no tensor outlives the test
def test_every_ops_declared_output_size_is_what_the_allocator_then_counts(name, monkeypatch):
    """The independent oracle: the bytes the allocator registers for the op's result (0 for a view)."""
    compute = dict(_cases())[name]
    declared: list[tuple[str, int | None]] = []  # in call order: an op is checked, computed, then wrapped
    counted: list[tuple[str, int]] = []
    check_room, wrap = Function._check_room, Function._wrap

    def record_declared(self, arrays):
        declared.append((type(self).__name__, self.output_nbytes(*arrays)))
        return check_room(self, arrays)

    def record_counted(self, out, inputs, needs_grad):
        before = memory.allocated_bytes()
        result = wrap(self, out, inputs, needs_grad)
        counted.append((type(self).__name__, memory.allocated_bytes() - before))
        return result

    monkeypatch.setattr(Function, "_check_room", record_declared)
    monkeypatch.setattr(Function, "_wrap", record_counted)
    memory.set_limit(1 << 50)
    results = compute()
    assert declared and [op for op, _ in declared] == [op for op, _ in counted]
    known = [(op, nbytes, counted_bytes) for (op, nbytes), (_, counted_bytes) in zip(declared, counted)
             if nbytes is not None]
    assert known or name == "fancy index"
    assert [(op, counted_bytes) for op, _, counted_bytes in known] == [(op, nbytes) for op, nbytes, _ in known]
    del results


def test_numpy_memory_error_in_an_op_becomes_out_of_memory_error_with_the_same_fields(oom_events):
    a = engine.tensor(np.ones((1 << 24, 1), dtype=np.uint8))
    b = engine.tensor(np.ones((1, 1 << 24), dtype=np.uint8))
    before = memory.stats()
    with pytest.raises(engine.OutOfMemoryError) as raised:  # no limit: NumPy itself cannot allocate 256 TiB
        with _ModuleScope("encoder"):
            a * b
    error = raised.value
    assert (error.requested_bytes, error.allocated_bytes, error.limit_bytes, error.device, error.op, error.module) == (
        HUGE_BYTES, before.allocated_bytes, None, "cpu", "Mul", "encoder")
    assert isinstance(error.__cause__, MemoryError) and not isinstance(error.__cause__, engine.OutOfMemoryError)
    assert "Unable to allocate" in error.reason and "no limit set" in str(error)
    assert str(HUGE_BYTES) in str(error)
    [event] = oom_events
    assert (event.requested_bytes, event.limit_bytes, event.op, event.module) == (HUGE_BYTES, None, "Mul", "encoder")
    assert memory.stats().allocated_bytes == before.allocated_bytes


class _Greedy(Function):
    """A user-defined op (output size unknown beforehand) that needs huge scratch space in forward or backward."""

    def __init__(self, where: str) -> None:
        self.where = where

    def forward(self, x):
        if self.where == "forward":
            np.empty(HUGE_BYTES, dtype=np.uint8)
        return x * 2

    def backward(self, grad):
        if self.where == "backward":
            np.empty(HUGE_BYTES, dtype=np.uint8)
        return (grad * 2,)


def test_memory_error_in_a_user_ops_forward_under_a_limit_keeps_the_limit_in_the_fields(oom_events):
    x = engine.tensor(np.ones(4, dtype=np.float32), requires_grad=True)
    limit = memory.allocated_bytes() + MiB
    memory.set_limit(limit)
    with pytest.raises(engine.OutOfMemoryError) as raised:
        _Greedy("forward")(x)
    assert (raised.value.requested_bytes, raised.value.limit_bytes, raised.value.op) == (HUGE_BYTES, limit, "_Greedy")
    assert len(oom_events) == 1


def test_memory_error_in_a_backward_becomes_out_of_memory_error_naming_the_backward(oom_events):
    x = engine.tensor(np.ones(4, dtype=np.float32), requires_grad=True)
    loss = _Greedy("backward")(x).sum()
    before = memory.stats().allocated_bytes
    with pytest.raises(engine.OutOfMemoryError) as raised:
        loss.backward()
    assert (raised.value.requested_bytes, raised.value.op, raised.value.limit_bytes) == (
        HUGE_BYTES, "_GreedyBackward", None)
    assert x.grad is None and memory.stats().allocated_bytes <= before
    assert [event.op for event in oom_events] == ["_GreedyBackward"]


def test_an_op_whose_arguments_are_wrong_still_raises_its_own_error_under_a_limit():
    memory.set_limit(1 << 40)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        engine.tensor(np.ones(3)) + engine.tensor(np.ones(4))
    with pytest.raises(ValueError, match="axis 5 is out of range"):
        engine.tensor(np.ones(3)).sum(axis=5)
    with pytest.raises(ValueError, match="not aligned"):
        engine.tensor(np.ones((2, 3))) @ engine.tensor(np.ones((4, 2)))


def test_a_refused_op_leaves_training_going_once_the_limit_is_raised():
    model = nn.Linear(4, 3)
    x = engine.tensor(np.ones((2, 4), dtype=np.float32))
    memory.set_limit(memory.allocated_bytes() + 8)
    with pytest.raises(engine.OutOfMemoryError, match="op 'Linear'"):
        model(x)
    memory.set_limit(None)
    model(x).sum().backward()
    assert model.weight.grad.shape == (3, 4)


def test_mul_refusal_does_not_call_forward(monkeypatch):
    calls = _forward_calls(monkeypatch, Mul)
    a = engine.tensor(np.ones((1000, 1)))
    memory.set_limit(memory.allocated_bytes() + 1000)
    with pytest.raises(engine.OutOfMemoryError):
        a * a.reshape(1, 1000)
    assert calls == []


def test_comparisons_are_checked_too():
    column = engine.tensor(np.ones((4000, 1), dtype=np.float32))
    row = engine.tensor(np.ones((1, 4000), dtype=np.float32))
    memory.set_limit(memory.allocated_bytes() + MiB)
    assert (column[:10] < row[:, :10]).shape == (10, 10)
    with pytest.raises(engine.OutOfMemoryError, match="op 'Less'") as raised:
        column < row
    assert raised.value.requested_bytes == 4000 * 4000
