"""Module: registration, names, modes, state_dict round trips and errors, summary, repr, hooks' module paths."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import engine
from engine import hooks, memory
from engine import nn


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc1(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.fc1 = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc1(self.encoder(x)) * 2.0


class Recorder:
    def __init__(self) -> None:
        self.events = []

    def op_start(self, event) -> None:
        self.events.append((event.op, event.phase, event.module))


@pytest.fixture
def recorder():
    rec = hooks.subscribe(Recorder())
    yield rec
    hooks.unsubscribe(rec)


def test_named_parameters_use_dotted_paths():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["encoder.fc1.weight", "encoder.fc1.bias", "fc1.weight",
                                                      "fc1.bias"]
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Sequential(nn.Linear(2, 1, bias=False)))
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.0.weight"]
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1", "2", "2.0"]
    assert [type(m).__name__ for m in seq.children()] == ["Linear", "ReLU", "Sequential"]
    assert len(list(seq.parameters())) == 3


def test_parameter_is_a_registered_leaf_tensor():
    p = nn.Parameter(np.zeros((2, 3), dtype=np.float32))
    assert isinstance(p, engine.Tensor) and p.requires_grad and p.is_leaf
    assert nn.Parameter.__slots__ == ()
    assert any(category == "parameter" and nbytes == 24 for _, nbytes, _, category, _ in memory.live_buffers())
    with pytest.raises(TypeError, match="floating point"):
        nn.Parameter(np.zeros(3, dtype=np.int64))


def test_shared_parameter_listed_once_and_reassignment_replaces():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    net[1].weight = net[0].weight
    assert len(list(net.parameters())) == 3
    net[1].bias = None
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias"]
    with pytest.raises(TypeError, match="parameter 'weight'"):
        net[0].weight = engine.tensor(np.zeros((2, 2)))


def test_train_eval_propagate():
    net = Net()
    assert net.training and net.encoder.fc1.training
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_zero_grad_and_requires_grad():
    net = Net()
    net(engine.tensor(np.ones((2, 4), dtype=np.float32))).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_state_dict_round_trip_with_tensors_and_arrays():
    engine.manual_seed(1)
    a = Net()
    engine.manual_seed(2)
    b = Net()
    x = engine.tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    assert not np.allclose(a(x).numpy(), b(x).numpy())
    state = a.state_dict()
    assert list(state) == ["encoder.fc1.weight", "encoder.fc1.bias", "fc1.weight", "fc1.bias"]
    weight_before = b.fc1.weight
    result = b.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b.fc1.weight is weight_before  # copied in place
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    c = Net()
    c.load_state_dict({k: v.numpy().astype(np.float64) for k, v in state.items()})
    np.testing.assert_array_equal(a(x).numpy(), c(x).numpy())
    assert c.fc1.weight.dtype == np.float32


def test_load_state_dict_errors_name_keys_and_shapes():
    net = Net()
    state = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    del state["fc1.bias"]
    state["extra.weight"] = np.zeros(3)
    state["fc1.weight"] = np.zeros((5, 5))
    before = net.encoder.fc1.weight.numpy().copy()
    state["encoder.fc1.weight"] = before + 1
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(state)
    message = str(info.value)
    assert "missing keys: 'fc1.bias'" in message
    assert "unexpected keys: 'extra.weight'" in message
    assert "'fc1.weight'" in message and "(5, 5)" in message and "(2, 3)" in message
    np.testing.assert_array_equal(net.encoder.fc1.weight.numpy(), before)  # nothing copied on error
    del state["fc1.weight"]
    result = net.load_state_dict(state, strict=False)
    assert result.missing_keys == ["fc1.weight", "fc1.bias"] and result.unexpected_keys == ["extra.weight"]
    np.testing.assert_array_equal(net.encoder.fc1.weight.numpy(), before + 1)


def test_manual_seed_gives_identical_models():
    engine.manual_seed(123)
    a = nn.Sequential(nn.Linear(5, 4), nn.Linear(4, 3))
    engine.manual_seed(123)
    b = nn.Sequential(nn.Linear(5, 4), nn.Linear(4, 3))
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(pa.numpy(), pb.numpy(), err_msg=na)
    c = nn.Sequential(nn.Linear(5, 4), nn.Linear(4, 3))
    assert not np.array_equal(a[0].weight.numpy(), c[0].weight.numpy())


def test_sequential_indexing_slicing_append():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear) and seq[1] is list(seq)[1]
    tail = seq[1:]
    assert isinstance(tail, nn.Sequential) and len(tail) == 2 and tail[0] is seq[1]
    assert [n for n, _ in tail.named_parameters()] == ["2.weight", "2.bias"]  # names kept, as PyTorch
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and [n for n, _ in seq.named_modules()][-1] == "3"
    with pytest.raises(IndexError, match="out of range"):
        seq[7]
    named = nn.Sequential(OrderedDict([("first", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert [n for n, _ in named.named_parameters()] == ["first.weight", "first.bias"]
    out = seq(engine.tensor(np.ones((4, 2), dtype=np.float32)))
    assert out.shape == (4, 1) and np.all((out.numpy() > 0) & (out.numpy() < 1))


def test_repr_like_pytorch():
    seq = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 2, bias=False)))
    assert repr(seq) == ("Sequential(\n  (0): Linear(in_features=4, out_features=3, bias=True)\n  (1): ReLU()\n"
                         "  (2): Sequential(\n    (0): Linear(in_features=3, out_features=2, bias=False)\n  )\n)")


def test_summary_lists_layers_shapes_and_totals():
    net = Net()
    text = net.summary(input_shape=(7, 4))
    lines = text.splitlines()
    row = next(line for line in lines if line.split()[:2] == ["fc1", "Linear"])
    assert "[7, 2]" in row and row.split()[-1] == "8"
    inner = next(line for line in lines if line.split()[:2] == ["encoder.fc1", "Linear"])
    assert "[7, 3]" in inner and inner.split()[-1] == "15"
    assert "Total params: 23" in text and "Trainable params: 23" in text
    assert net.training  # summary restores the mode
    plain = net.summary()
    assert "Output shape" not in plain and "Total params: 23" in plain


def test_hooks_see_module_paths(recorder):
    net = Net()
    net(engine.tensor(np.ones((2, 4), dtype=np.float32))).sum().backward()
    forward = [(op, module) for op, phase, module in recorder.events if phase == "forward"]
    assert ("Linear", "encoder.fc1") in forward and ("ReLU", "encoder.act") in forward
    assert ("Linear", "fc1") in forward and ("Mul", "") in forward
    backward = {(op, module) for op, phase, module in recorder.events if phase == "backward"}
    assert ("LinearBackward", "encoder.fc1") in backward and ("LinearBackward", "fc1") in backward
    assert hooks.module_stack == [""]


def test_hook_paths_follow_structure_changes_and_roots(recorder):
    seq = nn.Sequential(nn.Linear(2, 2))
    x = engine.tensor(np.ones((1, 2), dtype=np.float32))
    seq(x)
    seq.append(nn.Linear(2, 2))
    seq(x)
    assert [m for op, _, m in recorder.events if op == "Linear"] == ["0", "0", "1"]
    recorder.events.clear()
    outer = nn.Sequential(nn.Linear(2, 2), seq)
    outer(x)
    assert [m for op, _, m in recorder.events if op == "Linear"] == ["0", "1.0", "1.1"]
    recorder.events.clear()
    seq(x)  # called on its own again: it is the root now
    assert [m for op, _, m in recorder.events if op == "Linear"] == ["0", "1"]


def test_module_stack_popped_on_error():
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        nn.Sequential(Broken())(engine.tensor([1.0]))
    assert hooks.module_stack == [""]


def test_forward_hook_sees_output_and_can_be_removed():
    layer = nn.Linear(2, 3)
    seen = []
    handle = layer.register_forward_hook(lambda m, args, out: seen.append(out.shape))
    layer(engine.tensor(np.ones((4, 2), dtype=np.float32)))
    handle.remove()
    layer(engine.tensor(np.ones((4, 2), dtype=np.float32)))
    assert seen == [(4, 3)]


def test_to_double_casts_parameters_and_buffers():
    net = Net().double()
    assert all(p.dtype == np.float64 for p in net.parameters())
    out = net(engine.tensor(np.ones((2, 4))))
    assert out.dtype == np.float64


def test_assignment_before_init_is_a_clear_error():
    class Forgot(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(1, 1)

    with pytest.raises(AttributeError, match="Module.__init__"):
        Forgot()


def test_deepcopy_of_a_model_registers_new_parameters():
    import copy
    import gc

    net = nn.Linear(3, 2)
    gc.collect()
    before = memory.stats().allocated_bytes
    clone = copy.deepcopy(net)
    assert isinstance(clone.weight, nn.Parameter) and clone.weight is not net.weight
    np.testing.assert_array_equal(clone.weight.numpy(), net.weight.numpy())
    assert memory.stats().allocated_bytes == before + net.weight.numpy().nbytes + net.bias.numpy().nbytes
    del clone
    gc.collect()
    assert memory.stats().allocated_bytes == before  # the original's buffers are still counted
