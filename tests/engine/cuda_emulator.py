"""A CuPy stand-in that runs the engine's CUDA C kernels on the CPU, for tests on machines without a GPU.

``RawModule`` compiles the kernel source as C++ with ``cuda_emulation.h`` (g++, C++20) plus one generated launcher
per ``extern "C"`` kernel; a launch checks every argument against the kernel's declared parameter types (count,
pointer element type, scalar type) and runs the grid block by block, one thread per CUDA thread. "Device" arrays are
host arrays of a NumPy subclass whose ``data.ptr`` is their address. Only what engine/backend/cuda/kernels.py uses.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np

HEADER = Path(__file__).with_name("cuda_emulation.h")
_SIGNATURE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)')
_POINTEE = {"float": [np.float32], "double": [np.float64], "long long": [np.int64], "unsigned int": [np.uint32],
            "unsigned long long": [np.uint64, np.int64]}  # the array dtypes each pointer type accepts
_SCALARS = {"int": (np.int32, ctypes.c_int32), "long long": (np.int64, ctypes.c_int64),
            "float": (np.float32, ctypes.c_float), "double": (np.float64, ctypes.c_double)}


class ndarray(np.ndarray):
    """A 'device' array: a host array whose ``data.ptr`` is its address, as CuPy's."""

    @property
    def data(self) -> Any:  # type: ignore[override]
        return types.SimpleNamespace(ptr=self.ctypes.data)

    def get(self) -> np.ndarray:
        return asnumpy(self)


ndarray.__module__ = "cupy_emulated"  # instrumentation's segment_stats tells CuPy buffers by their module


def _device(array: np.ndarray) -> ndarray:
    return np.ascontiguousarray(array).view(ndarray)


def asarray(a: Any, dtype: Any = None) -> ndarray:
    if isinstance(a, ndarray) and (dtype is None or a.dtype == np.dtype(dtype)):
        return a
    return _device(np.array(a, dtype=dtype, copy=True))  # a copy, as a host-to-device transfer


def ascontiguousarray(a: Any, dtype: Any = None) -> ndarray:
    if isinstance(a, ndarray) and a.flags.c_contiguous and (dtype is None or a.dtype == np.dtype(dtype)):
        return a
    return asarray(np.ascontiguousarray(a, dtype=dtype))


def asnumpy(a: Any) -> np.ndarray:
    return np.array(a, copy=True).view(np.ndarray)


def empty(shape: Any, dtype: Any = np.float64) -> ndarray:
    return _device(np.full(shape, np.nan if np.dtype(dtype).kind == "f" else 0x5A, dtype))  # garbage, visibly


def zeros(shape: Any, dtype: Any = np.float64) -> ndarray:
    return _device(np.zeros(shape, dtype))


def full(shape: Any, value: Any, dtype: Any = None) -> ndarray:
    return _device(np.full(shape, value, dtype))


def empty_like(a: np.ndarray) -> ndarray:
    return empty(a.shape, a.dtype)


float32, float64, int64, uint32 = np.float32, np.float64, np.int64, np.uint32


class _Device:
    id = 0

    def synchronize(self) -> None:
        pass


cuda = types.SimpleNamespace(Device=_Device)


def _parameters(text: str) -> list[tuple[str, str]]:
    """(kernel name, parameter types) of each ``extern "C"`` kernel, from the preprocessed source."""
    kernels = []
    for name, params in _SIGNATURE.findall(text):
        types_ = [" ".join(param.strip().rsplit(None, 1)[0].split()) for param in params.split(",")]
        kernels.append((name, [t.replace(" *", "*") for t in types_]))
    return kernels


def _wrappers(kernels: list[tuple[str, list[str]]]) -> str:
    lines = []
    for name, params in kernels:
        call = ", ".join(f"*({t}*)args[{i}]" for i, t in enumerate(params))
        lines.append(f'extern "C" void launch_{name}(unsigned gx, unsigned gy, unsigned bx, unsigned by, void** args)'
                     f" {{ emulated_launch(gx, gy, bx, by, [args]() {{ {name}({call}); }}); }}")
    return "\n".join(lines)


