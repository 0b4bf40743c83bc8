"""Optimizers: hand-computed steps, torch.optim as an oracle, groups, state dicts, hooks and in-place updates."""
from __future__ import annotations

import math

import numpy as np
import pytest

import engine
from engine import hooks
from engine.optim import SGD, Adam, AdamW
from engine.tensor import Tensor


def _param(values, dtype="float64") -> Tensor:
    return engine.tensor(np.array(values, dtype=dtype), requires_grad=True)


def _set_grad(p: Tensor, values) -> None:
    p.grad = Tensor._wrap_array(np.array(values, dtype=p.dtype), "gradient", "grad")


def _run(optimizer, params, grads_per_step) -> list[np.ndarray]:
    for grads in grads_per_step:
        for p, g in zip(params, grads):
            _set_grad(p, g)
        optimizer.step()
    return [p.numpy().copy() for p in params]


# --- hand-computed values (two steps, float64) ------------------------------------------------------

def test_sgd_plain_two_steps():
    p = _param([1.0, -2.0])
    (result,) = _run(SGD([p], lr=0.1), [p], [[[0.5, 1.0]], [[2.0, -1.0]]])
    np.testing.assert_allclose(result, [1.0 - 0.05 - 0.2, -2.0 - 0.1 + 0.1], rtol=0, atol=1e-15)


def test_sgd_momentum_dampening_weight_decay_two_steps():
    p = _param([1.0])
    opt = SGD([p], lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.1)
    (after1,) = _run(opt, [p], [[[0.5]]])
    # step 1: g = 0.5 + 0.1·1 = 0.6; b = g (no dampening on the first step); p = 1 − 0.1·0.6 = 0.94
    assert after1[0] == pytest.approx(0.94, abs=1e-15)
    (after2,) = _run(opt, [p], [[[0.5]]])
    # step 2: g = 0.5 + 0.1·0.94 = 0.594; b = 0.9·0.6 + 0.5·0.594 = 0.837; p = 0.94 − 0.0837 = 0.8563
    assert after2[0] == pytest.approx(0.8563, abs=1e-14)
    assert opt.state[p]["momentum_buffer"].numpy()[0] == pytest.approx(0.837, abs=1e-15)


def test_sgd_nesterov_two_steps():
    p = _param([0.0])
    opt = SGD([p], lr=1.0, momentum=0.5, nesterov=True)
    # step 1: b = 1; update g + 0.5·b = 1.5 → p = −1.5; step 2: b = 0.5 + 1 = 1.5; update 1 + 0.75 → p = −3.25
    (result,) = _run(opt, [p], [[[1.0]], [[1.0]]])
    assert result[0] == pytest.approx(-3.25, abs=1e-15)


def test_adam_two_steps_by_hand():
    p = _param([1.0, 2.0])
    opt = Adam([p], lr=0.1)
    (after1,) = _run(opt, [p], [[[0.5, -4.0]]])
    # step 1: m̂ = g, v̂ = g², so the update is lr·g/(|g| + eps) = ±0.1 (up to eps)
    np.testing.assert_allclose(after1, [0.9, 2.1], rtol=0, atol=1e-8)
    (after2,) = _run(opt, [p], [[[1.5, 0.0]]])
    # step 2, first entry: m = 0.9·0.05 + 0.1·1.5 = 0.195,
    # v = 0.999·0.00025 + 0.001·2.25 = 0.00249975; m̂ = 0.195/0.19, v̂ = 0.00249975/0.001999
    m_hat, v_hat = 0.195 / (1 - 0.81), 0.00249975 / (1 - 0.999 ** 2)
    expected0 = (1.0 - 0.1 * 0.5 / (0.5 + 1e-8)) - 0.1 * m_hat / (math.sqrt(v_hat) + 1e-8)
    # second entry: m = 0.9·(−0.4) = −0.36, v = 0.999·0.016 = 0.015984
    m_hat1, v_hat1 = -0.36 / 0.19, 0.015984 / (1 - 0.999 ** 2)
    expected1 = (2.0 + 0.1 * 4.0 / (4.0 + 1e-8)) - 0.1 * m_hat1 / (math.sqrt(v_hat1) + 1e-8)
    np.testing.assert_allclose(after2, [expected0, expected1], rtol=1e-12)


def test_adamw_decays_before_the_adam_update():
    p = _param([2.0])
    opt = AdamW([p], lr=0.1, weight_decay=0.5)
    (result,) = _run(opt, [p], [[[3.0]]])
    # p·(1 − 0.1·0.5) = 1.9, then the first Adam step moves it by lr·sign(g)
    assert result[0] == pytest.approx(1.8, abs=1e-8)


