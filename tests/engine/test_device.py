"""Device placement on the CPU: device strings, why CUDA is unavailable, the mixed-device error, host round trips.

The GPU halves of these behaviours (real CuPy arrays) are in tests/gpu/.
"""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import backend, nn
from engine.backend import CPU, Device, DeviceMismatchError, common_device, cuda_backend, op_array_module
from engine.nn import functional as F


@pytest.fixture
def no_cupy(monkeypatch):
    """CUDA unavailable because CuPy failed to import (whatever this machine has)."""
    monkeypatch.setattr(cuda_backend, "cupy", None)
    monkeypatch.setattr(cuda_backend, "import_error", ModuleNotFoundError("No module named 'cupy'"))
    cuda_backend.unavailable_reason.cache_clear()
    yield
    cuda_backend.unavailable_reason.cache_clear()


class _FakeRuntime:
    """Stands in for ``cupy.cuda.runtime`` to check how each CUDA start-up failure is reported."""

    def __init__(self, error: Exception | None, count: int = 0) -> None:
        self.error, self.count = error, count

    def getDeviceCount(self) -> int:  # noqa: N802 - CuPy's name
        if self.error is not None:
            raise self.error
        return self.count

    def driverGetVersion(self) -> int:  # noqa: N802
        return 11040

    def runtimeGetVersion(self) -> int:  # noqa: N802
        return 13000


class _FakeCupy:
    ndarray = type("ndarray", (), {})  # no array is one: every array here is a host array

    def __init__(self, runtime: _FakeRuntime) -> None:
        self.cuda = type("cuda", (), {"runtime": runtime})()


@pytest.fixture
def fake_runtime(monkeypatch):
    def install(error: Exception | None, count: int = 0) -> None:
        monkeypatch.setattr(cuda_backend, "cupy", _FakeCupy(_FakeRuntime(error, count)))
        cuda_backend.unavailable_reason.cache_clear()
    yield install
    cuda_backend.unavailable_reason.cache_clear()


# --- device strings ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, kind, index, text", [
    ("cpu", "cpu", None, "cpu"), ("cuda", "cuda", None, "cuda"), ("cuda:0", "cuda", 0, "cuda:0"),
    ("cuda:3", "cuda", 3, "cuda:3"), (" CUDA:1 ", "cuda", 1, "cuda:1"), ("cpu:0", "cpu", None, "cpu"),
])
def test_device_strings_parse_as_torch(spec, kind, index, text):
    device = Device(spec)
    assert (device.type, device.index, str(device)) == (kind, index, text)
    assert device == text and device == Device(text) and hash(device) == hash(Device(text))


@pytest.mark.parametrize("spec", ["gpu", "cuda:", "cuda:-1", "cuda:x", "cpu:1", "", "cuda0"])
def test_bad_device_strings_name_the_string(spec):
    with pytest.raises(ValueError, match="device"):
        Device(spec)


def test_device_objects_and_ints():
    assert backend.as_device(2) == "cuda:2" and backend.as_device(CPU) is CPU
    assert engine.device("cuda", 1) == "cuda:1" and repr(engine.device("cuda:1")) == "device(type='cuda', index=1)"
    with pytest.raises(TypeError, match="device"):
        Device(3.5)
    with pytest.raises(ValueError, match="different index"):
        Device("cuda:0", 1)
    assert Device("cpu") != "cuda:0" and Device("cpu") != "banana"
    with pytest.raises(AttributeError):
        CPU.index = 3


# --- CPU tensors --------------------------------------------------------------------------------------------

def test_cpu_tensor_device_and_round_trips():
    t = engine.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True, device="cpu")
    assert t.device == "cpu" and isinstance(t.device, Device) and not t.is_cuda
    assert t.to("cpu") is t and t.cpu() is t and t.to(CPU) is t and t.to(device="cpu", non_blocking=True) is t
    host = t.numpy()
    assert type(host) is np.ndarray and np.array_equal(host, [[1, 2], [3, 4]])
    cast = t.to("cpu", "float64")
    assert cast.dtype == np.float64 and cast.device == "cpu" and cast.requires_grad
    cast.sum().backward()
    assert t.grad.dtype == np.float32 and np.array_equal(t.grad.numpy(), np.ones((2, 2)))
    other = engine.tensor([1, 2], dtype="int64")
    assert t.to(other).dtype == np.int64


