"""Conv2d, MaxPool2d, AvgPool2d and Flatten against torch (float64), central differences, and shape errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import engine
from engine import nn
from engine.nn import functional as F
from nn_oracle import assert_close, check_numeric, compare_with_torch, copy_weights, rand

TF = torch.nn.functional

CONV_CASES = [  # input shape, weight shape, stride, padding
    ((2, 3, 8, 8), (4, 3, 3, 3), 1, 0),
    ((2, 3, 9, 7), (5, 3, 2, 3), 2, 1),
    ((1, 2, 7, 6), (3, 2, 3, 2), (2, 1), (0, 2)),
    ((2, 2, 5, 5), (3, 2, 3, 3), 1, "same"),
    ((2, 2, 6, 5), (2, 2, 4, 2), 1, "same"),
    ((3, 1, 6, 6), (2, 1, 1, 1), 3, "valid"),
    ((1, 16, 13, 13), (32, 16, 3, 3), 1, 0),
]


@pytest.mark.parametrize("x_shape,w_shape,stride,padding", CONV_CASES, ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_matches_torch(x_shape, w_shape, stride, padding, bias):
    arrays = [rand(x_shape, seed=1), rand(w_shape, seed=2)] + ([rand(w_shape[:1], seed=3)] if bias else [])
    compare_with_torch(lambda *a: F.conv2d(*a[:2], a[2] if bias else None, stride=stride, padding=padding),
                       lambda *a: TF.conv2d(*a[:2], a[2] if bias else None, stride=stride, padding=padding), arrays)


def test_conv2d_layer_matches_torch_and_inits_like_torch():
    engine.manual_seed(0)
    layer = nn.Conv2d(3, 4, kernel_size=3, stride=2, padding=1).double()
    bound = 1 / np.sqrt(3 * 3 * 3)
    assert layer.weight.shape == (4, 3, 3, 3) and np.abs(layer.weight.numpy()).max() <= bound
    assert np.abs(layer.bias.numpy()).max() <= bound
    reference = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
    copy_weights(layer, reference)
    compare_with_torch(layer, reference, [rand((2, 3, 7, 7), seed=4)])
    assert_close(layer.weight.grad, reference.weight.grad)
    assert_close(layer.bias.grad, reference.bias.grad)
    assert repr(layer) == "Conv2d(3, 4, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))"


def test_conv2d_numerical_gradient():
    check_numeric(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
                  [rand((1, 2, 5, 4), seed=5), rand((3, 2, 3, 2), seed=6), rand((3,), seed=7)], wrt=(0, 1, 2))


def test_conv2d_float32_stays_float32_and_skips_input_grad():
    x = engine.tensor(rand((2, 1, 6, 6)).astype(np.float32))
    layer = nn.Conv2d(1, 2, 3)
    out = layer(x)
    assert out.dtype == np.float32
    out.sum().backward()
    assert x.grad is None and layer.weight.grad.dtype == np.float32


def test_conv2d_errors_name_shapes():
    w = engine.tensor(rand((4, 3, 3, 3)))
    with pytest.raises(ValueError, match=r"4-d input \(N, C, H, W\), got shape \(3, 8, 8\).*batch dimension"):
        F.conv2d(engine.tensor(rand((3, 8, 8))), w)
    with pytest.raises(ValueError, match=r"\(2, 5, 8, 8\) has 5 channels but weight of shape \(4, 3, 3, 3\) expects 3"):
        F.conv2d(engine.tensor(rand((2, 5, 8, 8))), w)
    with pytest.raises(ValueError, match=r"kernel \(3, 3\) is larger than the \(padded\) input 2x8"):
        F.conv2d(engine.tensor(rand((1, 3, 2, 8))), w)
    with pytest.raises(ValueError, match=r"bias must have shape \(4,\)"):
        F.conv2d(engine.tensor(rand((1, 3, 8, 8))), w, engine.tensor(rand((3,))))
    with pytest.raises(ValueError, match="padding='same' needs stride 1"):
        F.conv2d(engine.tensor(rand((1, 3, 8, 8))), w, stride=2, padding="same")
    with pytest.raises(NotImplementedError, match="groups"):
        F.conv2d(engine.tensor(rand((1, 3, 8, 8))), w, groups=3)
    with pytest.raises(ValueError, match=r"Conv2d|channels"):
        nn.Conv2d(1, 2, 3)(engine.tensor(rand((1, 3, 8, 8)).astype(np.float32)))


POOL_CASES = [  # input shape, kernel, stride, padding
    ((2, 3, 8, 8), 2, None, 0),
    ((2, 3, 9, 7), 2, None, 0),  # windows do not cover the last row/column
    ((2, 3, 9, 7), 3, 2, 1),
    ((1, 2, 6, 6), 3, 1, 0),
    ((1, 1, 5, 5), (2, 3), (1, 2), (1, 1)),
    ((1, 2, 7, 7), 3, None, 0),
]


@pytest.mark.parametrize("x_shape,kernel,stride,padding", POOL_CASES, ids=str)
@pytest.mark.parametrize("name", ["max_pool2d", "avg_pool2d"])
def test_pooling_matches_torch(name, x_shape, kernel, stride, padding):
    x = rand(x_shape, seed=8)
    x[0, 0, :3, :3] = 0.5  # ties: the gradient must go to one element per window, as in PyTorch
    compare_with_torch(lambda t: getattr(F, name)(t, kernel, stride, padding),
                       lambda t: getattr(TF, name)(t, kernel, stride, padding), [x])


@pytest.mark.parametrize("layer,reference", [(nn.MaxPool2d(2), torch.nn.MaxPool2d(2)),
                                             (nn.AvgPool2d(3, stride=2, padding=1),
                                              torch.nn.AvgPool2d(3, stride=2, padding=1)),
                                             (nn.Flatten(), torch.nn.Flatten()),
                                             (nn.Flatten(0, 2), torch.nn.Flatten(0, 2))], ids=repr)
def test_pool_and_flatten_layers_match_torch(layer, reference):
    compare_with_torch(layer, reference, [rand((2, 3, 6, 5), seed=9)])


def test_max_pool_routes_one_gradient_per_window_after_relu():
    x = engine.tensor(np.zeros((1, 1, 4, 4)), requires_grad=True)  # every window is a 4-way tie at 0
    F.max_pool2d(F.relu(x), 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], np.zeros((4, 4)))
    y = engine.tensor(np.zeros((1, 1, 4, 4)), requires_grad=True)
    F.max_pool2d(y, 2).sum().backward()
    assert y.grad.numpy().sum() == 4 and y.grad.numpy()[0, 0, ::2, ::2].sum() == 4


@pytest.mark.parametrize("name,kwargs", [("max_pool2d", dict(kernel_size=2)),
                                         ("max_pool2d", dict(kernel_size=3, stride=2, padding=1)),
                                         ("avg_pool2d", dict(kernel_size=2, stride=1))], ids=str)
def test_pooling_numerical_gradient(name, kwargs):
    check_numeric(lambda t: getattr(F, name)(t, **kwargs), [rand((1, 2, 5, 4), seed=10, low=-3, high=3)])


def test_pooling_errors():
    with pytest.raises(ValueError, match=r"4-d input.*\(4, 4\)"):
        F.max_pool2d(engine.tensor(rand((4, 4))), 2)
    with pytest.raises(ValueError, match="at most half the kernel"):
        F.max_pool2d(engine.tensor(rand((1, 1, 4, 4))), 2, padding=2)
    with pytest.raises(NotImplementedError, match="ceil_mode"):
        F.avg_pool2d(engine.tensor(rand((1, 1, 4, 4))), 2, ceil_mode=True)
