"""The engine's own CUDA kernels on a real device against their NumPy references (tests/gpu/kernel_cases.py)."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_cases import CASES, DTYPES


def _device_or_reason() -> str | None:
    """None when CuPy sees a CUDA device, else why these tests cannot run here."""
    try:
        import cupy
    except Exception as error:  # noqa: BLE001 - any import failure means no GPU backend
        return f"no CuPy ({error}); pip install 'flowscope[cuda]' on a machine with a CUDA device"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # noqa: BLE001 - no driver, no device
        return f"no CUDA device: {error}"
    return None if count else "no CUDA device (CuPy found 0)"


REASON = _device_or_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=str(REASON))]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_kernel_matches_reference(case, dtype):
    import cupy

    from engine.backend.cuda import kernels

    case(cupy, kernels, dtype)
    cupy.cuda.Device().synchronize()


def test_modules_are_compiled_once_per_source_and_device():
    import cupy

    from engine.backend.cuda import kernels

    kernels.bias_activation_forward(cupy.ones((2, 3), cupy.float32), cupy.zeros(3, cupy.float32), "relu")
    first = kernels.module("bias_activation")
    assert kernels.module("bias_activation") is first