def test_to_rejects_two_dtypes():
    with pytest.raises(TypeError, match="unexpected argument"):
        engine.tensor([1.0]).to("float64", "float32")


# --- CUDA unavailable: the reason is the real one ------------------------------------------------------------

def test_without_cupy_cuda_is_unavailable_and_says_why(no_cupy):
    assert engine.cuda.is_available() is False and engine.cuda.device_count() == 0
    assert "CuPy is not installed" in engine.cuda.unavailable_reason()
    t = engine.tensor([1.0, 2.0])
    for move in (lambda: t.to("cuda"), lambda: t.cuda(), lambda: engine.tensor([1.0], device="cuda:0"),
                 lambda: nn.Linear(2, 2).to("cuda"), engine.cuda.current_device, engine.cuda.synchronize):
        with pytest.raises(RuntimeError, match=r"CUDA is not available: CuPy is not installed .*flowscope\[cuda\]"):
            move()


def test_model_on_cpu_after_a_refused_move(no_cupy):
    model = nn.Linear(2, 2)
    before = [p.numpy().copy() for p in model.parameters()]
    with pytest.raises(RuntimeError):
        model.to("cuda")
    assert all(p.device == "cpu" for p in model.parameters())
    assert all(np.array_equal(a, p.numpy()) for a, p in zip(before, model.parameters()))


@pytest.mark.parametrize("message, expected", [
    ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version",
     "driver is too old for this CUDA runtime (driver supports CUDA 11.4, runtime supports CUDA 13.0)"),
    ("cudaErrorNoDevice: no CUDA-capable device is detected", "no CUDA device is visible"),
    ("cudaErrorUnknown: unknown error", "the CUDA runtime could not start"),
])
def test_runtime_failures_are_reported_by_cause(fake_runtime, message, expected):
    fake_runtime(RuntimeError(message))
    reason = engine.cuda.unavailable_reason()
    assert expected in reason and message in reason
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        engine.tensor([1.0]).to("cuda")


def test_zero_devices_is_reported(fake_runtime):
    fake_runtime(None, count=0)
    assert engine.cuda.unavailable_reason() == "no CUDA device is visible (the CUDA runtime reports 0 devices)"
    assert not engine.cuda.is_available()


# --- the mixed-device error -------------------------------------------------------------------------------

def test_mixed_devices_name_op_devices_and_module():
    with pytest.raises(DeviceMismatchError) as caught:
        common_device("Linear", [CPU, Device("cuda:0"), CPU], "encoder.fc1")
    error = caught.value
    assert isinstance(error, RuntimeError)
    assert (error.op, [str(d) for d in error.devices], error.module) == ("Linear", ["cpu", "cuda:0"], "encoder.fc1")
    assert str(error).startswith("op 'Linear' in module 'encoder.fc1' got inputs on different devices: cpu and "
                                 "cuda:0")
    with pytest.raises(DeviceMismatchError, match="outside any module.*cuda:0 and cuda:1"):
        common_device("Add", [Device("cuda:0"), Device("cuda:1")], "")
    assert common_device("Add", [Device("cuda:1")] * 3) == "cuda:1" and common_device("Add", []) == "cpu"


def test_device_check_on_host_arrays_picks_numpy(monkeypatch):
    """With the device check on (as once some data is on a GPU), host ops still run on NumPy, unchanged."""
    assert op_array_module("Add", [np.ones(2), np.ones(3)], "m") is np
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    model = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    expected = model(engine.tensor(x)).numpy()
    monkeypatch.setattr(cuda_backend, "in_use", True)
    out = model(engine.tensor(x))
    np.testing.assert_array_equal(out.numpy(), expected)
    F.cross_entropy(out, np.array([0, 1, 1, 0])).backward()
    assert all(p.grad is not None for p in model.parameters())


# --- modules, optimizers, checkpoints -----------------------------------------------------------------------

def test_module_to_cpu_and_dtype_in_place():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    params = list(model.parameters())
    assert model.to("cpu") is model and model.cpu() is model and model.to("cpu", non_blocking=True) is model
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    assert model.to("cpu", "float64") is model
    assert all(p.dtype == np.float64 for p in model.parameters())
    assert model[1].running_mean.dtype == np.float64 and model[1].num_batches_tracked.dtype == np.int64
    assert model.to(dtype="float32").float() is model and params[0].dtype == np.float32


