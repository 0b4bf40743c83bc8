"""Fused elementwise chains on (emulated) device arrays run as one generated CUDA C kernel: launched on the CPU by
tests/engine/cuda_emulator.py (the kernel compiled with g++ against cuda_emulation.h), the bits are the NumPy ufunc
chain's, for hand-built chains and for the fused nodes of a traced MLP training step."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import nn
from engine.backend import cuda_backend
from engine.graph.ir import Graph, Node
from engine.graph.passes import elementwise_fusion
from engine.graph.passes import fusion
from engine.graph.trace import UFUNCS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import cuda_emulator  # noqa: E402

pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="the kernel emulator compiles with g++"),
              pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")]  # the planted zeros, inf, NaN
SHAPE = (37, 20)  # 740 elements: three blocks of 256 threads, the last one partial


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


def _fused(ops, inputs, dtype, shape=SHAPE):
    """The fused node of a chain of ``ops``, each reading the previous result (first) and the named inputs."""
    nodes, previous = [], None
    for i, (op, reads) in enumerate(zip(ops, inputs)):
        nid = f"n{i + 1}"
        args = ([previous] if previous else []) + list(reads)
        nodes.append(Node(nid, op, "accumulate" if op == "Accumulate" else "forward", UFUNCS[op][0], args, [nid],
                          [shape], [np.dtype(dtype).name], ufunc=UFUNCS[op], attrs=(op,)))
        previous = nid
    graph = elementwise_fusion(Graph("f", "", nodes, ["x", "y", "z", "w"], {}, [previous]))
    assert len(graph.nodes) == 1 and graph.nodes[0].kind == "fused"
    return graph.nodes[0]


def _values(rng, shape, dtype):
    a = rng.standard_normal(shape).astype(dtype)
    if a.size >= 6:
        a.reshape(-1)[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3]
    return a


def _same_bits(a, b):
    a, b = np.asarray(a).view(np.ndarray), np.asarray(b).view(np.ndarray)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


CHAINS = {  # name -> (ops, the inputs each reads besides the previous result, input shapes)
    "add_neg_mul_sub": (["Add", "Neg", "Mul", "Sub"], [["x", "y"], [], ["z"], ["x"]], [SHAPE] * 3),
    "broadcast_div_add_sub": (["Div", "Add", "Sub"], [["x", "y"], ["z"], ["w"]], [SHAPE, (20,), (), (37, 1)]),
    "accumulations": (["Accumulate", "Accumulate", "Accumulate"], [["x", "y"], ["z"], ["w"]], [SHAPE] * 4),
    "neg_first": (["Neg", "Div", "Sub"], [["x"], ["y"], ["x"]], [SHAPE, (1, 20)]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("chain", list(CHAINS))
def test_generated_kernel_gives_the_ufunc_chains_bits(emulated, chain, dtype):
    ops, reads, shapes = CHAINS[chain]
    node = _fused(ops, reads, dtype)
    rng = np.random.default_rng(len(chain))
    host = [_values(rng, shape, dtype) if shape else dtype(rng.standard_normal()) for shape in shapes]
    expected = node.run(*host)  # the host path: NumPy ufuncs with out=
    result = node.run(*[cuda_emulator.asarray(a) for a in host])
    assert type(result) is cuda_emulator.ndarray
    assert node.run.kernel.launches == 1 and node.run.kernel.fallback is None  # one launch, no ufunc fallback
    assert _same_bits(result, expected)


def test_grid_stride_loop_covers_every_element_with_one_block(emulated, monkeypatch):
    monkeypatch.setattr(emulated, "MAX_BLOCKS", 1)
    node = _fused(*CHAINS["add_neg_mul_sub"][:2], np.float64)
    host = [_values(np.random.default_rng(5), SHAPE, np.float64) for _ in range(3)]
    assert _same_bits(node.run(*[cuda_emulator.asarray(a) for a in host]), node.run(*host))
    assert node.run.kernel.launches == 1


def test_the_compiled_kernel_is_reused_per_layout(emulated):
    node = _fused(*CHAINS["broadcast_div_add_sub"][:2], np.float32)
    rng = np.random.default_rng(6)
    for _ in range(3):
        node.run(*[cuda_emulator.asarray(_values(rng, s, np.float32)) for s in [SHAPE, (20,), (1,), (37, 1)]])
    assert node.run.kernel.launches == 3 and len(node.run.kernel._functions) == 1


@pytest.mark.parametrize("dtype", [np.float16, np.int64], ids=lambda d: np.dtype(d).name)
def test_uncovered_dtypes_fall_back_to_the_ufunc_chain(emulated, dtype):
    node = _fused(["Add", "Neg", "Sub"], [["x", "y"], [], ["z"]], dtype)
    host = [(np.arange(740).reshape(SHAPE) % 7 - 3).astype(dtype) for _ in range(3)]
    result = node.run(*[cuda_emulator.asarray(a) for a in host])
    assert node.run.kernel.launches == 0 and np.dtype(dtype).name in node.run.kernel.fallback
    assert type(result) is cuda_emulator.ndarray and _same_bits(result, node.run(*host))


def test_an_input_of_another_dtype_falls_back_and_names_it(emulated):
    node = _fused(["Add", "Neg"], [["x", "y"], []], np.float64)
    host = [np.ones(SHAPE), np.ones(SHAPE, np.float32)]
    result = node.run(*[cuda_emulator.asarray(a) for a in host])
    assert node.run.kernel.launches == 0 and "input 1: float32" in node.run.kernel.fallback
    assert _same_bits(result, node.run(*host))


def test_empty_arrays_launch_nothing(emulated):
    node = _fused(["Add", "Neg"], [["x", "y"], []], np.float32, shape=(0, 4))
    result = node.run(cuda_emulator.zeros((0, 4), np.float32), cuda_emulator.zeros((0, 4), np.float32))
    assert result.shape == (0, 4) and node.run.kernel.launches == 1


class _Residual(nn.Module):
    """An MLP whose step has fused chains: forward -(r + h) - shift (a broadcast parameter), and three reads of h
    whose gradients backward accumulates in a chain."""

    def __init__(self):
        super().__init__()
        self.lin1, self.lin2, self.lin3, self.out = nn.Linear(16, 24), nn.Linear(24, 24), nn.Linear(24, 24), \
            nn.Linear(24, 5)
        self.shift = nn.Parameter(engine.tensor(np.linspace(-1, 1, 24, dtype=np.float32)))

    def forward(self, x):
        h = nn.functional.relu(self.lin1(x))
        z = -(self.lin2(h) + h) - self.shift
        return self.out(z + self.lin3(h))


def test_fused_nodes_of_a_traced_mlp_step_give_the_same_bits_on_the_emulated_device(emulated, monkeypatch):
    """Every fused node the traced training step replays is also evaluated on emulated device copies of its
    inputs (the generated kernel, one launch) and compared bit for bit with the host result it returns."""
    checked, make = [], fusion._fused_run

    def checking_run(steps, shape, dtype):
        run = make(steps, shape, dtype)

        def both(*arrays):
            host = run(*arrays)
            device = run(*[cuda_emulator.asarray(a) for a in arrays])
            checked.append((run.kernel.fallback, _same_bits(device, host), [u.__name__ for u, _ in steps]))
            return host
        return both

    monkeypatch.setattr(fusion, "_fused_run", checking_run)
    engine.manual_seed(0)
    model = _Residual()
    opt = engine.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    @engine.function
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(0)
    losses = [step(engine.tensor(rng.standard_normal((8, 16)).astype(np.float32)),
                   engine.tensor(rng.integers(0, 5, 8))).item() for _ in range(4)]
    chains = {tuple(ops) for _, _, ops in checked}
    assert chains == {("add", "negative", "subtract", "add"), ("add", "add")}, chains  # forward (shift broadcasts), backward
    assert len(checked) >= 6 and all(fallback is None and same for fallback, same, _ in checked), checked
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
