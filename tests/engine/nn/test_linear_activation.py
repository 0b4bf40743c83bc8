"""Linear and activation layers against torch (float64): outputs, input and weight gradients, default init."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import engine
from engine import nn
from engine.nn import functional as F
from nn_oracle import assert_close, compare_with_torch, copy_weights, rand, to_torch


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(shape, bias):
    layer = nn.Linear(4, 3, bias=bias).double()
    reference = torch.nn.Linear(4, 3, bias=bias)
    copy_weights(layer, reference)
    compare_with_torch(layer, reference, [rand(shape, seed=1)])
    assert_close(layer.weight.grad, reference.weight.grad)
    if bias:
        assert_close(layer.bias.grad, reference.bias.grad)


def test_linear_functional_and_shape_errors():
    w, b = engine.tensor(rand((3, 4)), requires_grad=True), engine.tensor(rand((3,)), requires_grad=True)
    x = engine.tensor(rand((2, 4)))
    assert_close(F.linear(x, w, b), torch.nn.functional.linear(to_torch(x.numpy()), to_torch(w.numpy()),
                                                              to_torch(b.numpy())))
    with pytest.raises(ValueError, match=r"\(2, 5\).*\(3, 4\)"):
        F.linear(engine.tensor(rand((2, 5))), w)
    with pytest.raises(ValueError, match=r"bias of shape \(2,\)"):
        F.linear(x, w, engine.tensor(rand((2,))))


def test_linear_default_init_bounds_and_dtype():
    engine.manual_seed(0)
    layer = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    assert w.shape == (300, 400) and b.shape == (300,) and w.dtype == np.float32
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound  # uniform(-a, a) has std a/√3


@pytest.mark.parametrize("layer,reference", [
    (nn.ReLU(), torch.nn.ReLU()),
    (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
    (nn.Sigmoid(), torch.nn.Sigmoid()),
    (nn.Tanh(), torch.nn.Tanh()),
    (nn.GELU(), torch.nn.GELU()),
    (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)),
    (nn.LogSoftmax(dim=-1), torch.nn.LogSoftmax(dim=-1)),
], ids=lambda v: type(v).__name__)
def test_activations_match_torch(layer, reference):
    compare_with_torch(layer, reference, [rand((3, 5), seed=4, low=-3, high=3)])


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "gelu", "leaky_relu"])
def test_functional_activations_match_torch(name):
    x = rand((4, 3), seed=6, low=-3, high=3)
    assert_close(getattr(F, name)(engine.tensor(x)), getattr(torch.nn.functional, name)(to_torch(x)))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_functional_softmax_dims(dim):
    x = rand((3, 4), seed=7, low=-5, high=5)
    assert_close(F.softmax(engine.tensor(x), dim=dim), torch.softmax(to_torch(x), dim=dim))
    assert_close(F.log_softmax(engine.tensor(x), dim=dim), torch.log_softmax(to_torch(x), dim=dim))


def test_identity_and_module_list():
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Identity()])
    assert len(layers) == 2 and [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias"]
    x = engine.tensor([1.0, 2.0])
    assert layers[1](x) is x
