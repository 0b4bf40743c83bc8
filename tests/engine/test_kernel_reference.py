"""The NumPy references of the CUDA kernels against the engine's CPU ops (and torch CPU as an oracle)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import engine
import engine.nn.functional as F
from engine.backend import kernel_reference as ref
from engine.ops.conv import pad2d

DTYPES = [np.float32, np.float64]
RTOL = {np.float32: 2e-5, np.float64: 1e-12}


def _close(actual, expected, dtype, scale=1.0):
    np.testing.assert_allclose(actual, expected, rtol=RTOL[dtype] * scale, atol=RTOL[dtype] * scale)


def _grad_of(fn, *arrays):
    tensors = [engine.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*tensors)
    return out.numpy(), tensors


# --- softmax cross-entropy ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_cross_entropy_forward_matches_engine_and_torch(dtype):
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((37, 11)) * 4).astype(dtype)
    labels = rng.integers(0, 11, 37).astype(np.int64)
    labels[[3, 9]] = -100
    loss, probs = ref.softmax_cross_entropy_forward(logits, labels, -100)
    assert loss.dtype == dtype and probs.dtype == dtype
    engine_loss = F.cross_entropy(engine.tensor(logits), labels, reduction="none").numpy()
    _close(loss, engine_loss, dtype)
    assert loss[3] == 0 and loss[9] == 0
    torch_loss = torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.from_numpy(labels),
                                                   reduction="none").numpy()
    _close(loss, torch_loss, dtype, 4)
    _close(probs, torch.softmax(torch.from_numpy(logits), 1).numpy(), dtype)


def test_softmax_cross_entropy_out_of_range_label_gives_nan_row():
    logits = np.zeros((3, 4))
    labels = np.array([1, 4, -1])
    loss, probs = ref.softmax_cross_entropy_forward(logits, labels, -100)
    assert loss[0] == pytest.approx(np.log(4)) and np.isnan(loss[1:]).all()
    grad = ref.softmax_cross_entropy_backward(probs, labels, 1.0, -100)
    assert np.isfinite(grad[0]).all() and np.isnan(grad[1:]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_cross_entropy_backward_matches_engine_and_torch(dtype):
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((23, 7)).astype(dtype)
    labels = rng.integers(0, 7, 23).astype(np.int64)
    labels[5] = -1
    _, probs = ref.softmax_cross_entropy_forward(logits, labels, -1)
    valid = labels != -1
    row_scale = (valid / valid.sum()).astype(dtype)  # 'mean' over the rows that count
    grad = ref.softmax_cross_entropy_backward(probs, labels, row_scale, -1)
    x = engine.tensor(logits, requires_grad=True)
    F.cross_entropy(x, labels, ignore_index=-1).backward()
    _close(grad, x.grad.numpy(), dtype)
    assert (grad[5] == 0).all()
    t = torch.from_numpy(logits).requires_grad_()
    torch.nn.functional.cross_entropy(t, torch.from_numpy(labels), ignore_index=-1).backward()
    _close(grad, t.grad.numpy(), dtype, 4)
    scalar = ref.softmax_cross_entropy_backward(probs, labels, dtype(0.5), -1)
    _close(scalar[valid], (grad * (0.5 / row_scale[:, None].clip(1e-30)))[valid], dtype, 4)


# --- bias + activation ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["relu", "gelu"])
@pytest.mark.parametrize("shape", [(16, 9), (3, 5, 9)])
def test_bias_activation_matches_engine_and_torch(dtype, kind, shape):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 2).astype(dtype)
    x.reshape(-1)[:4] = [-0.25, 0.0, 0.25, 1.0]  # with bias -0.25..: zero and sign changes at the kink
    bias = rng.standard_normal(shape[-1]).astype(dtype)
    grad_y = rng.standard_normal(shape).astype(dtype)
    y = ref.bias_activation_forward(x, bias, kind)
    grad_x, grad_bias = ref.bias_activation_backward(x, bias, grad_y, kind)
    activation = F.relu if kind == "relu" else F.gelu
    ex, eb = engine.tensor(x, requires_grad=True), engine.tensor(bias, requires_grad=True)
    out = activation(ex + eb)
    (out * engine.tensor(grad_y)).sum().backward()
    _close(y, out.numpy(), dtype)
    _close(grad_x, ex.grad.numpy(), dtype)
    _close(grad_bias, eb.grad.numpy(), dtype, 8)
    tx, tb = torch.from_numpy(x).requires_grad_(), torch.from_numpy(bias).requires_grad_()
    torch_activation = torch.relu if kind == "relu" else torch.nn.functional.gelu
    ty = torch_activation(tx + tb)
    ty.backward(torch.from_numpy(grad_y))
    _close(y, ty.detach().numpy(), dtype, 4)
    _close(grad_x, tx.grad.numpy(), dtype, 4)
    _close(grad_bias, tb.grad.numpy(), dtype, 16)


def test_bias_activation_rejects_bad_kind_and_shape():
    with pytest.raises(ValueError, match="kind"):
        ref.bias_activation_forward(np.zeros((2, 3)), np.zeros(3), "tanh")
    with pytest.raises(ValueError, match="bias"):
        ref.bias_activation_forward(np.zeros((2, 3)), np.zeros(4), "relu")


def test_relu_keeps_nan_as_the_engine():
    y = ref.bias_activation_forward(np.array([[np.nan, -1.0]]), np.zeros(2), "relu")
    assert np.isnan(y[0, 0]) and y[0, 1] == 0


# --- im2col / col2im ------------------------------------------------------------------------------

CONV_CASES = [((2, 3, 7, 6), (4, 3, 3, 2), (1, 1), (1, 1, 2, 2)), ((1, 2, 9, 9), (3, 2, 3, 3), (2, 3), (0, 0, 0, 0))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,w_shape,stride,padding", CONV_CASES)
def test_im2col_conv_and_col2im_match_engine_and_torch(dtype, x_shape, w_shape, stride, padding):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    padded = pad2d(x, padding)
    kh, kw = w_shape[2:]
    cols = ref.im2col(padded, kh, kw, *stride)
    out_cols = w.reshape(w_shape[0], -1) @ cols  # (N, O, OH·OW)
    ex, ew = engine.tensor(x, requires_grad=True), engine.tensor(w, requires_grad=True)
    top, _, left, _ = padding
    out = F.conv2d(ex, ew, stride=stride, padding=(top, left))
    _close(out_cols.reshape(out.shape), out.numpy(), dtype, 8)
    torch_out = torch.nn.functional.conv2d(torch.from_numpy(padded), torch.from_numpy(w), stride=stride).numpy()
    _close(out_cols.reshape(out.shape), torch_out, dtype, 8)
    grad = rng.standard_normal(out.shape).astype(dtype)
    (out * engine.tensor(grad)).sum().backward()
    grad_cols = w.reshape(w_shape[0], -1).T @ grad.reshape(grad.shape[0], grad.shape[1], -1)
    grad_padded = ref.col2im(grad_cols, padded.shape, kh, kw, *stride)
    grad_x = grad_padded[:, :, top:top + x_shape[2], left:left + x_shape[3]]
    _close(grad_x, ex.grad.numpy(), dtype, 8)


def test_col2im_is_the_adjoint_of_im2col():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 8, 7))
    cols = ref.im2col(x, 3, 2, 2, 1)
    c = rng.standard_normal(cols.shape)
    assert np.vdot(cols, c) == pytest.approx(np.vdot(x, ref.col2im(c, x.shape, 3, 2, 2, 1)), rel=1e-12)


def test_windows_reject_a_kernel_larger_than_the_input():
    with pytest.raises(ValueError, match="kernel 5"):
        ref.im2col(np.zeros((1, 1, 4, 4)), 5, 1, 1, 1)


# --- pools ------------------------------------------------------------------------------------------

POOL_CASES = [((2, 3, 8, 8), 2, 2, (0, 0, 0, 0)), ((2, 2, 7, 9), 3, 2, (1, 1, 1, 1)),
              ((1, 2, 6, 6), 3, 1, (0, 0, 0, 0))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,kernel,stride,padding", POOL_CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool_matches_engine_including_ties(dtype, shape, kernel, stride, padding, ties):
    rng = np.random.default_rng(5)
    x = (rng.integers(0, 3, shape) if ties else rng.standard_normal(shape)).astype(dtype)
    padded = pad2d(x, padding, -np.inf)
    y, argmax = ref.max_pool2d_forward(padded, kernel, kernel, stride, stride)
    ex = engine.tensor(x, requires_grad=True)
    out = F.max_pool2d(ex, kernel, stride, padding[0])
    np.testing.assert_array_equal(y, out.numpy())
    grad = rng.standard_normal(y.shape).astype(dtype)
    (out * engine.tensor(grad)).sum().backward()
    grad_padded = ref.max_pool2d_backward(grad, argmax, padded.shape)
    top, left = padding[0], padding[2]
    _close(grad_padded[:, :, top:top + shape[2], left:left + shape[3]], ex.grad.numpy(), dtype)
    if not ties:
        tx = torch.from_numpy(x).requires_grad_()
        ty = torch.nn.functional.max_pool2d(tx, kernel, stride, padding[0])
        ty.backward(torch.from_numpy(grad))
        np.testing.assert_array_equal(y, ty.detach().numpy())
        _close(grad_padded[:, :, top:top + shape[2], left:left + shape[3]], tx.grad.numpy(), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,kernel,stride,padding", POOL_CASES)
def test_avg_pool_equals_engine_bit_for_bit(dtype, shape, kernel, stride, padding):
    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype(dtype)
    padded = pad2d(x, padding)
    y = ref.avg_pool2d_forward(padded, kernel, kernel, stride, stride)
    ex = engine.tensor(x, requires_grad=True)
    out = F.avg_pool2d(ex, kernel, stride, padding[0])
    np.testing.assert_array_equal(y, out.numpy())
    grad = rng.standard_normal(y.shape).astype(dtype)
    (out * engine.tensor(grad)).sum().backward()
    grad_padded = ref.avg_pool2d_backward(grad, padded.shape, kernel, kernel, stride, stride)
    top, left = padding[0], padding[2]
    np.testing.assert_array_equal(grad_padded[:, :, top:top + shape[2], left:left + shape[3]], ex.grad.numpy())
    tx = torch.from_numpy(x).requires_grad_()
    ty = torch.nn.functional.avg_pool2d(tx, kernel, stride, padding[0])
    ty.backward(torch.from_numpy(grad))
    _close(y, ty.detach().numpy(), dtype)
    _close(grad_padded[:, :, top:top + shape[2], left:left + shape[3]], tx.grad.numpy(), dtype)


# --- Adam / AdamW ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decoupled,weight_decay,amsgrad", [(False, 0.0, False), (False, 0.1, True),
                                                             (True, 0.01, False), (True, 0.05, True)])
def test_adam_step_equals_engine_bit_for_bit_and_torch(dtype, decoupled, weight_decay, amsgrad):
    rng = np.random.default_rng(7)
    shapes = [(5, 3), (3,), (1,), (4, 2, 2)]
    initial = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads_per_step = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(4)]
    hyper = dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=weight_decay, amsgrad=amsgrad)
    params = [engine.tensor(a.copy(), requires_grad=True) for a in initial]
    optimizer = (engine.optim.AdamW if decoupled else engine.optim.Adam)(params, **hyper)
    torch_params = [torch.from_numpy(a.copy()).requires_grad_() for a in initial]
    torch_optimizer = (torch.optim.AdamW if decoupled else torch.optim.Adam)(torch_params, **hyper)
    data = [a.copy() for a in initial]
    moments = [[np.zeros_like(a) for a in initial] for _ in range(3)]
    for step, grads in enumerate(grads_per_step, start=1):
        for p, tp, g in zip(params, torch_params, grads):
            p.grad = engine.Tensor._wrap_array(g.copy(), "gradient", "grad")
            tp.grad = torch.from_numpy(g.copy())
        optimizer.step()
        torch_optimizer.step()
        ref.adam_step(data, [g.copy() for g in grads], moments[0], moments[1], lr=0.01, beta1=0.8, beta2=0.95,
                      eps=1e-6, weight_decay=weight_decay, step=step, decoupled=decoupled,
                      amsgrad_max=moments[2] if amsgrad else None)
    for mine, p, tp in zip(data, params, torch_params):
        np.testing.assert_array_equal(mine, p.numpy())
        _close(mine, tp.detach().numpy(), dtype, 4)


def test_adam_step_rejects_mismatched_lists():
    with pytest.raises(ValueError, match="lengths"):
        ref.adam_step([np.zeros(2)], [], [np.zeros(2)], [np.zeros(2)], lr=0.1, beta1=0.9, beta2=0.9, eps=1e-8,
                      weight_decay=0, step=1, decoupled=False)
    with pytest.raises(ValueError, match="array 0"):
        ref.adam_step([np.zeros(2)], [np.zeros(3)], [np.zeros(2)], [np.zeros(2)], lr=0.1, beta1=0.9, beta2=0.9,
                      eps=1e-8, weight_decay=0, step=1, decoupled=False)
