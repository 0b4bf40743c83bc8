"""Device objects and device strings ("cpu", "cuda", "cuda:1"), as ``torch.device``."""
from __future__ import annotations

import re
from typing import Any

_PATTERN = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


class Device:
    """Where a tensor's data lives: ``Device("cpu")``, ``Device("cuda:0")``; equal to its string form.

    ``index`` is None for "cpu" and for a bare "cuda" (the current CUDA device, resolved when data is moved).
    """

    __slots__ = ("type", "index")

    def __init__(self, spec: Any, index: int | None = None) -> None:
        if isinstance(spec, Device):
            spec, index = spec.type, spec.index if index is None else index
        if not isinstance(spec, str):
            raise TypeError(f"a device is a string such as 'cpu', 'cuda' or 'cuda:0' (or a Device), "
                            f"got {type(spec).__name__} {spec!r}")
        match = _PATTERN.match(spec.strip().lower())
        if match is None:
            raise ValueError(f"unknown device {spec!r}: expected 'cpu', 'cuda' or 'cuda:<index>'")
        kind, number = match.group(1), match.group(2)
        if number is not None and index is not None and int(number) != index:
            raise ValueError(f"device {spec!r} given with a different index {index}")
        if number is not None:
            index = int(number)
        if kind == "cpu" and index not in (None, 0):
            raise ValueError(f"device {spec!r}: the CPU has no index other than 0")
        if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
            raise ValueError(f"device index must be a non-negative int, got {index!r}")
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "index", None if kind == "cpu" else index)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Device is immutable")

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = Device(other)
            except ValueError:
                return False
        if not isinstance(other, Device):
            return NotImplemented
        return self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash(str(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return Device, (str(self),)


CPU = Device("cpu")


def as_device(spec: Any) -> Device:
    """``spec`` (a Device, "cpu", "cuda", "cuda:N" or an int N meaning "cuda:N") as a Device."""
    if isinstance(spec, Device):
        return spec
    if isinstance(spec, int) and not isinstance(spec, bool):
        return Device("cuda", spec)
    return Device(spec)


def is_device_spec(value: Any) -> bool:
    """True when ``value`` names a device (used by ``to()`` to tell a device from a dtype)."""
    if isinstance(value, Device):
        return True
    return isinstance(value, str) and _PATTERN.match(value.strip().lower()) is not None


def to_arguments(what: str, args: tuple[Any, ...], device: Any, dtype: Any) -> tuple[Any, Any]:
    """(device, dtype) from the positional arguments of ``to()`` (a device, a dtype, or both, in either order)."""
    for arg in args:
        if device is None and is_device_spec(arg):
            device = arg
        elif dtype is None:
            dtype = arg
        else:
            raise TypeError(f"{what}: unexpected argument {arg!r} (give a device, a dtype, or both)")
    return device, dtype
