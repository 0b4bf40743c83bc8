"""Each optimisation pass on small hand-built graphs (what it must remove or merge, what it must leave), and the
optimised graph of a traced function against the unoptimised one on random inputs."""
from __future__ import annotations


import numpy as np

import engine
from engine.graph import replay
from engine.graph.ir import Graph, Node
from engine.graph.passes import (common_subexpressions, constant_folding, dead_code, elementwise_fusion,
                                 inplace_updates, memory_planning, optimise)
from engine.graph.trace import ACCUMULATE_UFUNC
from engine.ops.activation import ReLU
from engine.ops.arithmetic import Add, Div, MatMul, Mul, Neg, Sub
from engine.ops.linear import Linear

UFUNCS = {op.__name__: op.ufunc for op in (Add, Sub, Neg, Mul, Div)} | {"Accumulate": ACCUMULATE_UFUNC}
OPS = {op.__name__: op for op in (Add, Sub, Neg, Mul, Div, MatMul, Linear, ReLU)}  # what passes read of an op
S = (4, 3)


def node(nid, op, inputs, run=None, kind="forward", shape=S, **extra):
    """A hand-built node; a forward node of an engine op carries an instance of it (passes read the op's facts)."""
    if kind == "forward" and op in OPS:
        extra.setdefault("instance", OPS[op]())
    ufunc = UFUNCS.get(op)
    if run is None:
        run = ufunc[0] if ufunc else (lambda *a: a[0])
    return Node(nid, op, kind, run, list(inputs), [nid] if kind not in ("effect", "set_grad") else [], [shape],
                ["float32"], ufunc=ufunc, attrs=(op,), **extra)


def graph(nodes, outputs, inputs=("x", "y", "z"), constants=None):
    return Graph("f", "", nodes, list(inputs), {}, list(outputs), constants=dict(constants or {}))


def ids(g):
    return [n.id for n in g.nodes]


def run(g, rng):
    return replay.run(g, [rng.standard_normal(S).astype(np.float32) for _ in g.inputs])


def test_dead_code_removes_unused_results_and_keeps_effects_outputs_and_backward_state():
    g = graph([node("n1", "Neg", ["x"]), node("n2", "Add", ["x", "y"]), node("n3", "Mul", ["n1", "y"]),
               node("n4", "Neg", ["y"]), node("n5", "NegBackward", ["x"], kind="backward", ctx="n4"),
               node("n6", "SetGrad", ["n5"], kind="set_grad")], ["n2"])
    out = dead_code(g)
    assert ids(out) == ["n2", "n4", "n5", "n6"]
    assert out.passes[-1]["removed"] == ["n1", "n3"] and out.passes[-1]["nodes_before"] == 6


def test_constant_folding_folds_constant_subgraphs_only():
    k = {"k:0": np.float32(2.0) * np.ones(S, np.float32), "k:1": np.ones(S, np.float32)}
    g = graph([node("n1", "Add", ["k:0", "k:1"]), node("n2", "Mul", ["x", "n1"]),
               node("n3", "Dropout", ["k:0"], deterministic=False), node("n4", "Neg", ["k:1"]),
               node("n5", "NegBackward", ["x"], kind="backward", ctx="n4")], ["n2", "n3", "n5"], constants=k)
    out = constant_folding(g)
    assert ids(out) == ["n2", "n3", "n4", "n5"]
    assert np.array_equal(out.constants["n1"], np.full(S, 3.0, np.float32))
    rng = np.random.default_rng(0)
    x = rng.standard_normal(S).astype(np.float32)
    assert np.array_equal(replay.run(out, [x, x, x])[0], x * np.float32(3.0))


def test_cse_merges_identical_deterministic_ops_and_repoints_their_backward():
    class Op:
        def backward(self, grad):
            return (grad,)

    first, second = Op(), Op()
    g = graph([node("n1", "Add", ["x", "y"], instance=first), node("n2", "Add", ["x", "y"], instance=second),
               node("n3", "Add", ["y", "x"]), node("n4", "Dropout", ["x"], deterministic=False),
               node("n5", "Dropout", ["x"], deterministic=False), node("n6", "Mul", ["n1", "n2"]),
               node("n7", "AddBackward", ["n6"], kind="backward", ctx="n2", instance=second, run=second.backward)],
              ["n6", "n3", "n4", "n5", "n7"])
    g.nodes[1].attrs = g.nodes[0].attrs
    out = common_subexpressions(g)
    assert ids(out) == ["n1", "n3", "n4", "n5", "n6", "n7"]
    assert out.nodes[4].inputs == ["n1", "n1"]
    assert out.nodes[5].ctx == "n1" and out.nodes[5].instance is first
    assert out.passes[-1]["merged"] == [{"into": "n1", "from": ["n2"]}]


