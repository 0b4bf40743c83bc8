"""Dataset.shard against tf.data's definition (element i of a pass goes to shard i % num_shards), written out in
plain Python as the oracle, on the index-planned path (slices, repeat, take, batch) and the element path (map)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.data import INFINITE, Dataset


def _reference(elements, num_shards, index):
    return [e for i, e in enumerate(elements) if i % num_shards == index]


def _values(dataset):
    return [np.asarray(e).tolist() for e in dataset]


@pytest.mark.parametrize("n", [0, 1, 7, 12, 13])
@pytest.mark.parametrize("num_shards", [1, 2, 3, 4])
def test_shards_of_slices_partition_the_elements(n, num_shards):
    data = np.arange(n) * 10
    shards = [_values(Dataset.from_tensor_slices(data).shard(num_shards, k)) for k in range(num_shards)]
    for k, shard in enumerate(shards):
        assert shard == _reference(data.tolist(), num_shards, k)
        assert len(Dataset.from_tensor_slices(data).shard(num_shards, k)) == len(shard)
    assert sorted(sum(shards, [])) == data.tolist()  # every element exactly once


def test_shard_counts_positions_across_repeated_passes_and_batches():
    data = np.arange(5)
    repeated = np.tile(data, 3).tolist()
    for k in range(2):
        assert _values(Dataset.from_tensor_slices(data).repeat(3).shard(2, k)) == _reference(repeated, 2, k)
        batches = _values(Dataset.from_tensor_slices(data).repeat(3).shard(2, k).batch(3))
        expected = _reference(repeated, 2, k)
        assert batches == [expected[i:i + 3] for i in range(0, len(expected), 3)]


def test_shard_on_the_element_path_and_of_an_infinite_dataset():
    mapped = Dataset.from_tensor_slices(np.arange(9)).map(lambda x: x * 2)
    assert _values(mapped.shard(4, 3)) == _reference([x * 2 for x in range(9)], 4, 3)
    endless = Dataset.from_tensor_slices(np.arange(4)).repeat().shard(3, 1)
    assert endless._cardinality() == INFINITE
    assert _values(endless.take(5)) == _reference(list(range(4)) * 5, 3, 1)[:5]


def test_shard_of_a_shuffled_dataset_with_one_seed_covers_each_pass_once():
    data = np.arange(20)
    for epoch_passes in [_values(Dataset.from_tensor_slices(data).shuffle(20, seed=3).shard(3, k)) for k in range(3)]:
        assert len(set(epoch_passes)) == len(epoch_passes)
    union = sum((_values(Dataset.from_tensor_slices(data).shuffle(20, seed=3).shard(3, k)) for k in range(3)), [])
    assert sorted(union) == data.tolist()


@pytest.mark.parametrize("num_shards, index, message", [
    (0, 0, "num_shards must be an integer >= 1"),
    (2.0, 0, "num_shards must be an integer >= 1"),
    (2, 2, r"index must be an integer in \[0, num_shards\) = \[0, 2\), got 2"),
    (2, -1, r"index must be an integer in \[0, num_shards\)"),
    (3, True, "index must be an integer"),
])
def test_bad_shard_arguments_are_named(num_shards, index, message):
    with pytest.raises(ValueError, match=message):
        Dataset.from_tensor_slices(np.arange(4)).shard(num_shards, index)