def test_adam_amsgrad_keeps_the_largest_second_moment():
    p = _param([0.0])
    opt = Adam([p], lr=0.1, amsgrad=True)
    _run(opt, [p], [[[10.0]], [[0.0]]])
    state = opt.state[p]
    assert state["max_exp_avg_sq"].numpy()[0] == pytest.approx(0.1, rel=1e-12)  # 0.001·100, kept at step 2
    assert state["exp_avg_sq"].numpy()[0] == pytest.approx(0.0999, rel=1e-12)


# --- torch.optim as the oracle ----------------------------------------------------------------------

CONFIGS = [
    (SGD, "SGD", dict(lr=0.1)),
    (SGD, "SGD", dict(lr=0.05, momentum=0.9)),
    (SGD, "SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    (SGD, "SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.02)),
    (Adam, "Adam", dict(lr=1e-2)),
    (Adam, "Adam", dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    (Adam, "Adam", dict(lr=1e-2, amsgrad=True)),
    (AdamW, "AdamW", dict(lr=1e-2)),
    (AdamW, "AdamW", dict(lr=5e-3, weight_decay=0.3, amsgrad=True)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("ours", "torch_name", "kwargs"), CONFIGS)
def test_matches_torch_optim(ours, torch_name, kwargs, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    shapes = [(5, 3), (3,), (2, 2, 2)]
    initial = [rng.standard_normal(s).astype(dtype) for s in shapes]
    steps = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(4)]
    params = [engine.tensor(a.copy(), requires_grad=True) for a in initial]
    torch_params = [torch.tensor(a.copy(), requires_grad=True) for a in initial]
    optimizer = ours(params, **kwargs)
    torch_optimizer = getattr(torch.optim, torch_name)(torch_params, foreach=False, **kwargs)
    for grads in steps:
        for p, tp, g in zip(params, torch_params, grads):
            _set_grad(p, g)
            tp.grad = torch.tensor(g.copy())
        optimizer.step()
        torch_optimizer.step()
        for p, tp in zip(params, torch_params):
            assert p.dtype == np.dtype(dtype)
            tolerance = 2e-6 if dtype == "float32" else 1e-13
            np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=tolerance, atol=tolerance)


def test_matches_torch_with_param_groups_and_a_missing_grad():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal(4).astype("float32") for _ in range(3))
    ours = [engine.tensor(x.copy(), requires_grad=True) for x in (a, b, c)]
    theirs = [torch.tensor(x.copy(), requires_grad=True) for x in (a, b, c)]
    opt = Adam([{"params": ours[:2]}, {"params": ours[2:], "lr": 0.1, "weight_decay": 0.5}], lr=0.01)
    topt = torch.optim.Adam([{"params": theirs[:2]}, {"params": theirs[2:], "lr": 0.1, "weight_decay": 0.5}],
                            lr=0.01, foreach=False)
    for step in range(3):
        for i, (p, tp) in enumerate(zip(ours, theirs)):
            if i == 1 and step < 2:  # the middle parameter gets a gradient only on the last step
                p.grad, tp.grad = None, None
                continue
            g = rng.standard_normal(4).astype("float32")
            _set_grad(p, g)
            tp.grad = torch.tensor(g)
        opt.step()
        topt.step()
    for p, tp in zip(ours, theirs):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=2e-6, atol=2e-7)
    assert opt.state[ours[1]]["step"] == 1 and opt.state[ours[0]]["step"] == 3


# --- behaviour --------------------------------------------------------------------------------------

def test_params_without_grad_are_skipped():
    p, q = _param([1.0]), _param([1.0])
    opt = Adam([p, q], lr=0.1)
    _set_grad(p, [1.0])
    opt.step()
    assert q.numpy()[0] == 1.0 and q not in opt.state and p in opt.state


def test_real_backward_drives_the_update():
    w = _param([[1.0, 2.0], [3.0, 4.0]])
    x = engine.tensor(np.array([[1.0, -1.0]], dtype="float64"))
    loss = (x @ w).sum()
    loss.backward()
    SGD([w], lr=0.5).step()
    np.testing.assert_allclose(w.numpy(), [[0.5, 1.5], [3.5, 4.5]])


def test_updates_in_place_and_allocate_nothing_after_the_first_step():
    class AllocCounter:
        def __init__(self):
            self.events = []

        def alloc(self, event):
            self.events.append(event)

    p = _param(np.ones((4, 3)), dtype="float32")
    q = _param(np.ones(3), dtype="float32")
    opt = Adam([p, q], lr=0.1, weight_decay=0.1, amsgrad=True)
    data_before = p._data
    _set_grad(p, np.full((4, 3), 0.5))
    _set_grad(q, np.full(3, 0.5))
    counter = hooks.subscribe(AllocCounter())
    try:
        opt.step()
        first = list(counter.events)
        counter.events.clear()
        opt.step()
        opt.step()
    finally:
        hooks.unsubscribe(counter)
    assert p._data is data_before
    assert counter.events == []
    assert first and all(e.category == "optimizer_state" and e.phase == "optimizer" for e in first)
    assert {e.op for e in first} == {"Adam", "Adam.workspace"}


