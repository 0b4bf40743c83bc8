"""Learning-rate schedulers: hand-computed values and torch.optim.lr_scheduler as an oracle, epoch by epoch."""
from __future__ import annotations

import math

import numpy as np
import pytest

import engine
from engine.optim import SGD, Adam, CosineAnnealingLR, StepLR


def _optimizer(lrs=(0.1,)):
    groups = [{"params": [engine.tensor(np.ones(2), requires_grad=True)], "lr": lr} for lr in lrs]
    return SGD(groups, lr=lrs[0])


def test_step_lr_by_hand():
    scheduler = StepLR(_optimizer(), step_size=2, gamma=0.5)
    seen = [scheduler.get_last_lr()[0]]
    for _ in range(5):
        scheduler.step()
        seen.append(scheduler.get_last_lr()[0])
    assert seen == [0.1, 0.1, 0.05, 0.05, 0.025, 0.025]


def test_cosine_by_hand():
    optimizer = _optimizer((1.0,))
    scheduler = CosineAnnealingLR(optimizer, T_max=4, eta_min=0.0)
    seen = [optimizer.param_groups[0]["lr"]]
    for _ in range(4):
        scheduler.step()
        seen.append(optimizer.param_groups[0]["lr"])
    expected = [(1 + math.cos(math.pi * t / 4)) / 2 for t in range(5)]
    np.testing.assert_allclose(seen, expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize(("name", "kwargs"), [
    ("StepLR", dict(step_size=3)),
    ("StepLR", dict(step_size=2, gamma=0.7)),
    ("CosineAnnealingLR", dict(T_max=5)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=1e-3)),
    ("CosineAnnealingLR", dict(T_max=1, eta_min=0.01)),
])
def test_matches_torch_over_many_epochs(name, kwargs):
    torch = pytest.importorskip("torch")
    lrs = (0.1, 0.03)
    ours = _optimizer(lrs)
    theirs = torch.optim.SGD([{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs], lr=lrs[0])
    scheduler = {"StepLR": StepLR, "CosineAnnealingLR": CosineAnnealingLR}[name](ours, **kwargs)
    torch_scheduler = getattr(torch.optim.lr_scheduler, name)(theirs, **kwargs)
    assert scheduler.get_last_lr() == torch_scheduler.get_last_lr()
    for epoch in range(25):
        ours.step()  # no gradients: a no-op update, but the call order of a real loop
        theirs.step()
        scheduler.step()
        torch_scheduler.step()
        assert scheduler.get_last_lr() == torch_scheduler.get_last_lr(), f"epoch {epoch + 1}"
        assert [g["lr"] for g in ours.param_groups] == [g["lr"] for g in theirs.param_groups]


def test_the_scheduled_rate_is_the_one_the_optimizer_uses():
    p = engine.tensor(np.array([0.0]), requires_grad=True)
    optimizer = SGD([p], lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.5)
    for _ in range(3):
        p.grad = engine.tensor(np.array([1.0]))
        optimizer.step()
        scheduler.step()
    assert p.numpy()[0] == pytest.approx(-(1.0 + 0.5 + 0.25))


def test_scheduler_state_dict_resumes():
    first = CosineAnnealingLR(_optimizer(), T_max=6)
    for _ in range(3):
        first.step()
    optimizer = _optimizer()
    second = CosineAnnealingLR(optimizer, T_max=6)
    second.load_state_dict(first.state_dict())
    optimizer.param_groups[0]["lr"] = first.optimizer.param_groups[0]["lr"]
    for _ in range(4):
        first.step()
        second.step()
        assert first.get_last_lr() == second.get_last_lr()


def test_resuming_needs_initial_lr():
    with pytest.raises(KeyError, match="initial_lr"):
        StepLR(_optimizer(), step_size=1, last_epoch=3)


def test_invalid_arguments():
    with pytest.raises(TypeError, match="not an Optimizer"):
        StepLR(object(), step_size=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step_size"):
        StepLR(_optimizer(), step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        CosineAnnealingLR(Adam([engine.tensor([1.0], requires_grad=True)]), T_max=0)
