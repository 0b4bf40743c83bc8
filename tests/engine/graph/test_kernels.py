"""Replay kernels (``replay_kernel`` of CrossEntropy and SGD, looked up by engine/graph/kernels.py) against the op
they stand for: the same bits, the op's own handling of batches they do not cover (ignored labels, labels out of
range), and ops they must leave to the op."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import nn
from engine.graph import kernels
from engine.nn import functional as F
from tests.engine.graph.digits_step import training_step

CLASSES = 5


def loss_step(seed: int = 0, **loss_args):
    engine.manual_seed(seed)
    model = nn.Linear(8, CLASSES)
    opt = engine.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, **loss_args)
        loss.backward()
        opt.step()
        return loss

    return model, step


def labelled(n_steps: int, rows: int = 6, seed: int = 0, labels=None):
    rng = np.random.default_rng(seed)
    for i in range(n_steps):
        y = rng.integers(0, CLASSES, rows) if labels is None else np.asarray(labels[i])
        yield engine.tensor(rng.standard_normal((rows, 8)).astype(np.float32)), engine.tensor(y)


def eager_and_traced(batches, **loss_args):
    eager_model, eager = loss_step(**loss_args)
    traced_model, step = loss_step(**loss_args)
    traced = engine.function(step)
    results = []
    for x, y in batches:
        results.append((eager(x, y).item(), traced(x, y).item()))
    return results, eager_model, traced_model, traced


@pytest.mark.parametrize("loss_args", [{}, {"reduction": "sum"},
                                       {"weight": np.linspace(0.5, 2, CLASSES, dtype=np.float32)},
                                       {"label_smoothing": 0.1}, {"ignore_index": 2}])
def test_traced_cross_entropy_gives_the_eager_bits(loss_args):
    if "weight" in loss_args:
        loss_args = dict(loss_args, weight=engine.tensor(loss_args["weight"]))
    results, eager_model, traced_model, _ = eager_and_traced(labelled(12), **loss_args)
    assert [e for e, _ in results] == [t for _, t in results]
    assert np.array_equal(eager_model.weight.numpy(), traced_model.weight.numpy())
    assert np.array_equal(eager_model.weight.grad.numpy(), traced_model.weight.grad.numpy())


def test_kernels_cover_only_plain_cross_entropy():
    covered = {}
    for name, args in (("plain", {}), ("sum", {"reduction": "sum"}), ("none", {"reduction": "none"}),
                       ("weighted", {"weight": engine.tensor(np.ones(CLASSES, np.float32))}),
                       ("smoothed", {"label_smoothing": 0.1}), ("ignore in range", {"ignore_index": 2})):
        def summed(x, y, args=args):
            return F.cross_entropy(x, y, **args).sum()
        traced = engine.function(summed)
        _, y = next(labelled(1))
        traced(engine.tensor(np.random.default_rng(0).standard_normal((6, CLASSES)).astype(np.float32)), y)
        [forward] = [n for n in traced.graphs()[0][1].nodes if n.op == "CrossEntropy"]
        covered[name] = kernels.for_node(forward) is not None
    assert covered == {"plain": True, "sum": True, "none": False, "weighted": False, "smoothed": False,
                       "ignore in range": False}


def test_a_batch_with_ignored_labels_goes_to_the_op_and_back():
    labels = [[0, 1, 2, 3, 4, 0], [1, -100, 2, -100, 3, 3], [4, 4, 3, 2, 1, 0], [-100] * 5 + [1]]
    results, eager_model, traced_model, traced = eager_and_traced(labelled(4, labels=labels))
    assert [e for e, _ in results] == [t for _, t in results] and traced.trace_count == 1
    assert np.array_equal(eager_model.bias.numpy(), traced_model.bias.numpy())


@pytest.mark.parametrize("bad", [CLASSES, -1])
def test_labels_out_of_range_are_refused_as_eager_refuses_them(bad):
    _, step = loss_step()
    traced = engine.function(step)
    x, y = next(labelled(1))
    traced(x, y)
    wrong = engine.tensor(np.array([0, 1, bad, 2, 3, 4]))
    with pytest.raises(IndexError) as replayed:
        traced(x, wrong)
    _, eager = loss_step()
    with pytest.raises(IndexError) as eager_error:
        eager(x, wrong)
    assert str(replayed.value) == str(eager_error.value) and f"[{bad}]" in str(replayed.value)


def sgd_step(**sgd_args):
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, CLASSES))
    opt = engine.optim.SGD(model.parameters(), **sgd_args)
    return model, opt, training_step(model, opt)


@pytest.mark.parametrize("sgd_args", [{"lr": 0.1, "momentum": 0.9}, {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-3},
                                      {"lr": 0.1, "momentum": 0.9, "nesterov": True},
                                      {"lr": 0.1, "momentum": 0.8, "dampening": 0.1}, {"lr": 0.1}])
def test_traced_sgd_gives_the_eager_bits_as_hyper_parameters_and_state_change(sgd_args):
    runs = []
    for traced in (False, True):
        model, opt, step = sgd_step(**sgd_args)
        run = engine.function(step) if traced else step
        losses = []
        for i, (x, y) in enumerate(labelled(12)):
            if i == 4:  # a schedule changes the learning rate
                opt.param_groups[0]["lr"] = 0.03
            if i == 7:  # the state is restored (new momentum buffers), and one group turns momentum off for a step
                opt.load_state_dict(opt.state_dict())
                opt.param_groups[0]["momentum"], momentum = 0.0, opt.param_groups[0]["momentum"]
            if i == 8:
                opt.param_groups[0]["momentum"] = momentum
            losses.append(run(x, y).item())
        runs.append((losses, [p.numpy().copy() for p in model.parameters()]))
    (eager_losses, eager_params), (traced_losses, traced_params) = runs
    assert traced_losses == eager_losses
    assert all(np.array_equal(a, b) for a, b in zip(eager_params, traced_params))


def test_the_sgd_kernel_is_for_sgd_only():
    _, _, step = sgd_step(lr=0.1, momentum=0.9)
    traced = engine.function(step)
    traced(*next(labelled(1)))
    [node] = [n for n in traced.graphs()[0][1].nodes if n.op == "SGDStep"]
    assert kernels.for_node(node) is not None  # (what it cannot serve it hands to SGD per call: the test above)
    adam_model = nn.Linear(8, CLASSES)
    adam = engine.optim.Adam(adam_model.parameters())

    def adam_step(x, y):
        adam.zero_grad()
        F.cross_entropy(adam_model(x), y).backward()
        adam.step()

    traced = engine.function(adam_step)
    traced(*next(labelled(1)))
    [node] = [n for n in traced.graphs()[0][1].nodes if n.op == "AdamStep"]
    assert kernels.for_node(node) is None


@pytest.mark.parametrize("case", ["random", "ties and signed zeros", "large", "float64"])
def test_cross_entropy_kernels_match_the_op_bit_for_bit(case):
    from engine.ops.loss import CrossEntropy
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, CLASSES)).astype(np.float32)
    if case == "ties and signed zeros":
        x[:, :3] = 0.0
        x[::2, 1] = -0.0
        x[1] = 2.0
    elif case == "large":
        x *= 1e4
    elif case == "float64":
        x = x.astype(np.float64)
    labels = rng.integers(0, CLASSES, 7)
    grad = np.asarray(1.5, x.dtype)
    results = []
    for use_kernel in (False, True):
        op = CrossEntropy(labels)
        op.forward(x)  # what the trace leaves on the instance
        node = type("N", (), {"instance": op, "kind": "forward", "inputs": ["x", "y"],
                              "attrs": ("CrossEntropy", ("bound", ("target",)))})()
        backward_node = type("N", (), {"instance": op, "kind": "backward", "inputs": ["g"], "attrs": ()})()
        forward = op.replay_kernel(node) if use_kernel else (lambda a, t: op.forward(a))
        backward = op.replay_kernel(backward_node) if use_kernel else op.backward
        assert forward is not None and backward is not None
        loss = forward(x, labels)
        results.append((loss, op.p.copy(), backward(grad)[0]))
    (loss_a, p_a, g_a), (loss_b, p_b, g_b) = results
    assert loss_a.dtype == loss_b.dtype and loss_a.shape == loss_b.shape == ()
    assert loss_a.tobytes() == loss_b.tobytes() and p_a.tobytes() == p_b.tobytes() and g_a.tobytes() == g_b.tobytes()
