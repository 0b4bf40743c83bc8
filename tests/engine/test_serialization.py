"""engine.save / engine.load: .npz round trips in tmp_path, no pickling, clear errors, bit-identical models."""
from __future__ import annotations

import zipfile

import numpy as np
import pytest

import engine
from engine import nn
from engine.optim import Adam
from engine.serialization import META_KEY, CheckpointError, load, save
from engine.tensor import Tensor


def test_flat_state_dict_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    state = {"fc1.weight": engine.tensor(rng.standard_normal((3, 4)).astype("float32")),
             "fc1.bias": rng.standard_normal(3),  # a plain ndarray (float64) comes back as a Tensor
             "steps": engine.tensor(np.array([1, 2, 3], dtype="int64"))}
    save(state, tmp_path / "model.npz")
    loaded = load(tmp_path / "model.npz")
    assert list(loaded) == list(state)
    for key, value in state.items():
        assert isinstance(loaded[key], Tensor)
        expected = value.numpy() if isinstance(value, Tensor) else value
        assert loaded[key].dtype == expected.dtype
        np.testing.assert_array_equal(loaded[key].numpy(), expected)


def test_numpy_reads_the_arrays_by_name(tmp_path):
    weight = np.arange(6, dtype="float32").reshape(2, 3)
    save({"layer.weight": weight}, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as archive:
        assert set(archive.files) == {"layer.weight", META_KEY}
        np.testing.assert_array_equal(archive["layer.weight"], weight)


def test_nested_structure_and_plain_values_round_trip(tmp_path):
    obj = {"state": {0: {"step": 3, "exp_avg": np.ones(2, dtype="float32")}},
           "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "amsgrad": False, "name": None, "params": [0, 1]}],
           "nan": float("nan"), "inf": float("-inf")}
    save(obj, tmp_path / "opt.npz")
    loaded = load(tmp_path / "opt.npz")
    assert set(loaded["state"]) == {0}  # int keys stay ints
    assert loaded["state"][0]["step"] == 3
    np.testing.assert_array_equal(loaded["state"][0]["exp_avg"].numpy(), np.ones(2))
    assert loaded["param_groups"] == [{"lr": 0.1, "betas": (0.9, 0.999), "amsgrad": False, "name": None,
                                       "params": [0, 1]}]
    assert np.isnan(loaded["nan"]) and loaded["inf"] == float("-inf")


def test_optimizer_state_round_trip_continues_identically(tmp_path):
    rng = np.random.default_rng(1)
    p = engine.tensor(rng.standard_normal(5).astype("float32"), requires_grad=True)
    optimizer = Adam([p], lr=0.01, betas=(0.8, 0.9), amsgrad=True)
    grads = [rng.standard_normal(5).astype("float32") for _ in range(4)]
    for g in grads[:2]:
        p.grad = engine.tensor(g)
        optimizer.step()
    save(optimizer.state_dict(), tmp_path / "opt.npz")
    q = engine.tensor(p.numpy().copy(), requires_grad=True)
    restored = Adam([q], lr=1.0)
    restored.load_state_dict(load(tmp_path / "opt.npz"))
    assert restored.param_groups[0]["betas"] == (0.8, 0.9)
    for g in grads[2:]:
        p.grad, q.grad = engine.tensor(g), engine.tensor(g)
        optimizer.step()
        restored.step()
    np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_model_round_trip_is_bit_identical(tmp_path):
    engine.manual_seed(5)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x = engine.tensor(np.random.default_rng(2).standard_normal((4, 8)).astype("float32"))
    save(model.state_dict(), tmp_path / "model.npz")
    engine.manual_seed(6)
    other = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    assert not np.array_equal(other(x).numpy(), model(x).numpy())
    other.load_state_dict(load(tmp_path / "model.npz"))
    assert other(x).numpy().tobytes() == model(x).numpy().tobytes()


def test_the_written_file_holds_no_pickle(tmp_path):
    save({"w": np.ones(3), "meta": {"k": [1, "a"]}}, tmp_path / "c.npz")
    with zipfile.ZipFile(tmp_path / "c.npz") as archive:
        for name in archive.namelist():
            with archive.open(name) as member:
                array = np.lib.format.read_array(member, allow_pickle=False)  # raises for pickled members
                assert array.dtype.kind != "O"


@pytest.mark.parametrize("value", [object(), {1.5: np.ones(1)}, {"x": np.array([object()])}, {"s": {1, 2}}])
def test_unsavable_values_are_refused(tmp_path, value):
    with pytest.raises(TypeError, match="cannot save"):
        save(value, tmp_path / "bad.npz")
    assert not list(tmp_path.iterdir())  # nothing half-written left behind


def test_a_plain_npz_loads_as_a_dict_of_tensors(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.arange(3), b=np.ones((2, 2)))
    loaded = load(tmp_path / "plain.npz")
    assert set(loaded) == {"a", "b"} and all(isinstance(v, Tensor) for v in loaded.values())


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        load(tmp_path / "nope.npz")


def test_not_an_npz_names_the_path(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, not a checkpoint")
    with pytest.raises(CheckpointError, match="notes.txt"):
        load(path)


def test_a_pickled_npy_is_refused(tmp_path):
    path = tmp_path / "objects.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CheckpointError, match="objects.npy"):
        load(path)


def test_corrupted_and_truncated_files_name_the_path(tmp_path):
    path = tmp_path / "model.npz"
    save({"w": np.arange(1000, dtype="float32")}, path)
    raw = bytearray(path.read_bytes())
    (tmp_path / "truncated.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CheckpointError, match="truncated.npz"):
        load(tmp_path / "truncated.npz")
    raw[200:210] = b"\xff" * 10  # inside the array data: the zip's CRC check fails
    (tmp_path / "flipped.npz").write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="flipped.npz"):
        load(tmp_path / "flipped.npz")


def test_a_newer_version_is_refused(tmp_path):
    import json
    arrays = {META_KEY: np.array(json.dumps({"format": "flowscope.checkpoint", "version": 99, "tree": {}}))}
    np.savez(tmp_path / "future.npz", **arrays)
    with pytest.raises(CheckpointError, match="version 99"):
        load(tmp_path / "future.npz")
