"""The CUDA C kernel sources shipped with the engine and the NVRTC options they are compiled with (no CuPy needed)."""
from __future__ import annotations

from pathlib import Path

KERNEL_DIR = Path(__file__).parent / "kernels"
SOURCES = ("softmax_xent", "bias_activation", "im2col", "pool", "adam", "statistics")  # kernels/<name>.cu
# NOTE: --fmad=false keeps a*b + c as two roundings (no fused multiply-add), as NumPy computes it, so that Adam,
# average pooling and col2im equal their NumPy references bit for bit.
OPTIONS = ("--std=c++14", "--fmad=false")
# CuPy adds these to every RawModule compile (flush float32 denormals to zero): the check compiles with them too.
CUPY_ADDED_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")
CHECK_ARCHITECTURES = ("sm_80", "sm_90")


def source_path(name: str) -> Path:
    if name not in SOURCES:
        raise KeyError(f"no CUDA kernel source {name!r}; the engine ships {', '.join(SOURCES)}")
    return KERNEL_DIR / f"{name}.cu"


def read_source(name: str) -> str:
    return source_path(name).read_text(encoding="utf-8")
