"""The CUDA C kernel sources shipped with the engine and the NVRTC options they are compiled with (no CuPy needed).

Every ``kernels/<name>.cu`` is a source: adding the file is all it takes for the check to compile it and for
``engine.backend.cuda.kernels`` to find its entry points (``extern "C" __global__ void <kernel>_f32(`` and ``_f64``).
An op names the source its CuPy branch launches in its ``cuda_kernel`` attribute (``engine.op.Function``).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

KERNEL_DIR = Path(__file__).parent / "kernels"
# NOTE: --fmad=false keeps a*b + c as two roundings (no fused multiply-add), as NumPy computes it, so that Adam,
# average pooling and col2im equal their NumPy references bit for bit.
OPTIONS = ("--std=c++14", "--fmad=false")
# CuPy adds these to every RawModule compile (flush float32 denormals to zero): the check compiles with them too.
CUPY_ADDED_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")
CHECK_ARCHITECTURES = ("sm_80", "sm_90")
_ENTRY = re.compile(r'extern "C" __global__ void (\w+)_f(?:32|64)\(')


@functools.cache
def source_names() -> tuple[str, ...]:
    """The name of every kernel source, ``kernels/<name>.cu``, sorted."""
    return tuple(sorted(path.stem for path in KERNEL_DIR.glob("*.cu")))


def source_path(name: str) -> Path:
    if name not in source_names():
        raise KeyError(f"no CUDA kernel source {name!r}; the engine ships {', '.join(source_names())}")
    return KERNEL_DIR / f"{name}.cu"


def read_source(name: str) -> str:
    return source_path(name).read_text(encoding="utf-8")


@functools.cache
def entry_sources() -> dict[str, str]:
    """Kernel name (without its ``_f32``/``_f64`` suffix) -> the source that defines it, read from the sources."""
    found: dict[str, str] = {}
    for name in source_names():
        for kernel in _ENTRY.findall(read_source(name)):
            if found.setdefault(kernel, name) != name:
                raise RuntimeError(f"CUDA kernel {kernel!r} is defined in both {found[kernel]}.cu and {name}.cu")
    return found
