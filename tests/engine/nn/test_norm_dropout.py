"""BatchNorm1d/2d against torch (train and eval, running statistics, state_dict buffers), central differences,
and Dropout's train/eval behaviour and seeding."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import engine
from engine import nn
from engine.nn import functional as F
from nn_oracle import assert_close, check_numeric, compare_with_torch, copy_weights, rand

TF = torch.nn.functional


@pytest.mark.parametrize("cls,torch_cls,shape", [(nn.BatchNorm1d, torch.nn.BatchNorm1d, (6, 3)),
                                                 (nn.BatchNorm1d, torch.nn.BatchNorm1d, (4, 3, 5)),
                                                 (nn.BatchNorm2d, torch.nn.BatchNorm2d, (4, 3, 5, 2))])
@pytest.mark.parametrize("kwargs", [dict(), dict(momentum=0.3, eps=1e-3), dict(momentum=None), dict(affine=False)],
                         ids=str)
def test_batchnorm_train_then_eval_matches_torch(cls, torch_cls, shape, kwargs):
    layer, reference = cls(3, **kwargs).double(), torch_cls(3, **kwargs)
    if layer.affine:
        layer.weight.data[...] = rand((3,), seed=1, low=0.5, high=2)
        layer.bias.data[...] = rand((3,), seed=2)
    copy_weights(layer, reference)
    for step in range(3):  # three training steps update the running statistics
        compare_with_torch(layer, reference, [rand(shape, seed=10 + step, low=-2, high=3)], seed=step)
        if layer.affine:
            assert_close(layer.weight.grad, reference.weight.grad)
            assert_close(layer.bias.grad, reference.bias.grad)
            layer.zero_grad(), reference.zero_grad()
    assert_close(layer.running_mean, reference.running_mean)
    assert_close(layer.running_var, reference.running_var)
    assert int(layer.num_batches_tracked.item()) == 3
    layer.eval(), reference.eval()
    compare_with_torch(layer, reference, [rand(shape, seed=20, low=-2, high=3)])
    if layer.affine:
        assert_close(layer.weight.grad, reference.weight.grad)
    assert int(layer.num_batches_tracked.item()) == 3  # eval does not count batches


def test_batchnorm_state_dict_has_buffers_and_round_trips():
    layer = nn.BatchNorm2d(2)
    assert list(layer.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    layer(engine.tensor(rand((4, 2, 3, 3), seed=1).astype(np.float32)))
    other = nn.BatchNorm2d(2)
    other.load_state_dict(layer.state_dict())
    assert_close(other.running_mean, layer.running_mean.numpy())
    assert int(other.num_batches_tracked.item()) == 1
    torch_layer = torch.nn.BatchNorm2d(2)
    torch_layer.load_state_dict({k: torch.tensor(v.numpy()) for k, v in layer.state_dict().items()})
    assert not any(p.requires_grad for p in layer.buffers())


def test_batchnorm_functional_numerical_gradients_train_and_eval():
    running_mean, running_var = engine.tensor(rand((3,), seed=3)), engine.tensor(rand((3,), seed=4, low=0.5, high=2))
    for training in (True, False):
        check_numeric(lambda x, w, b: F.batch_norm(x, engine.tensor(running_mean.numpy().copy()),
                                                   engine.tensor(running_var.numpy().copy()), w, b, training=training),
                      [rand((4, 3, 2), seed=5), rand((3,), seed=6), rand((3,), seed=7)], wrt=(0, 1, 2))


def test_batchnorm_functional_matches_torch_without_running_stats():
    compare_with_torch(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                       lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True),
                       [rand((5, 4), seed=1), rand((4,), seed=2), rand((4,), seed=3)])


def test_batchnorm_errors():
    with pytest.raises(ValueError, match=r"BatchNorm2d\(3\) expects a 4-d input with 3 channels.*\(2, 4, 5, 5\)"):
        nn.BatchNorm2d(3)(engine.tensor(rand((2, 4, 5, 5))))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(engine.tensor(rand((1, 3))))
    with pytest.raises(ValueError, match=r"running_mean must have shape \(3,\)"):
        F.batch_norm(engine.tensor(rand((2, 3))), engine.tensor(np.zeros(2)), engine.tensor(np.ones(2)))


def test_dropout_train_scales_kept_and_eval_is_identity():
    engine.manual_seed(0)
    layer = nn.Dropout(p=0.25)
    x = engine.tensor(np.ones((200, 100), dtype=np.float32), requires_grad=True)
    out = layer(x)
    values = out.numpy()
    kept = values != 0
    np.testing.assert_allclose(values[kept], 1 / 0.75, rtol=1e-6)
    assert abs(kept.mean() - 0.75) < 0.02
    out.backward(np.full(out.shape, 2.0, dtype=np.float32))
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 2 / 0.75, 0), rtol=1e-6)
    layer.eval()
    assert layer(x) is x
    assert F.dropout(x, 0.5, training=False) is x
    assert np.all(F.dropout(x, 1.0).numpy() == 0)


def test_dropout_mask_follows_manual_seed():
    x = engine.tensor(np.ones((10, 10), dtype=np.float32))
    engine.manual_seed(7)
    a = F.dropout(x, 0.5).numpy()
    engine.manual_seed(7)
    b = F.dropout(x, 0.5).numpy()
    c = F.dropout(x, 0.5).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        nn.Dropout(1.5)
