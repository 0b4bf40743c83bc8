"""Graph fixtures: hand-written traced graphs of the digits MLP (per docs/logformat.md), a hand-written replay
capture carrying node ids, and a GraphDef written by torch's add_graph."""
from __future__ import annotations

import copy
from pathlib import Path

from instrumentation.format import trace as fmt
from instrumentation.format.graph_file import ARG_NODE, write_graph

FUNCTION = "train_step"
SIGNATURE = "x: float32[32,64] cpu; y: int64[32] cpu"


def _node(node_id: str, op: str, inputs: list[str], shape: list[int], module: str, phase: str, nbytes: int,
          **extra: object) -> dict:
    return {"id": node_id, "op": op, "inputs": inputs, "shape": shape, "dtype": "float32", "module": module,
            "phase": phase, "bytes": nbytes, **extra}


def mlp_unoptimised() -> dict:
    """The ops the engine runs for one step of Sequential(Linear(64, 32), ReLU(), Linear(32, 10)) with
    cross-entropy (the op names and module paths its profiler records), plus one dead op."""
    nodes = [
        _node("n1", "Linear", ["x", "p:0.weight", "p:0.bias"], [32, 32], "0", "forward", 4096),
        _node("n2", "ReLU", ["n1"], [32, 32], "1", "forward", 4096),
        _node("n3", "Linear", ["n2", "p:2.weight", "p:2.bias"], [32, 10], "2", "forward", 1280),
        _node("n4", "CrossEntropy", ["n3", "y"], [], "", "loss", 4),
        _node("n5", "Mul", ["n3", "n3"], [32, 10], "2", "forward", 1280),  # unused: dead code
        _node("n6", "CrossEntropyBackward", ["n4"], [32, 10], "", "backward", 1280),
        _node("n7", "LinearBackward", ["n6", "n2", "p:2.weight"], [32, 10], "2", "backward", 5416),
        _node("n8", "ReLUBackward", ["n7", "n1"], [32, 32], "1", "backward", 4096),
        _node("n9", "LinearBackward", ["n8", "x", "p:0.weight"], [32, 32], "0", "backward", 8320),
        _node("n10", "SGDUpdate", ["p:0.weight", "n9"], [32, 64], "0", "optimizer", 0),
        _node("n11", "SGDUpdate", ["p:2.weight", "n7"], [10, 32], "2", "optimizer", 0),
    ]
    inputs = [{"id": "x", "shape": [32, 64], "dtype": "float32"}, {"id": "y", "shape": [32], "dtype": "int64"},
              {"id": "p:0.weight", "shape": [32, 64], "dtype": "float32"},
              {"id": "p:0.bias", "shape": [32], "dtype": "float32"},
              {"id": "p:2.weight", "shape": [10, 32], "dtype": "float32"},
              {"id": "p:2.bias", "shape": [10], "dtype": "float32"}]
    return {"version": 1, "function": FUNCTION, "signature": SIGNATURE, "stage": "unoptimised", "trace_ms": 12.5,
            "nodes": nodes, "inputs": inputs, "outputs": ["n4", "n10", "n11"]}


def mlp_optimised() -> dict:
    """Dead code removed (n5); n1 and n2 fused into f1 (`Fused[Linear+ReLU]`)."""
    graph = copy.deepcopy(mlp_unoptimised())
    graph["stage"] = "optimised"
    nodes = [node for node in graph["nodes"] if node["id"] not in ("n1", "n2", "n5")]
    fused = _node("f1", "Fused[Linear+ReLU]", ["x", "p:0.weight", "p:0.bias"], [32, 32], "0", "forward", 4096,
                  fused_from=["Linear", "ReLU"])
    for node in nodes:
        node["inputs"] = ["f1" if source in ("n1", "n2") else source for source in node["inputs"]]
    graph["nodes"] = [fused, *nodes]
    graph["passes"] = [
        {"name": "dead_code", "removed": ["n5"], "merged": [], "nodes_before": 11, "nodes_after": 10},
        {"name": "elementwise_fusion", "removed": [], "merged": [{"into": "f1", "from": ["n1", "n2"]}],
         "nodes_before": 10, "nodes_after": 9},
    ]
    return graph


def write_mlp_graphs(run_dir: Path) -> list[str]:
    return [write_graph(run_dir, mlp_unoptimised()), write_graph(run_dir, mlp_optimised())]


# NOTE: exact durations so that the tests know the expected numbers: node id -> (op record name, module, µs, bytes)
TRACED_OPS = {"f1": ("Fused[Linear+ReLU]", "0", 30.0, 4096), "n3": ("Linear", "2", 20.0, 1280),
              "n4": ("CrossEntropy", "", 10.0, 4), "n6": ("CrossEntropyBackward", "", 5.0, 1280),
              "n7": ("LinearBackward", "2", 25.0, 5416), "n8": ("ReLUBackward", "1", 15.0, 4096),
              "n9": ("LinearBackward", "0", 40.0, 8320), "n10": ("SGDUpdate", "0", 3.0, 0),
              "n11": ("SGDUpdate", "2", 2.0, 0)}


def write_traced_capture(run_dir: Path, steps: int = 2, wall_time_s: float = 1.7e9) -> str:
    """A flowscope capture of `steps` replayed steps of the optimised graph: each op record carries its node id."""
    events = []
    ts = 0.0
    for step in range(steps):
        start = ts
        for node_id, (name, module, duration_us, nbytes) in TRACED_OPS.items():
            events.append({"name": name, "cat": fmt.CAT_OP, "ph": "X", "ts": ts, "dur": duration_us, "pid": 1,
                           "tid": fmt.TID_HOST, "args": {fmt.ARG_STEP: step, fmt.ARG_MODULE: module,
                                                         fmt.ARG_PHASE: "forward", fmt.ARG_BYTES: nbytes,
                                                         ARG_NODE: node_id}})
            ts += duration_us + 1.0
        events.append({"name": f"step {step}", "cat": fmt.CAT_STEP, "ph": "X", "ts": start, "dur": ts - start,
                       "pid": 1, "tid": fmt.TID_HOST, "args": {fmt.ARG_STEP: step}})
    directory = fmt.new_capture_dir(run_dir, wall_time_s)
    path = str(Path(directory) / fmt.trace_file_name("host", 1))
    fmt.write_trace(path, {"traceEvents": events, "metadata": {"writer": "flowscope"}})
    return path


def torch_add_graph(run_dir: Path) -> None:
    """torch.utils.tensorboard's add_graph of a small MLP (the GraphDef TensorBoard's graph plugin reads)."""
    import torch
    from torch.utils.tensorboard import SummaryWriter as TorchWriter

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with TorchWriter(str(run_dir)) as writer:
        writer.add_graph(model, torch.zeros(2, 4))
        writer.add_scalar("loss", 1.0, 0)


def chain_graph(modules: int, ops_per_module: int) -> dict:
    """A forward graph of `modules` blocks of `ops_per_module` Add ops each (modules `block<i>.layer`)."""
    nodes, previous = [], "x"
    for module in range(modules):
        for op in range(ops_per_module):
            node_id = f"m{module}o{op}"
            nodes.append(_node(node_id, "Add", [previous, "x"], [4], f"block{module}.layer", "forward", 16))
            previous = node_id
    return {"version": 1, "function": "big_step", "signature": "x: float32[4] cpu", "stage": "unoptimised",
            "trace_ms": 80.0, "nodes": nodes, "inputs": [{"id": "x", "shape": [4], "dtype": "float32"}],
            "outputs": [previous]}
