"""Bad input fails with an error that names the shapes, dtypes or axis involved."""
from __future__ import annotations

import re

import numpy as np
import pytest

import engine


def _t(shape, dtype=np.float32, requires_grad=False):
    return engine.tensor(np.ones(shape, dtype=dtype), requires_grad=requires_grad)


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3), (2, 3)), ((4,), (5,)), ((2, 3, 4), (5, 6))])
def test_matmul_misaligned_names_both_shapes(a_shape, b_shape):
    with pytest.raises(ValueError) as info:
        _t(a_shape) @ _t(b_shape)
    message = str(info.value)
    assert str(a_shape) in message and str(b_shape) in message and "matmul" in message


def test_matmul_batch_dims_that_do_not_broadcast():
    with pytest.raises(ValueError, match=re.escape("(2, 3, 4) and (5, 4, 6) cannot be broadcast")):
        _t((2, 3, 4)) @ _t((5, 4, 6))


def test_matmul_of_0d_names_shapes():
    with pytest.raises(ValueError, match=re.escape("shapes () and (3,)")):
        _t(()) @ _t((3,))


@pytest.mark.parametrize("op,symbol", [(lambda a, b: a + b, "+"), (lambda a, b: a - b, "-"),
                                       (lambda a, b: a * b, "*"), (lambda a, b: a / b, "/"),
                                       (lambda a, b: a ** b, "**")])
def test_broadcast_failure_names_both_shapes_and_dtypes(op, symbol):
    with pytest.raises(ValueError) as info:
        op(_t((3, 4)), _t((2, 5), np.float64))
    message = str(info.value)
    assert "(3, 4) (float32)" in message and "(2, 5) (float64)" in message and f"'{symbol}'" in message


def test_compare_and_where_broadcast_failures_name_shapes():
    with pytest.raises(ValueError, match=re.escape("shapes (3,) and (4,)")):
        _t((3,)) < _t((4,))
    with pytest.raises(ValueError, match=re.escape("condition (3,), a (3,) (float32) and b (4,) (float32)")):
        engine.where(np.ones(3, bool), _t((3,)), _t((4,)))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_tensors_cannot_require_grad(dtype):
    with pytest.raises(TypeError, match=f"got dtype {np.dtype(dtype)}"):
        engine.tensor(np.ones(2, dtype=dtype), requires_grad=True)
    with pytest.raises(TypeError, match=f"got dtype {np.dtype(dtype)}"):
        engine.tensor(np.ones(2, dtype=dtype)).requires_grad_()


def test_unsupported_data_names_its_dtype():
    with pytest.raises(TypeError, match="dtype complex128"):
        engine.tensor(np.array([1 + 2j]))


def test_backward_on_non_scalar_needs_grad():
    y = _t((2, 3), requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=re.escape("only for scalar outputs; this output has shape (2, 3)")):
        y.backward()
    with pytest.raises(ValueError, match=re.escape("grad of shape (3,) does not match the output's shape (2, 3)")):
        y.backward(np.ones(3))


def test_backward_without_requires_grad_names_shape():
    with pytest.raises(RuntimeError, match=re.escape("does not require grad (shape (), dtype float32)")):
        _t((2,)).sum().backward()


def test_second_backward_through_freed_graph_names_op_and_fix():
    x = _t((3,), requires_grad=True)
    hidden = x.exp()
    hidden.sum().backward()
    with pytest.raises(RuntimeError, match="second time.*'Exp'.*retain_graph=True"):
        (hidden * 2).sum().backward()


@pytest.mark.parametrize("shape", [(4, 2), (7,), (-1, 4)])
def test_bad_reshape_names_shapes(shape):
    with pytest.raises(ValueError, match=re.escape(f"shape (2, 3) (6 elements) into {shape}")):
        _t((2, 3)).reshape(shape)


@pytest.mark.parametrize("call", [
    lambda x: x.sum(axis=3), lambda x: x.mean(axis=(0, -4)), lambda x: x.max(axis=5), lambda x: x.min(axis=-3),
    lambda x: x.softmax(axis=2), lambda x: x.log_softmax(axis=-3), lambda x: x.flatten(4),
    lambda x: engine.concat([x, x], axis=2),
], ids=["sum", "mean", "max", "min", "softmax", "log_softmax", "flatten", "concat"])
def test_bad_axis_names_axis_and_shape(call):
    with pytest.raises(ValueError, match=r"axis -?\d+ is out of range for a tensor of shape \(2, 3\)"):
        call(_t((2, 3)))


def test_bad_stack_axis_and_transpose_axes():
    with pytest.raises(ValueError, match=re.escape("stack of 2 tensors of shape (2, 3): axis 3 is out of range")):
        engine.stack([_t((2, 3)), _t((2, 3))], axis=3)
    for axes in [(0, 5), (0, 0), (1,)]:
        with pytest.raises(ValueError, match=re.escape(f"transpose axes {axes} are not a permutation of the 2 axes "
                                                       "of (2, 3)")):
            _t((2, 3)).transpose(axes)


def test_repeated_axis():
    with pytest.raises(ValueError, match="repeated axis"):
        _t((2, 3)).sum(axis=(1, -1))


def test_concat_and_stack_shape_mismatch_list_every_shape():
    with pytest.raises(ValueError, match=re.escape("same shape except along axis 0, got (2, 3), (2, 4)")):
        engine.concat([_t((2, 3)), _t((2, 4))])
    with pytest.raises(ValueError, match=re.escape("same shape, got (2, 3), (3, 2)")):
        engine.stack([_t((2, 3)), _t((3, 2))])


def test_bad_index_names_index_and_shape():
    with pytest.raises(IndexError, match=re.escape("is invalid for a tensor of shape (2, 3)")):
        _t((2, 3))[5]
    with pytest.raises(IndexError, match=re.escape("index [array(2,)] is invalid for a tensor of shape (2, 3)")):
        _t((2, 3))[np.array([0, 9])]


def test_clip_without_bounds():
    with pytest.raises(ValueError, match="at least one of min and max"):
        _t((2,)).clip()