def test_cse_keeps_ops_with_different_attributes():
    g = graph([node("n1", "Sum", ["x"]), node("n2", "Sum", ["x"])], ["n1", "n2"])
    g.nodes[0].attrs, g.nodes[1].attrs = ("Sum", ("axis", 0)), ("Sum", ("axis", 1))
    assert ids(common_subexpressions(g)) == ["n1", "n2"]


def test_fusion_merges_a_chain_and_stops_at_shared_results_shape_changes_and_saved_state():
    g = graph([node("n1", "Add", ["x", "y"]), node("n2", "Neg", ["n1"]), node("n3", "Mul", ["n2", "z"]),
               node("n4", "Sub", ["n3", "x"]), node("n5", "Add", ["n4", "n4"]),  # n4 read twice: the chain ends
               node("n6", "Mul", ["n5", "y"]), node("n7", "MulBackward", ["n6"], kind="backward", ctx="n6"),
               node("n8", "Sum", ["n6"], shape=())], ["n8", "n7"])
    out = elementwise_fusion(g)
    assert [n.op for n in out.nodes] == ["Fused[Add+Neg+Mul+Sub]", "Add", "Mul", "MulBackward", "Sum"]
    fused = out.nodes[0]
    assert fused.inputs == ["x", "y", "z"] and fused.outputs == ["n4"] and fused.fused_from == ["n1", "n2", "n3", "n4"]
    assert out.passes[-1]["merged"] == [{"into": "f1", "from": ["n1", "n2", "n3", "n4"]}]
    rng = np.random.default_rng(1)
    x, y, z = (rng.standard_normal(S).astype(np.float32) for _ in range(3))
    assert np.array_equal(fused.run(x, y, z), (-(x + y)) * z - x)  # the same bits as the unfused ops


def test_fusion_does_not_cross_a_broadcast_to_a_new_shape():
    g = graph([node("n1", "Add", ["x", "y"], shape=(3,)), node("n2", "Mul", ["n1", "z"], shape=(4, 3))], ["n2"])
    assert len(elementwise_fusion(g).nodes) == 2


def test_inplace_accumulates_into_a_buffer_the_graph_owns():
    g = graph([node("n1", "Accumulate", ["x", "y"], kind="accumulate"),
               node("n2", "Accumulate", ["n1", "z"], kind="accumulate"),
               node("n3", "Accumulate", ["x", "n2"], kind="accumulate")], ["n3"])
    out = inplace_updates(g)
    assert [n.op for n in out.nodes] == ["Accumulate", "AccumulateInPlace", "Accumulate"]
    rng = np.random.default_rng(2)
    x, y, z = (rng.standard_normal(S).astype(np.float32) for _ in range(3))
    assert np.array_equal(replay.run(out, [x, y, z])[0], x + ((x + y) + z))


def test_memory_planning_frees_at_last_use_and_keeps_saved_inputs_until_backward():
    g = graph([node("n1", "Neg", ["x"]), node("n2", "Mul", ["n1", "y"]), node("n3", "Neg", ["n2"]),
               node("n4", "MulBackward", ["n3"], kind="backward", ctx="n2"), node("n5", "Add", ["n4", "n3"])],
              ["n5"])
    out = memory_planning(g)
    assert out.frees == {"n3": ["n2"], "n4": ["n1"], "n5": ["n3", "n4"]}
    assert out.nodes[3].release_state


