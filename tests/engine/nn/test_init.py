"""engine.nn.init: bounds and spreads of each initialiser, fan computation as PyTorch, seeding."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import engine
from engine import nn
from engine.nn import init


def _param(shape):
    return nn.Parameter(np.zeros(shape, dtype=np.float32))


@pytest.mark.parametrize("shape", [(30, 20), (8, 4, 3, 3)])
def test_fans_match_torch(shape):
    expected = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    assert init.calculate_fan_in_and_fan_out(_param(shape)) == expected


@pytest.mark.parametrize("name,param", [("relu", None), ("tanh", None), ("leaky_relu", 0.2), ("linear", None),
                                        ("sigmoid", None), ("selu", None)])
def test_gains_match_torch(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


def test_uniform_initialisers_respect_bounds():
    p = _param((200, 100))
    init.kaiming_uniform_(p, nonlinearity="relu")
    bound = math.sqrt(2) * math.sqrt(3 / 100)
    assert np.abs(p.numpy()).max() <= bound and np.abs(p.numpy()).max() > 0.98 * bound
    init.xavier_uniform_(p, gain=2.0)
    bound = 2.0 * math.sqrt(6 / 300)
    assert np.abs(p.numpy()).max() <= bound and np.abs(p.numpy()).max() > 0.98 * bound
    init.uniform_(p, -0.5, 2.0)
    assert p.numpy().min() >= -0.5 and p.numpy().max() < 2.0


@pytest.mark.parametrize("fn,expected_std", [(lambda p: init.kaiming_normal_(p, mode="fan_out", nonlinearity="relu"),
                                              math.sqrt(2 / 200)),
                                             (lambda p: init.xavier_normal_(p), math.sqrt(2 / 300)),
                                             (lambda p: init.normal_(p, 1.0, 0.3), 0.3)])
def test_normal_initialisers_have_the_right_spread(fn, expected_std):
    p = _param((200, 100))
    fn(p)
    assert abs(p.numpy().std() - expected_std) < 0.03 * expected_std


def test_constants_and_seeding():
    p = _param((3, 4))
    init.ones_(p)
    assert np.all(p.numpy() == 1)
    init.zeros_(p)
    assert np.all(p.numpy() == 0)
    engine.manual_seed(5)
    a = init.kaiming_uniform_(_param((4, 4))).numpy().copy()
    engine.manual_seed(5)
    b = init.kaiming_uniform_(_param((4, 4))).numpy()
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        init.xavier_uniform_(_param((3,)))
