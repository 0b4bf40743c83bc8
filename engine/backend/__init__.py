"""Array backends: NumPy on the CPU, CuPy on CUDA devices; ops pick ``xp`` from their data once.

Backend-specific code lives under this package: array-module selection and device strings here, CuPy and the
CUDA runtime in ``cuda_backend`` (availability, copies, streams, events), kernels, the allocator hook and timing
under ``engine.backend.cuda``.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from engine.backend import cuda_backend
from engine.backend.device import CPU, Device, as_device, is_device_spec, to_arguments
from engine.backend.numpy_backend import device_of, get_array_module, is_device_array

__all__ = ["CPU", "Device", "DeviceMismatchError", "array_device", "as_device", "common_device", "cuda_backend",
           "device_of", "get_array_module", "is_device_array", "is_device_spec", "op_array_module", "resolve",
           "to_arguments", "to_device"]


class DeviceMismatchError(RuntimeError):
    """An op got inputs on different devices (as PyTorch's "Expected all tensors to be on the same device")."""

    def __init__(self, op: str, devices: list[Device], module: str) -> None:
        self.op, self.devices, self.module = op, devices, module
        where = f"in module '{module}'" if module else "outside any module"
        names = " and ".join(str(d) for d in devices)
        super().__init__(f"op '{op}' {where} got inputs on different devices: {names}; move them to one device "
                         f"first (tensor.to(device), module.to(device))")


def common_device(op: str, devices: Iterable[Device], module: str = "") -> Device:
    """The one device of an op's inputs, or a ``DeviceMismatchError`` naming the op, the devices and the module."""
    found: list[Device] = []
    for device in devices:
        if device not in found:
            found.append(device)
    if len(found) > 1:
        raise DeviceMismatchError(op, found, module)
    return found[0] if found else CPU


_known: dict[str, Device] = {"cpu": CPU}  # device string -> its Device (made once)


def array_device(array: Any) -> Device:
    if type(array) is np.ndarray:
        return CPU
    name = device_of(array)
    found = _known.get(name)
    if found is None:
        found = _known[name] = Device(name)
    return found


def op_array_module(op: str, arrays: Sequence[Any], module: str) -> Any:
    """``xp`` for an op once some data lives on a GPU: the inputs' one device's array module, after checking that
    every input is on that device (compared as strings: this runs for every op)."""
    first = None
    for array in arrays:
        name = "cpu" if type(array) is np.ndarray else device_of(array)
        if first is None:
            first = name
        elif name != first:
            common_device(op, (array_device(a) for a in arrays), module)  # raises, naming every device
    return np if first is None or first == "cpu" else cuda_backend.cupy


def resolve(spec: Any) -> Device:
    """``spec`` as a concrete device: "cuda" becomes "cuda:<current>"; a CUDA device when CUDA is unavailable is a
    RuntimeError saying why."""
    device = as_device(spec)
    if device.type == "cpu":
        return CPU
    cuda_backend.require_cuda()
    index = cuda_backend.current_device() if device.index is None else cuda_backend.check_index(device.index)
    return Device("cuda", index)


def to_device(array: Any, spec: Any) -> Any:
    """``array`` (numpy or cupy) on device ``spec``: itself when it is already there, else a copy."""
    device = resolve(spec)
    if device.type == "cpu":
        return array if type(array) is np.ndarray or not is_device_array(array) else cuda_backend.to_host(array)
    if is_device_array(array) and array.device.id == device.index:
        return array
    return cuda_backend.to_device(array, device.index)
