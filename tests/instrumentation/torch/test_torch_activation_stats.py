"""A torch layer output's statistics, reduced by torch first, equal the engine's NumPy ones on the same values."""
from __future__ import annotations

import pytest
import torch

from instrumentation.dynamics.activations import activation_stats
from instrumentation.torch.activations import torch_activation_stats

OUTPUTS = {
    "ReLU": lambda: torch.relu(torch.randn(24, 16, 8, 8) + torch.linspace(-4, 1, 16).reshape(1, 16, 1, 1)),
    "Conv2d": lambda: torch.randn(24, 16, 8, 8),
    "Linear": lambda: torch.randn(32, 10, requires_grad=True) * 3,
    "Sigmoid": lambda: torch.sigmoid(torch.randn(32, 20) * 8),
    "LeakyReLU": lambda: torch.nn.functional.leaky_relu(torch.randn(32, 20) - 1.0),
}


@pytest.mark.parametrize("kind", sorted(OUTPUTS))
def test_statistics_equal_the_numpy_ones(kind):
    output = OUTPUTS[kind]()
    ours = torch_activation_stats("layer", kind, output)
    reference = activation_stats("layer", kind, output.detach().numpy().copy())
    assert ours.mean_abs == pytest.approx(reference.mean_abs, rel=1e-5)
    assert ours.dead_fraction == reference.dead_fraction
    assert ours.saturated_fraction == reference.saturated_fraction
    if kind == "ReLU":
        assert 0 < ours.dead_fraction < 1  # some channels never fire: the test can tell
