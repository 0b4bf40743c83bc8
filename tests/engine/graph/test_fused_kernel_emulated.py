"""Fused elementwise chains on (emulated) device arrays run as one generated CUDA C kernel: launched on the CPU by
tests/engine/cuda_emulator.py (the kernel compiled with g++ against cuda_emulation.h), the bits are the NumPy ufunc
chain's, for hand-built chains (tests/gpu/fusion_cases.py, which the GPU run uses too) and for the fused nodes of a
traced MLP training step."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.backend import cuda_backend
from engine.graph.passes import fusion
from tests.gpu.fusion_cases import (CHAINS, DTYPES, RESIDUAL_CHAINS, SHAPE, chain_matches_host, fused_node,
                                    residual_training, same_bits, values)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import cuda_emulator  # noqa: E402

pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="the kernel emulator compiles with g++"),
              pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")]  # the planted zeros, inf, NaN


@pytest.fixture(scope="module")
def loaded_kernels():
    return cuda_emulator.load_kernels()


@pytest.fixture
def emulated(loaded_kernels, monkeypatch):
    """The emulator as CuPy: device arrays are ``cuda_emulator.ndarray``, the launchers those of ``loaded_kernels``."""
    monkeypatch.setattr(cuda_backend, "cupy", cuda_emulator)
    monkeypatch.setattr(cuda_backend, "in_use", True)
    monkeypatch.setitem(sys.modules, "engine.backend.cuda.kernels", loaded_kernels)
    return loaded_kernels


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("chain", list(CHAINS))
def test_generated_kernel_gives_the_ufunc_chains_bits(emulated, chain, dtype):
    chain_matches_host(cuda_emulator, chain, dtype)


def test_grid_stride_loop_covers_every_element_with_one_block(emulated, monkeypatch):
    monkeypatch.setattr(emulated, "MAX_BLOCKS", 1)
    node = fused_node(*CHAINS["add_neg_mul_sub"][:2], np.float64)
    host = [values(np.random.default_rng(5), SHAPE, np.float64) for _ in range(3)]
    assert same_bits(node.run(*[cuda_emulator.asarray(a) for a in host]), node.run(*host))
    assert node.run.kernel.launches == 1


def test_the_compiled_kernel_is_reused_per_layout(emulated):
    node = fused_node(*CHAINS["broadcast_div_add_sub"][:2], np.float32)
    rng = np.random.default_rng(6)
    for _ in range(3):
        node.run(*[cuda_emulator.asarray(values(rng, s, np.float32)) for s in [SHAPE, (20,), (1,), (37, 1)]])
    assert node.run.kernel.launches == 3 and len(node.run.kernel._functions) == 1


@pytest.mark.parametrize("dtype", [np.float16, np.int64], ids=lambda d: np.dtype(d).name)
def test_uncovered_dtypes_fall_back_to_the_ufunc_chain(emulated, dtype):
    node = fused_node(["Add", "Neg", "Sub"], [["x", "y"], [], ["z"]], dtype)
    host = [(np.arange(740).reshape(SHAPE) % 7 - 3).astype(dtype) for _ in range(3)]
    result = node.run(*[cuda_emulator.asarray(a) for a in host])
    assert node.run.kernel.launches == 0 and np.dtype(dtype).name in node.run.kernel.fallback
    assert type(result) is cuda_emulator.ndarray and same_bits(result, node.run(*host))


def test_an_input_of_another_dtype_falls_back_and_names_it(emulated):
    node = fused_node(["Add", "Neg"], [["x", "y"], []], np.float64)
    host = [np.ones(SHAPE), np.ones(SHAPE, np.float32)]
    result = node.run(*[cuda_emulator.asarray(a) for a in host])
    assert node.run.kernel.launches == 0 and "input 1: float32" in node.run.kernel.fallback
    assert same_bits(result, node.run(*host))


def test_empty_arrays_launch_nothing(emulated):
    node = fused_node(["Add", "Neg"], [["x", "y"], []], np.float32, shape=(0, 4))
    result = node.run(cuda_emulator.zeros((0, 4), np.float32), cuda_emulator.zeros((0, 4), np.float32))
    assert result.shape == (0, 4) and node.run.kernel.launches == 1


def test_fused_nodes_of_a_traced_mlp_step_give_the_same_bits_on_the_emulated_device(emulated, monkeypatch):
    """The emulator has no matmul, so the step runs on the host; every fused node it replays is also evaluated on
    emulated device copies of its inputs (the generated kernel, one launch) and compared bit for bit."""
    checked, make = [], fusion._fused_run

    def checking_run(steps, shape, dtype):
        run = make(steps, shape, dtype)

        def both(*arrays):
            host = run(*arrays)
            device = run(*[cuda_emulator.asarray(a) for a in arrays])
            checked.append((run.kernel.fallback, same_bits(device, host), tuple(u.__name__ for u, _ in steps)))
            return host
        return both

    monkeypatch.setattr(fusion, "_fused_run", checking_run)
    _, step, losses = residual_training(4)
    assert step.trace_count == 1 and {ops for _, _, ops in checked} == RESIDUAL_CHAINS, checked
    assert len(checked) >= 6 and all(fallback is None and same for fallback, same, _ in checked), checked
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


def test_layouts_of_views_broadcasts_and_mismatches():
    """How the kernel reads each input (element strides over the output's shape), checked on NumPy views."""
    from engine.backend.cuda.fused_source import layout

    f32, base = np.dtype(np.float32), np.zeros((20, 37), np.float32)
    assert layout(base.T.copy(), SHAPE, f32) == "c" and layout(np.float32(1), SHAPE, f32) == "s"
    assert layout(base.T, SHAPE, f32) == (1, 37)  # a transposed view
    assert layout(base.T[::-1], SHAPE, f32) == (-1, 37)  # reversed rows: the first element's address is the origin
    assert layout(np.zeros(20, np.float32), SHAPE, f32) == (0, 1) and layout(np.zeros((37, 1), np.float32), SHAPE,
                                                                             f32) == (1, 0)
    assert layout(np.zeros(37, np.float32), SHAPE, f32) is None  # does not broadcast: the ufunc chain says so
    assert layout(np.zeros(SHAPE), SHAPE, f32) is None  # float64 into a float32 chain
    assert layout(np.zeros((2,) + SHAPE, np.float32), SHAPE, f32) is None
