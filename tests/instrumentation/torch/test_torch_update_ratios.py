"""update_ratio/<param> is ‖Δw‖/‖w‖ of the update the torch optimizer applied and grad_norm/<param> is ‖g‖, equal to
the same figures computed from copies of the parameters taken around each optimizer.step() (float64 oracle)."""
from __future__ import annotations

import pytest
import torch

from torch_helpers import batches, mlp, scalars, train

OPTIMIZERS = {
    "SGD momentum": lambda params, **kw: torch.optim.SGD(params, lr=0.05, momentum=0.9, **kw),
    "SGD nesterov + weight decay": lambda params, **kw: torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True,
                                                                      weight_decay=1e-3, **kw),
    "Adam": lambda params, **kw: torch.optim.Adam(params, lr=1e-3, **kw),
    "AdamW": lambda params, **kw: torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1, **kw),
}
VARIANTS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_update_ratios_and_gradient_norms_equal_the_ones_from_parameter_copies(digits, tmp_path, name, variant):
    model = mlp(32)
    optimizer = OPTIMIZERS[name](model.parameters(), **VARIANTS[variant])
    names = [n for n, _ in model.named_parameters()]
    before: dict[str, torch.Tensor] = {}
    expected: dict[str, dict[int, float]] = {}
    expected_grads: dict[str, dict[int, float]] = {}

    def copy(step: int) -> None:
        for n, p in model.named_parameters():
            before[n] = p.detach().double().clone()
            expected_grads.setdefault(n, {})[step] = float(p.grad.double().norm())

    def compare(step: int) -> None:
        for n, p in model.named_parameters():
            update = p.detach().double() - before[n]
            expected.setdefault(n, {})[step] = float(update.norm() / before[n].norm())

    train(model, optimizer, batches(digits, 6), tmp_path / "run", before_step=copy, after_step=compare, every=1,
          histograms_every=0)
    logged = scalars(tmp_path / "run")
    for n in names:
        assert sorted(logged["update_ratio/" + n]) == list(range(6))
        for step in range(6):
            assert logged["update_ratio/" + n][step] == pytest.approx(expected[n][step], rel=1e-4), (n, step)
            assert logged["grad_norm/" + n][step] == pytest.approx(expected_grads[n][step], rel=1e-4), (n, step)
    assert all(v > 0 for n in names for v in expected[n].values())  # every parameter moved: the check has teeth