def test_optimised_graph_gives_the_unoptimised_outputs_on_random_inputs():
    w = engine.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(S), requires_grad=True)

    def f(x, y):
        a = x * y + x * y  # CSE
        b = -(a - y) * 0.5 + 2.0 * 3.0  # fusion, constants
        unused = (x * 7).exp()  # dead code  # noqa: F841
        loss = ((b * w).relu() + (x > 0.2).astype("float32")).sum()
        loss.backward()
        return loss, b

    rng = np.random.default_rng(3)
    traced = engine.function(f)
    traced(engine.tensor(rng.standard_normal(S).astype(np.float32)), engine.tensor(np.ones(S, np.float32)))
    unoptimised, optimised = traced.graphs()[0]
    names = [p["name"] for p in optimised.passes]
    assert names == ["constant_folding", "common_subexpressions", "dead_code", "elementwise_fusion",
                     "inplace_updates", "memory_planning"]
    assert len(optimised.nodes) < len(unoptimised.nodes)
    for _ in range(5):
        inputs = [rng.standard_normal(S).astype(np.float32) for _ in range(2)]
        w.grad = None
        expected = replay.run(unoptimised, inputs)
        expected_grad = w.grad.numpy().copy()
        w.grad = None
        got = replay.run(optimised, inputs)
        for a, b in zip(expected, got):
            np.testing.assert_allclose(b, a, rtol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), expected_grad, rtol=1e-6)


def test_passes_can_be_switched_off_by_name():
    g = graph([node("n1", "Neg", ["x"]), node("n2", "Add", ["x", "y"])], ["n2"])
    assert ids(optimise(g.copy(), ["elementwise_fusion"])) == ["n1", "n2"]
    assert ids(optimise(g.copy(), ["dead_code"])) == ["n2"]


def test_fused_chain_kernel_compiles_with_nvrtc():
    """The generated kernel of a chain the pass made (contiguous, broadcast and scalar inputs) compiles with NVRTC."""
    from engine.backend.cuda import fused_source
    from engine.cuda.check import Nvrtc

    g = graph([node("n1", "Add", ["x", "y"]), node("n2", "Neg", ["n1"]), node("n3", "Div", ["n2", "z"]),
               node("n4", "Accumulate", ["n3", "x"], kind="accumulate")], ["n4"])
    fused = elementwise_fusion(g).nodes[0]
    assert [u.__name__ for u, _ in fused.steps] == ["add", "negative", "divide", "add"]
    nvrtc = Nvrtc()
    for dtype in (np.float32, np.float64):
        name, code = fused_source.kernel(fused.steps, dtype, ["c", (0, 1), "s"], S)
        assert "x0[i] + x1[o1]" in code and "v = -v;" in code and "v = v / x2[0];" in code and "v = v + x0[i];" in code
        result = nvrtc.compile(name, code, "sm_80")
        assert result.ok, result.log


def test_inplace_relu_writes_into_a_dead_input_only():
    from engine.ops.activation import ReLU

    relu, kept = ReLU(), ReLU()
    g = graph([node("n1", "Linear", ["x", "y"]), node("n2", "ReLU", ["n1"], instance=relu),
               node("n3", "Linear", ["x", "z"]), node("n4", "ReLU", ["n3"], instance=kept), node("n5", "Neg", ["n3"])],
              ["n2", "n4", "n5"])
    g.nodes[0].run = g.nodes[2].run = np.add
    g.nodes[1].run, g.nodes[3].run = relu.forward, kept.forward
    out = inplace_updates(g)
    assert out.passes[-1]["merged"] == [{"into": "n1", "from": ["n2"]}]  # n3 is read after its ReLU: left alone
    rng = np.random.default_rng(4)
    x, y, z = (rng.standard_normal(S).astype(np.float32) for _ in range(3))
    first = out.nodes[0].run(x, y)
    result = out.nodes[1].run(first)
    assert result is first and np.array_equal(result, np.maximum(x + y, 0)) and relu.out is result


def test_cse_never_merges_ops_holding_different_arrays():
    x = engine.tensor(np.arange(4, dtype=np.float32))
    zero = engine.tensor(np.zeros(4, np.float32))  # one captured value: both where() read the same inputs

    @engine.function
    def f(a):
        first = engine.where(np.array([True, False, True, False]), a, zero)
        second = engine.where(np.array([False, True, False, True]), a, zero)
        return first + second * 10

    assert f(x).tolist() == [0.0, 10.0, 2.0, 30.0]
    assert f(x + 1).tolist() == [1.0, 20.0, 3.0, 40.0]
