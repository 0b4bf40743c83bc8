"""Shape ops and indexing: reshape, transpose, T, flatten, concat, stack, basic and integer-array indexing."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from gradcheck import check_op, random_array


@pytest.mark.parametrize("op,reference", [
    (lambda t: t.reshape((4, 6)), lambda a: a.reshape(4, 6)),
    (lambda t: t.reshape(4, 6), lambda a: a.reshape(4, 6)),
    (lambda t: t.reshape([-1, 3]), lambda a: a.reshape(-1, 3)),
    (lambda t: t.reshape(24), lambda a: a.reshape(24)),
    (lambda t: t.transpose(), lambda a: a.transpose()),
    (lambda t: t.transpose(1, 0, 2), lambda a: a.transpose(1, 0, 2)),
    (lambda t: t.transpose((2, 0, 1)), lambda a: a.transpose(2, 0, 1)),
    (lambda t: t.transpose(-1, 0, -2), lambda a: a.transpose(2, 0, 1)),
    (lambda t: t.T, lambda a: a.T),
    (lambda t: t.flatten(), lambda a: a.reshape(-1)),
    (lambda t: t.flatten(1), lambda a: a.reshape(2, 12)),
    (lambda t: t.flatten(0, 1), lambda a: a.reshape(6, 4)),
    (lambda t: t.flatten(-2, -1), lambda a: a.reshape(2, 12)),
])
def test_shape_ops(op, reference):
    check_op(op, reference, random_array((2, 3, 4), seed=31))


def test_flatten_and_reshape_of_0d():
    x = engine.tensor(3.0, requires_grad=True)
    assert x.flatten().shape == (1,) and x.reshape(1, 1).shape == (1, 1)
    x.reshape(1, 1).sum().backward()
    assert x.grad.shape == () and x.grad.item() == 1.0


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = {0: [(1, 3, 2), (2, 3, 2), (3, 3, 2)], 1: [(2, 1, 2), (2, 3, 2), (2, 2, 2)],
              -1: [(2, 3, 1), (2, 3, 3), (2, 3, 2)]}[axis]
    arrays = [random_array(s, seed=32 + i) for i, s in enumerate(shapes)]
    check_op(lambda *ts: engine.concat(ts, axis=axis), lambda *arrs: np.concatenate(arrs, axis=axis), *arrays)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_stack(axis):
    arrays = [random_array((2, 3), seed=35 + i) for i in range(3)]
    check_op(lambda *ts: engine.stack(ts, axis=axis), lambda *arrs: np.stack(arrs, axis=axis), *arrays)


def test_concat_and_stack_mix_constants_and_grads():
    a = engine.tensor(np.ones((2, 2)), requires_grad=True)
    out = engine.concat([a, np.zeros((1, 2))], axis=0)
    out2 = engine.stack([a, engine.tensor(np.zeros((2, 2)))], axis=1)
    (out.sum() + (out2 * 2).sum()).backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 2), 3.0))


BASIC_INDICES = [1, -1, slice(1, 3), slice(None, None, -1), (0, slice(None), 2), (Ellipsis, 1), (None, 1),
                 (slice(0, 3, 2), slice(None), slice(1, None)), (1, 2, 3), (slice(None), -1)]


@pytest.mark.parametrize("index", BASIC_INDICES, ids=repr)
def test_basic_indexing(index):
    check_op(lambda t: t[index], lambda a: a[index], random_array((3, 4, 5), seed=40))


ARRAY_INDICES = [
    np.array([0, 2, 2, 1, 2]),                              # repeated rows: gradients add up
    [1, 1, 1],                                              # a Python list, all repeated
    (np.array([0, 2, 0]), np.array([1, 1, 1])),             # pairs, (0, 1) twice
    (slice(None), np.array([3, 0, 3])),                     # mixed slice + array, repeated columns
    (np.array([[0, 1], [1, 0]]), slice(1, 3), 2),           # 2-d index array
    np.array([-1, 0, -1]),                                  # negative repeated indices
]


@pytest.mark.parametrize("index", ARRAY_INDICES, ids=repr)
def test_integer_array_indexing_scatter_adds(index):
    plain = np.asarray(index) if isinstance(index, list) else index
    check_op(lambda t: t[index], lambda a: a[plain], random_array((3, 4, 5), seed=41))


def test_repeated_index_gradient_counts_exactly():
    x = engine.tensor(np.zeros(4), requires_grad=True)
    x[[1, 1, 3, 1]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 3.0, 0.0, 1.0])
    y = engine.tensor(np.zeros(4), requires_grad=True)
    y[engine.tensor(np.array([2, 2]))].sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [0.0, 0.0, 2.0, 0.0])


def test_boolean_mask_indexing():
    values = random_array((3, 4), seed=42)
    mask = values > 0
    check_op(lambda t: t[mask], lambda a: a[mask], values)
    check_op(lambda t: t[engine.tensor(mask)], lambda a: a[mask], values)


def test_advanced_index_result_is_a_copy_not_a_view():
    x = engine.tensor(np.arange(4.0))
    y = x[[0, 1]]
    y.data[0] = 100.0
    assert x.numpy()[0] == 0.0


def test_iteration_and_len():
    x = engine.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
    rows = list(x)
    assert len(x) == 3 and [r.shape for r in rows] == [(2,)] * 3
    (rows[0] * 1 + rows[2] * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 1], [0, 0], [2, 2]])
