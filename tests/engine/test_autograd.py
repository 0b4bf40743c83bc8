"""Autodiff semantics: engine.grad, accumulation, retain_graph, graph freeing, dtype rules, Tensor conversions."""
from __future__ import annotations

import numpy as np
import pytest

import engine


def _leaf(values, dtype=np.float64):
    return engine.tensor(np.asarray(values, dtype=dtype), requires_grad=True)


def test_grad_wrt_leaf_and_non_leaf_inputs_leaves_dot_grad_untouched():
    x = _leaf([1.0, 2.0, 3.0])
    hidden = x * x                     # non-leaf input
    loss = (hidden * 3.0).sum()
    g_x, g_hidden = engine.grad(loss, [x, hidden])
    np.testing.assert_allclose(g_x.numpy(), 6 * x.numpy())
    np.testing.assert_allclose(g_hidden.numpy(), np.full(3, 3.0))
    assert x.grad is None and hidden.grad is None
    assert not g_x.requires_grad and g_x.dtype == x.dtype


def test_grad_of_unused_input_is_zeros():
    x, unused = _leaf([1.0, 2.0]), _leaf([[5.0, 6.0]])
    g_x, g_unused = engine.grad((x * 2).sum(), [x, unused])
    np.testing.assert_array_equal(g_x.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(g_unused.numpy(), np.zeros((1, 2)))
    assert g_unused.shape == unused.shape


def test_grad_with_grad_outputs_and_several_outputs():
    x = _leaf([1.0, 2.0])
    y1, y2 = x * 2, x * x
    (g,) = engine.grad([y1, y2], [x], [np.array([1.0, 10.0]), engine.tensor(np.array([1.0, 1.0]))])
    np.testing.assert_allclose(g.numpy(), [2.0 + 2.0, 20.0 + 4.0])
    with pytest.raises(ValueError, match="grad_outputs has 1 entries for 2 outputs"):
        engine.grad([x * 2, x * 3], [x], [np.ones(2)])


def test_grad_frees_the_graph_unless_retained():
    x = _leaf([1.0, 2.0])
    loss = (x.exp() * x).sum()
    first = engine.grad(loss, x, retain_graph=True)[0].numpy()
    second = engine.grad(loss, x)[0].numpy()
    np.testing.assert_array_equal(first, second)
    with pytest.raises(RuntimeError, match="second time"):
        engine.grad(loss, x)


def test_grad_rejects_inputs_without_requires_grad():
    x = _leaf([1.0])
    with pytest.raises(RuntimeError, match="input 1 of grad"):
        engine.grad((x * 2).sum(), [x, engine.tensor([1.0])])


def test_backward_accumulates_into_grad_across_calls():
    x = _leaf([1.0, -2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 + 2 * x.numpy())


def test_retain_graph_allows_a_second_backward_and_doubles_grad():
    x = _leaf([0.5, 1.5])
    y = (x.tanh() * x).sum()
    y.backward(retain_graph=True)
    once = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * once)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_diamond_graph_sums_both_paths():
    x = _leaf([2.0])
    a = x * 3
    y = (a * a + a).sum()  # dy/dx = (2a + 1) * 3
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [(2 * 6 + 1) * 3])


def test_leaf_grad_is_independent_of_later_backward_buffers():
    x = _leaf([1.0, 2.0])
    (x + 0.0).sum().backward()
    grad = x.grad
    (x * 2).sum().backward()
    assert x.grad is grad  # accumulated in place, like torch
    np.testing.assert_array_equal(grad.numpy(), [3.0, 3.0])


def test_no_grad_records_nothing_and_enable_grad_restores():
    x = _leaf([1.0])
    with engine.no_grad():
        y = x * 2
        assert not engine.is_grad_enabled()
        with engine.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and engine.is_grad_enabled()


@pytest.mark.parametrize("data,dtype", [
    (1.5, np.float32), ([1.0, 2.0], np.float32), ([[1, 2]], np.int64), ([True], np.bool_),
    (np.array([1.0]), np.float64), (np.float64(2.0), np.float64), (np.array([1.0], dtype=np.float32), np.float32),
    (np.array([1], dtype=np.int32), np.int32),
])
def test_dtype_of_new_tensors(data, dtype):
    assert engine.tensor(data).dtype == dtype


def test_dtype_argument_and_unknown_dtype():
    assert engine.tensor([1, 2], dtype="float64").dtype == np.float64
    with pytest.raises(TypeError, match="unknown dtype"):
        engine.tensor([1.0], dtype="float77")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_python_scalars_do_not_change_dtype(dtype):
    x = engine.tensor(np.ones(3, dtype=dtype), requires_grad=True)
    for result in (x + 1, 2.5 * x, x / 3.0, x ** 2, 1.0 - x, x ** 0.5, engine.where(x > 0, x, 0.0)):
        assert result.dtype == dtype
    (x * 2.5).sum().backward()
    assert x.grad.dtype == dtype


def test_integer_tensor_with_python_float_becomes_default_float():
    assert (engine.tensor([1, 2]) * 0.5).dtype == np.float32
    assert (engine.tensor([1, 2]) + 1).dtype == np.int64
    assert (engine.tensor([1, 2]) / 2).dtype == np.float32 and (3 / engine.tensor([1, 2])).dtype == np.float32
    assert (1.5 + engine.tensor([1, 2])).dtype == np.float32


def test_data_is_writable_in_place_under_no_grad():
    w = _leaf([1.0, 2.0], np.float32)
    (w * w).sum().backward()
    with engine.no_grad():
        w.data -= 0.5 * w.grad.data
        w.data[0] = 7.0
    np.testing.assert_allclose(w.numpy(), [7.0, 0.0])  # 2 - 0.5 * (2 * 2)
    assert w.dtype == np.float32 and w.is_leaf and w.requires_grad
    with pytest.raises(ValueError, match=r"shape \(3,\) to a tensor of shape \(2,\)"):
        w.data = np.zeros(3)


def test_detach_shares_data_and_leaves_the_graph():
    x = _leaf([1.0, 2.0])
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    d.data[0] = 100.0
    assert y.numpy()[0] == 100.0  # shares the buffer, like torch.Tensor.detach


def test_item_numpy_tolist_float_int():
    x = engine.tensor([[2.5]])
    assert x.item() == 2.5 and isinstance(x.item(), float) and float(x) == 2.5 and int(x) == 2
    assert engine.tensor(3).item() == 3 and isinstance(engine.tensor(3).item(), int)
    assert isinstance(x.numpy(), np.ndarray) and x.tolist() == [[2.5]]
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match=r"one element, got shape \(2,\)"):
        engine.tensor([1.0, 2.0]).item()


def test_requires_grad_only_on_leaves():
    x = _leaf([1.0])
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2).requires_grad_(False)
    y = engine.tensor([1.0]).requires_grad_()
    assert y.requires_grad


def test_cast_to_float_keeps_gradient_and_to_int_drops_it():
    x = _leaf([1.5, 2.5], np.float32)
    y = x.astype("float64")
    assert y.dtype == np.float64 and y.requires_grad
    (y * 2).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    assert not x.astype("int32").requires_grad
