"""Fused elementwise chains (engine/graph/passes/fusion.py) on device arrays against the host ufunc chain, written once
for any CuPy-like module ``cp``: run on a GPU by tests/gpu/test_fusion_gpu.py and, on the CPU, by
tests/engine/graph/test_fused_kernel_emulated.py (the generated CUDA C compiled as C++ by the kernel emulator)."""
from __future__ import annotations

import numpy as np

import engine
from engine import nn
from engine.graph.ir import Graph, Node
from engine.graph.passes import elementwise_fusion
from engine.graph.trace import ACCUMULATE_UFUNC
from engine.ops.arithmetic import Add, Div, Mul, Neg, Sub
from tests.engine.graph.digits_step import training_step

UFUNCS = {op.__name__: op.ufunc for op in (Add, Sub, Neg, Mul, Div)} | {"Accumulate": ACCUMULATE_UFUNC}
DTYPES = (np.float32, np.float64)
SHAPE = (37, 20)  # 740 elements: three blocks of 256 threads, the last one partial
CHAINS = {  # name -> (ops, the inputs each reads besides the previous result, input shapes)
    "add_neg_mul_sub": (["Add", "Neg", "Mul", "Sub"], [["x", "y"], [], ["z"], ["x"]], [SHAPE] * 3),
    "broadcast_div_add_sub": (["Div", "Add", "Sub"], [["x", "y"], ["z"], ["w"]], [SHAPE, (20,), (), (37, 1)]),
    "accumulations": (["Accumulate", "Accumulate", "Accumulate"], [["x", "y"], ["z"], ["w"]], [SHAPE] * 4),
    "neg_first": (["Neg", "Div", "Sub"], [["x"], ["y"], ["x"]], [SHAPE, (1, 20)]),
}


def fused_node(ops, reads, dtype, shape=SHAPE) -> Node:
    """The fused node of a chain of ``ops``, each reading the previous result (first) and the named inputs."""
    nodes, previous = [], None
    for i, (op, names) in enumerate(zip(ops, reads)):
        nid = f"n{i + 1}"
        args = ([previous] if previous else []) + list(names)
        nodes.append(Node(nid, op, "accumulate" if op == "Accumulate" else "forward", UFUNCS[op][0], args, [nid],
                          [shape], [np.dtype(dtype).name], ufunc=UFUNCS[op], attrs=(op,)))
        previous = nid
    graph = elementwise_fusion(Graph("f", "", nodes, ["x", "y", "z", "w"], {}, [previous]))
    assert len(graph.nodes) == 1 and graph.nodes[0].kind == "fused"
    return graph.nodes[0]


def values(rng, shape, dtype):
    """Normal values with zeros of both signs, infinities, a NaN and a small value planted first."""
    a = rng.standard_normal(shape).astype(dtype)
    if a.size >= 6:
        a.reshape(-1)[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3]
    return a


def same_bits(a, b) -> bool:
    a, b = np.asarray(a).view(np.ndarray), np.asarray(b).view(np.ndarray)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def chain_matches_host(cp, chain: str, dtype) -> None:
    """The chain on device arrays is one launch of the generated kernel, with the host ufunc chain's bits."""
    ops, reads, shapes = CHAINS[chain]
    node = fused_node(ops, reads, dtype)
    rng = np.random.default_rng(len(chain))
    host = [values(rng, shape, dtype) if shape else dtype(rng.standard_normal()) for shape in shapes]
    with np.errstate(all="ignore"):
        expected = node.run(*host)  # the host path: NumPy ufuncs with out=
    result = node.run(*[cp.asarray(a) for a in host])
    assert type(result) is cp.ndarray
    assert node.run.kernel.launches == 1 and node.run.kernel.fallback is None  # one launch, no ufunc fallback
    assert same_bits(cp.asnumpy(result), expected)


class Residual(nn.Module):
    """An MLP whose training step has fused chains: forward -(lin2(h) + h) - shift + lin3(h) (``shift`` a broadcast
    parameter), and three reads of h whose gradients backward adds in a chain."""

    def __init__(self):
        super().__init__()
        self.lin1, self.lin2, self.lin3 = nn.Linear(16, 24), nn.Linear(24, 24), nn.Linear(24, 24)
        self.out = nn.Linear(24, 5)
        self.shift = nn.Parameter(engine.tensor(np.linspace(-1, 1, 24, dtype=np.float32)))

    def forward(self, x):
        h = nn.functional.relu(self.lin1(x))
        z = -(self.lin2(h) + h) - self.shift
        return self.out(z + self.lin3(h))


RESIDUAL_CHAINS = {("add", "negative", "subtract", "add"), ("add", "add")}  # what fusion makes of its step


def residual_training(steps: int, device: str = "cpu", double: bool = False):
    """(model, traced step, losses) of ``steps`` SGD steps of ``Residual`` through ``engine.function``."""
    engine.manual_seed(0)
    model = Residual()
    if double:
        model = model.double()
    model = model.to(device)
    opt = engine.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    step = engine.function(training_step(model, opt))

    rng = np.random.default_rng(0)
    dtype = np.float64 if double else np.float32
    losses = [step(engine.tensor(rng.standard_normal((8, 16)).astype(dtype), device=device),
                   engine.tensor(rng.integers(0, 5, 8), device=device)).item() for _ in range(steps)]
    return model, step, losses