def test_step_sets_the_optimizer_phase_and_closes_the_training_step():
    seen = []

    class StepObserver:
        def step_end(self, event):
            seen.append((event.step, hooks.current_phase()))

    p = _param([1.0])
    opt = SGD([p], lr=0.1)
    _set_grad(p, [1.0])
    phase_before = hooks.current_phase()
    step_before = hooks.current_step()
    observer = hooks.subscribe(StepObserver())
    try:
        opt.step()
        opt.step()
    finally:
        hooks.unsubscribe(observer)
    assert hooks.current_step() == step_before + 2
    assert [s for s, _ in seen] == [step_before, step_before + 1]
    assert hooks.current_phase() == phase_before


def test_phase_is_restored_when_the_update_fails():
    p = _param([1.0])
    opt = SGD([p], lr=0.1)
    p.grad = Tensor._wrap_array(np.ones(2), "gradient", "grad")  # wrong shape: the update raises
    step_before = hooks.current_step()
    with pytest.raises(ValueError):
        opt.step()
    assert hooks.current_phase() == "forward" and hooks.current_step() == step_before


def test_zero_grad():
    p = _param([1.0, 2.0])
    opt = SGD([p], lr=0.1)
    _set_grad(p, [3.0, 4.0])
    grad_tensor = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is grad_tensor and p.grad.numpy().tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_closure_result_is_returned():
    p = _param([2.0])
    opt = SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert loss.item() == 4.0 and p.numpy()[0] == pytest.approx(1.0)


def test_param_groups_fill_defaults():
    a, b = _param([1.0]), _param([1.0])
    opt = SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert [g["momentum"] for g in opt.param_groups] == [0, 0.9]
    assert len(opt.param_groups[1]["params"]) == 1 and opt.param_groups[1]["params"][0] is b


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: SGD([], lr=0.1), "empty parameter list"),
    (lambda p: SGD(p, lr=0.1), "iterable of Tensors"),
    (lambda p: SGD([p]), "required optimization parameter lr"),
    (lambda p: SGD([p], lr=-1.0), "invalid learning rate"),
    (lambda p: SGD([p], lr=0.1, nesterov=True), "Nesterov"),
    (lambda p: Adam([p], betas=(1.0, 0.9)), "beta"),
    (lambda p: Adam([p, p]), "more than once"),
    (lambda p: Adam([{"params": [p]}, {"params": [p]}]), "more than one parameter group"),
    (lambda p: Adam([engine.tensor([1.0])]), "does not require grad"),
    (lambda p: Adam([np.ones(2)]), "can only optimize Tensors"),
])
def test_invalid_arguments(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make(_param([1.0]))


def test_state_dict_round_trip_continues_identically():
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(3) for _ in range(6)]
    p, q = _param([1.0, 2.0, 3.0]), _param([1.0, 2.0, 3.0])
    first = Adam([p], lr=0.05, amsgrad=True)
    _run(first, [p], [[g] for g in grads[:3]])
    q._data[...] = p._data
    second = Adam([q], lr=0.5)
    second.load_state_dict(first.state_dict())
    assert second.param_groups[0]["lr"] == 0.05 and second.param_groups[0]["amsgrad"] is True
    assert second.state[q]["exp_avg"]._data is not first.state[p]["exp_avg"]._data
    (a,) = _run(first, [p], [[g] for g in grads[3:]])
    (b,) = _run(second, [q], [[g] for g in grads[3:]])
    np.testing.assert_array_equal(a, b)


def test_state_dict_layout_matches_torch():
    p, q = _param([1.0]), _param([1.0])
    opt = SGD([{"params": [p]}, {"params": [q], "lr": 0.2}], lr=0.1, momentum=0.9)
    _run(opt, [p, q], [[[1.0], [1.0]]])
    state = opt.state_dict()
    assert [g["params"] for g in state["param_groups"]] == [[0], [1]]
    assert set(state["state"]) == {0, 1} and set(state["state"][0]) == {"momentum_buffer"}


def test_load_state_dict_rejects_a_mismatch():
    opt = SGD([_param([1.0]), _param([1.0])], lr=0.1)
    with pytest.raises(ValueError, match="parameter group 0 has 1 parameters"):
        opt.load_state_dict(SGD([_param([1.0])], lr=0.1).state_dict())
    with pytest.raises(ValueError, match="2 parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}, {"params": [1]}]})
