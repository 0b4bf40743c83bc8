"""Tensor.register_post_accumulate_grad_hook against PyTorch's semantics (torch CPU as the oracle): when a hook
runs, what .grad holds then, accumulation across backward calls, removal, and what does not call hooks."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.ops.linear import linear

torch = pytest.importorskip("torch")


def _mlp_pair(seed=0):
    """The same 3-layer MLP (float64) in the engine and in torch, with the same weights."""
    rng = np.random.default_rng(seed)
    shapes = [(5, 4), (6, 5), (3, 6)]
    weights = [(rng.normal(size=s), rng.normal(size=s[0])) for s in shapes]
    ours = [(engine.tensor(w, requires_grad=True), engine.tensor(b, requires_grad=True)) for w, b in weights]
    theirs = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) for w, b in weights]
    x = rng.normal(size=(7, 4))
    return ours, theirs, x


def _forward(lib, params, x):
    h = x
    for i, (w, b) in enumerate(params):
        h = torch.nn.functional.linear(h, w, b) if lib is torch else linear(h, w, b)
        if i < len(params) - 1:
            h = lib.relu(h) if lib is torch else engine.nn.functional.relu(h)
    return (h * h).sum()


def _record(params, names, log):
    """Hooks that log (name, grad at call time, which other params had a .grad then)."""
    flat = [p for pair in params for p in pair]
    handles = []
    for name, p in zip(names, flat):
        def hook(t, name=name):
            assert t is flat[names.index(name)]
            others = tuple(n for n, q in zip(names, flat) if q.grad is not None)
            log.append((name, np.array(t.grad.detach().numpy() if hasattr(t.grad, "detach") else t.grad.numpy()),
                        others))
        handles.append(p.register_post_accumulate_grad_hook(hook))
    return handles


NAMES = ["w0", "b0", "w1", "b1", "w2", "b2"]


def _run_both(backwards=1):
    ours, theirs, x = _mlp_pair()
    our_log, their_log = [], []
    _record(ours, NAMES, our_log)
    _record(theirs, NAMES, their_log)
    for _ in range(backwards):
        _forward(engine, ours, engine.tensor(x)).backward()
        _forward(torch, theirs, torch.tensor(x)).backward()
    return ours, theirs, our_log, their_log


def test_hooks_run_during_backward_in_layer_order_with_the_final_gradient():
    ours, theirs, our_log, their_log = _run_both()
    assert sorted(n for n, _, _ in our_log) == sorted(NAMES)  # each hook once
    # A later layer's parameters are finished before an earlier layer's (as in torch): while w2's hook runs, the
    # first layer has no .grad yet.
    position = {n: i for i, (n, _, _) in enumerate(our_log)}
    their_position = {n: i for i, (n, _, _) in enumerate(their_log)}
    for later, earlier in [("w2", "w1"), ("w1", "w0"), ("b2", "b1"), ("b1", "b0")]:
        assert position[later] < position[earlier]
        assert their_position[later] < their_position[earlier]
    for ours_entry in our_log:
        name, grad_then, others = ours_entry
        theirs_entry = next(e for e in their_log if e[0] == name)
        np.testing.assert_allclose(grad_then, theirs_entry[1], rtol=1e-12)
        layer = int(name[1])
        assert not any(int(o[1]) < layer for o in others), f"{name}'s hook saw an earlier layer's grad: {others}"
    final = {n: p.grad.numpy() for n, p in zip(NAMES, [p for pair in ours for p in pair])}
    for name, grad_then, _ in our_log:
        np.testing.assert_array_equal(final[name], grad_then)


def test_hook_sees_the_gradient_accumulated_over_backward_calls():
    ours, theirs, our_log, their_log = _run_both(backwards=2)
    assert len(our_log) == len(their_log) == 12
    for (name, grad_then, _), (their_name, their_grad, _) in zip(
            sorted(our_log[6:], key=lambda e: e[0]), sorted(their_log[6:], key=lambda e: e[0])):
        assert name == their_name
        np.testing.assert_allclose(grad_then, their_grad, rtol=1e-12)  # the second call's hook sees the sum


def test_a_leaf_used_several_times_is_finished_once_with_the_sum():
    x = engine.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    tx = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    seen, their_seen = [], []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    tx.register_post_accumulate_grad_hook(lambda t: their_seen.append(t.grad.numpy().copy()))
    ((x * x).sum() + (x * 3.0).sum() + (x.exp() * x).sum()).backward()
    ((tx * tx).sum() + (tx * 3.0).sum() + (tx.exp() * tx).sum()).backward()
    assert len(seen) == len(their_seen) == 1
    np.testing.assert_allclose(seen[0], their_seen[0], rtol=1e-12)


def test_removed_hooks_and_engine_grad_do_not_call_hooks():
    calls = []
    x = engine.tensor(np.ones(3), requires_grad=True)
    handle = x.register_post_accumulate_grad_hook(lambda t: calls.append("first"))
    x.register_post_accumulate_grad_hook(lambda t: calls.append("second"))
    engine.grad((x * 2).sum(), [x])  # like torch.autograd.grad: nothing is accumulated, no hook
    assert calls == []
    (x * 2).sum().backward()
    assert calls == ["first", "second"]
    handle.remove()
    handle.remove()
    (x * 2).sum().backward()
    assert calls == ["first", "second", "second"]
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0, 4.0])


def test_a_hooked_leaf_off_the_loss_path_is_not_called_and_a_leaf_output_is():
    used, unused = engine.tensor(np.ones(2), requires_grad=True), engine.tensor(np.ones(2), requires_grad=True)
    calls = []
    unused.register_post_accumulate_grad_hook(lambda t: calls.append("unused"))
    (used * 2).sum().backward()
    assert calls == [] and unused.grad is None
    unused.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.numpy().tolist()))
    unused.backward(np.array([1.0, 2.0]))  # the output is the hooked leaf itself
    assert calls == ["unused", [1.0, 2.0]]


def test_registration_errors_name_the_problem():
    x = engine.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        engine.tensor(np.ones(2)).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="callable"):
        x.register_post_accumulate_grad_hook(3)


def test_hooks_of_a_dead_tensor_are_forgotten():
    from engine import grad_hooks
    before = len(grad_hooks.registered)
    x = engine.tensor(np.ones(2), requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda t: None)
    assert len(grad_hooks.registered) == before + 1
    del x
    assert len(grad_hooks.registered) == before


def test_a_hooked_leaf_gets_the_backward_array_itself_as_grad_as_an_unhooked_one_does():
    """No copy on the early path: .grad is the array the op's backward returned (seen through weak references)."""
    import weakref
    from engine import nn
    returned = []

    class Keep:
        def op(self, name, module, inputs, outputs, output_bytes, start_ns):
            returned.extend(weakref.ref(o) for o in outputs if o is not None)

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    for i, p in enumerate(model.parameters()):
        if i % 2 == 0:
            p.register_post_accumulate_grad_hook(lambda t: None)
    keep = engine.hooks.add_recorder(Keep())
    try:
        model(engine.tensor(np.ones((4, 8), dtype=np.float32))).sum().backward()
    finally:
        engine.hooks.remove_recorder(keep)
    assert [any(r() is p.grad._data for r in returned) for p in model.parameters()] == [True] * 4


def test_a_hook_that_refers_to_its_tensor_does_not_keep_it_alive():
    import gc
    import weakref
    from engine import grad_hooks
    x = engine.tensor(np.ones(2), requires_grad=True)
    x.register_post_accumulate_grad_hook(lambda t, x=x: None)  # tensor -> hook -> tensor: a cycle the collector frees
    reference, key = weakref.ref(x), id(x)
    del x
    gc.collect()
    assert reference() is None and key not in grad_hooks.registered