class _Kernel:
    def __init__(self, lib: ctypes.CDLL, name: str, params: list[str]) -> None:
        self.name, self.params = name, params
        self.launch = getattr(lib, f"launch_{name}")

    def _argument(self, index: int, declared: str, value: Any) -> Any:
        where = f"{self.name} argument {index} ({declared})"
        if declared.endswith("*"):
            pointee = declared.removeprefix("const ").removesuffix("*").strip()
            if not isinstance(value, ndarray) or not value.flags.c_contiguous:
                raise TypeError(f"{where}: needs a contiguous device array, got {type(value).__name__}")
            if value.dtype not in _POINTEE[pointee]:
                raise TypeError(f"{where}: got an array of {value.dtype}")
            return ctypes.c_void_p(value.ctypes.data)
        numpy_type, c_type = _SCALARS[declared]
        if type(value) is not numpy_type:
            raise TypeError(f"{where}: got {type(value).__name__} {value!r}")
        return c_type(value)

    def __call__(self, grid: tuple, block: tuple, args: tuple) -> None:
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}: {len(self.params)} parameters, {len(args)} arguments")
        values = [self._argument(i, t, a) for i, (t, a) in enumerate(zip(self.params, args))]
        pointers = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        grid, block = tuple(grid) + (1,), tuple(block) + (1,)
        if not all(0 < int(g) < 2 ** 31 for g in grid[:2]) or int(block[0]) * int(block[1]) > 1024:
            raise ValueError(f"{self.name}: bad launch shape grid={grid} block={block}")
        self.launch(ctypes.c_uint(int(grid[0])), ctypes.c_uint(int(grid[1])), ctypes.c_uint(int(block[0])),
                    ctypes.c_uint(int(block[1])), pointers)


class RawModule:
    """Compiles ``code`` for the CPU (cached by content in ``build_dir``); ``options`` are NVRTC's and only kept."""

    build_dir = Path("/tmp/flowscope-cuda-emulator")

    def __init__(self, code: str, options: tuple[str, ...] = ()) -> None:
        self.options = options
        header = HEADER.read_text()
        preprocessed = subprocess.run(["g++", "-E", "-P", "-x", "c++", "-"], input=code, capture_output=True,
                                      text=True, check=True).stdout
        self.kernels = dict(_parameters(preprocessed))
        program = f'#include "{HEADER}"\n{code}\n{_wrappers(list(self.kernels.items()))}\n'
        digest = hashlib.sha256((header + program).encode()).hexdigest()[:16]
        self.build_dir.mkdir(parents=True, exist_ok=True)
        library = self.build_dir / f"{digest}.so"
        if not library.exists():  # NOTE: per-process scratch names, then an atomic rename: parallel runs are safe
            source = self.build_dir / f"{digest}-{os.getpid()}.cpp"
            source.write_text(program)
            scratch = self.build_dir / f"{digest}-{os.getpid()}.so"
            built = subprocess.run(["g++", "-std=c++20", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-pthread",
                                    "-o", str(scratch), str(source)], capture_output=True, text=True)
            if built.returncode:
                raise RuntimeError(f"emulated compile failed:\n{built.stderr}")
            scratch.replace(library)
            source.unlink()
        self.lib = ctypes.CDLL(str(library))

    def get_function(self, name: str) -> _Kernel:
        if name not in self.kernels:
            raise AttributeError(f"no kernel {name} in the module")
        return _Kernel(self.lib, name, self.kernels[name])


def load_kernels() -> types.ModuleType:
    """engine/backend/cuda/kernels.py loaded with this emulator as its ``cupy`` (a module of its own)."""
    from engine.backend import cuda_backend
    from engine.backend.cuda import sources

    saved = cuda_backend.cupy
    cuda_backend.cupy = sys.modules[__name__]
    try:
        path = sources.KERNEL_DIR.parent / "kernels.py"
        spec = importlib.util.spec_from_file_location("engine.backend.cuda.kernels", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        cuda_backend.cupy = saved
    return module
