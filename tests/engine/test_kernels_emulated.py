"""The CUDA kernels and their launchers, run on the CPU by tests/engine/cuda_emulator.py, against the NumPy references
(the cases of tests/gpu/kernel_cases.py, which the GPU run uses too): the kernels' logic and every launch's arguments
are checked here without a device."""
from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest

import cuda_emulator
from engine.backend import cuda_backend
from tests.gpu.kernel_cases import CASES, DTYPES

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the kernel emulator compiles with g++")


@pytest.fixture(scope="module")
def emulated_kernels():
    """engine/backend/cuda/kernels.py loaded with the emulator as its ``cupy``."""
    return cuda_emulator.load_kernels()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_kernel_matches_reference_on_the_emulator(emulated_kernels, case, dtype, monkeypatch):
    monkeypatch.setitem(sys.modules, "engine.backend.cuda.kernels", emulated_kernels)  # for segment_stats' hook
    case(cuda_emulator, emulated_kernels, dtype)


def test_emulator_rejects_a_launch_with_wrong_argument_types(emulated_kernels):
    kernel = emulated_kernels._kernel("bias_activation_forward", np.float32)
    x = cuda_emulator.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match="argument 2"):
        kernel((1,), (32,), (x, x[0].copy(), 6, np.int64(3), np.int32(0), x))  # a Python int for a long long
    with pytest.raises(TypeError, match="array of float64"):
        kernel((1,), (32,), (x, cuda_emulator.zeros(3, np.float64), np.int64(6), np.int64(3), np.int32(0), x))


def test_public_statistics_use_the_kernels(emulated_kernels, monkeypatch):
    from engine.cuda import statistics

    monkeypatch.setitem(sys.modules, "engine.backend.cuda.kernels", emulated_kernels)
    a = np.array([[1.0, 0.0], [np.nan, 0.0], [-1.0, 2.0]])
    assert statistics.dead_unit_counts(cuda_emulator.asarray(a)).tolist() == [2, 2]
    sums = statistics.segment_statistics(cuda_emulator.asarray(a.reshape(-1)), np.array([0, 4]), np.array([4, 2]))[0]
    assert np.isnan(sums[0]) and sums[1] == 5.0


def test_public_statistics_without_cupy_say_why():
    from engine.cuda import statistics

    if cuda_backend.cupy is not None:
        pytest.skip("CuPy is installed here")
    with pytest.raises(RuntimeError, match="CuPy|CUDA"):
        statistics.dead_unit_counts(np.zeros((2, 2)))


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_grid_stride_loops_cover_everything_with_one_block(emulated_kernels, case, monkeypatch):
    """With the grid capped at one block, every thread loops over many elements (as on inputs past MAX_BLOCKS)."""
    monkeypatch.setitem(sys.modules, "engine.backend.cuda.kernels", emulated_kernels)
    monkeypatch.setattr(emulated_kernels, "MAX_BLOCKS", 1)
    case(cuda_emulator, emulated_kernels, np.float64)


def test_launchers_name_what_is_wrong(emulated_kernels):
    with pytest.raises(TypeError, match="im2col: float32 or float64"):
        emulated_kernels.im2col(cuda_emulator.zeros((1, 1, 3, 3), np.int64), 2, 2, 1, 1)
    with pytest.raises(TypeError, match="expected a cupy array"):
        emulated_kernels.avg_pool2d_forward(np.zeros((1, 1, 3, 3)), 2, 2, 1, 1)
    with pytest.raises(ValueError, match=r"labels must be \(3,\)"):
        emulated_kernels.softmax_cross_entropy_forward(cuda_emulator.zeros((3, 4)), np.zeros(2, np.int64), -100)
    with pytest.raises(ValueError, match="kind must be one of"):
        emulated_kernels.bias_activation_forward(cuda_emulator.zeros((3, 4)), cuda_emulator.zeros(4), "swish")