def test_optimizer_state_is_restored_on_the_parameters_device_and_dtype():
    model = nn.Linear(3, 2)
    optimizer = engine.optim.Adam(model.parameters(), lr=0.1)
    F.mse_loss(model(engine.tensor(np.ones((4, 3), np.float32))), np.zeros((4, 2), np.float32)).backward()
    optimizer.step()
    saved = optimizer.state_dict()
    other = engine.optim.Adam(model.parameters(), lr=0.1)
    other.load_state_dict({"state": {k: {n: (v.numpy().astype(np.float64) if isinstance(v, engine.Tensor) else v)
                                         for n, v in s.items()} for k, s in saved["state"].items()},
                           "param_groups": saved["param_groups"]})
    for p in model.parameters():
        state = other.state[p]
        assert state["exp_avg"].device == p.device and state["exp_avg"].dtype == p.dtype
        np.testing.assert_array_equal(state["exp_avg"].numpy(), optimizer.state[p]["exp_avg"].numpy())


def _checkpoint_saved_on_gpu(path):
    """A checkpoint as a GPU machine writes it: host arrays, each tensor node naming the device it came from."""
    import json
    import zipfile

    from engine.serialization import FORMAT, META_KEY, VERSION
    tree = {"dict": [["w", {"tensor": "w", "device": "cuda:0"}], ["b", {"tensor": "b"}]]}
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2, np.float32),
              META_KEY: np.array(json.dumps({"format": FORMAT, "version": VERSION, "tree": tree}))}
    with zipfile.ZipFile(path, "w") as archive:
        for key, array in arrays.items():
            with archive.open(key + ".npy", "w") as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def test_load_a_gpu_checkpoint_on_the_cpu(tmp_path, no_cupy):
    path = tmp_path / "gpu.npz"
    _checkpoint_saved_on_gpu(path)
    with pytest.raises(RuntimeError, match=r"cannot load a tensor onto cuda:0 \(its saved device\).*"
                                           r"map_location='cpu'"):
        engine.load(path)
    for location in ("cpu", CPU, {"cuda:0": "cpu"}):
        loaded = engine.load(path, map_location=location)
        assert loaded["w"].device == "cpu" and np.array_equal(loaded["w"].numpy(), np.arange(6).reshape(2, 3))
    seen = []
    loaded = engine.load(path, map_location=lambda tensor, device: seen.append(device) or tensor)
    assert sorted(seen) == ["cpu", "cuda:0"] and loaded["b"].device == "cpu"
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        engine.load(path, map_location="gpu")


def test_save_load_cpu_round_trip_keeps_no_device_entry(tmp_path):
    model = nn.Linear(3, 2)
    engine.save(model.state_dict(), tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as archive:
        assert "device" not in str(archive["__flowscope_checkpoint__"])
    restored = nn.Linear(3, 2)
    restored.load_state_dict(engine.load(tmp_path / "m.npz", map_location="cpu"))
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(model.parameters(), restored.parameters()))


# --- the pipeline stage ---------------------------------------------------------------------------------------

def test_prefetch_to_cpu_yields_the_same_batches():
    x, y = np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10)
    base = engine.data.Dataset.from_tensor_slices({"x": x, "y": y}).batch(4)
    staged = base.prefetch_to_device("cpu", buffer_size=2)
    assert repr(staged).endswith("-> batch(4) -> to_device(cpu) -> prefetch(2)>") and len(staged) == 3
    for got, want in zip(staged, base, strict=True):
        assert np.array_equal(got["x"], want["x"]) and np.array_equal(got["y"], want["y"])
    assert len(list(engine.data.prefetch_to_device(base, "cpu"))) == 3


def test_prefetch_to_cuda_without_cuda_says_why(no_cupy):
    dataset = engine.data.Dataset.from_tensor_slices(np.zeros((4, 2))).batch(2)
    with pytest.raises(RuntimeError, match="CUDA is not available: CuPy is not installed"):
        dataset.prefetch_to_device("cuda")
    with pytest.raises(ValueError, match="buffer_size must be an integer >= 1"):
        dataset.prefetch_to_device("cpu", 0)
