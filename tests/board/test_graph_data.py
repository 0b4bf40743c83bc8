"""The Graph page's data: graphs read from files and GraphDefs, module groups, the layered layout, the profile join."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine
from board.data.graph import (KIND_INPUT, KIND_OP, KIND_PARAMETER, GraphCache, GraphNode, GraphView, from_graph_file,
                              from_graphdef, list_graphs, pass_marks, runs_with_graphs, sibling)
from board.data.graph_layout import EXPAND_LIMIT, default_expanded, group_paths, groups_of, layout_graph
from board.data.graph_profile import CaptureRecords, OpRecord, compare, join_costs, records_from_trace
from board.data.plugin_inventory import not_shown, plugin_uses
from board.data.store import LogdirStore, UnknownSeries
from engine import nn
from graph_runs import TRACED_OPS, mlp_optimised, mlp_unoptimised, torch_add_graph, write_mlp_graphs, \
    write_traced_capture
from instrumentation import SummaryWriter
from instrumentation.format import metadata
from instrumentation.format import trace as fmt


def _store(logdir: Path) -> LogdirStore:
    store = LogdirStore(logdir)
    store.refresh()
    return store


@pytest.fixture()
def unoptimised() -> GraphView:
    return from_graph_file("run", "train_step.0.unoptimised", mlp_unoptimised())


def test_longest_path_layers_put_every_edge_forward(unoptimised: GraphView) -> None:
    drawn = layout_graph(unoptimised, default_expanded(unoptimised))
    layer = {item.key: item.layer for item in drawn.items}
    assert {key: layer[key] for key in ("x", "p:0.weight", "n1", "n2", "n3", "n4", "n5", "n6", "n9", "n10", "n11")} \
        == {"x": 0, "p:0.weight": 0, "n1": 1, "n2": 2, "n3": 3, "n4": 4, "n5": 4, "n6": 5, "n9": 8, "n10": 9,
            "n11": 7}
    assert drawn.back_edges == 0 and all(drawn.items[a].layer < drawn.items[b].layer for a, b in drawn.edges)
    edges = {(drawn.items[a].key, drawn.items[b].key) for a, b in drawn.edges}
    assert ("n8", "n9") in edges and ("x", "n9") in edges
    assert len(edges) == len({(source, node.id) for node in unoptimised.nodes for source in node.inputs})  # n5: n3 * n3
    assert len({(item.layer, item.y) for item in drawn.items}) == len(drawn.items)  # no two items on one spot


def test_groups_are_module_prefixes_per_phase_and_collapse_into_one_item(unoptimised: GraphView) -> None:
    paths = group_paths(unoptimised)
    assert paths["n1"] == ("forward|0",) and paths["p:0.weight"] == ("forward|0",)  # a parameter: its first user's
    assert paths["n9"] == ("backward|0",) and paths["n4"] == () and paths["x"] == ()
    assert {group.key: group.size for group in groups_of(unoptimised)}["forward|2"] == 4  # n3, n5, two parameters
    drawn = layout_graph(unoptimised, ())
    by_key = {item.key: item for item in drawn.items}
    assert by_key["forward|0"].kind == "group" and set(by_key["forward|0"].node_ids) == {"n1", "p:0.weight",
                                                                                         "p:0.bias"}
    assert by_key["forward|0"].label == "0 · forward (3)"
    covered = [node_id for item in drawn.items for node_id in item.node_ids]
    assert sorted(covered) == sorted(node.id for node in unoptimised.nodes)  # each node drawn exactly once
    assert drawn.back_edges == 0 and not drawn.boxes
    expanded = layout_graph(unoptimised, ("forward|0",))
    assert {box.key for box in expanded.boxes} == {"forward|0"}
    box = expanded.boxes[0]
    inside = [item for item in expanded.items if item.box == "forward|0"]
    assert {item.key for item in inside} == {"n1", "p:0.weight", "p:0.bias"}
    n1 = next(item for item in inside if item.key == "n1")
    assert box.x0 < n1.x < box.x1 and box.y0 < n1.y < box.y1  # the box holds the module's ops, not its parameters
    assert box.x1 - box.x0 < 1 and box.y1 - box.y0 < 1


def _chain_graph(modules: int, ops_per_module: int) -> GraphView:
    nodes = [GraphNode("x", "Input", KIND_INPUT, (), "", (4,), "float32", "")]
    previous = "x"
    for module in range(modules):
        for op in range(ops_per_module):
            node_id = f"m{module}o{op}"
            nodes.append(GraphNode(node_id, "Add", KIND_OP, (previous, "x"), f"block{module}.layer", (4,), "float32",
                                   "forward"))
            previous = node_id
    return GraphView("run", "big", "flowscope", "f", "", "unoptimised", 1.0, ".", tuple(nodes), (previous,))


def test_a_thousand_node_graph_starts_collapsed_by_module() -> None:
    view = _chain_graph(50, 20)
    assert view.op_count == 1000 > EXPAND_LIMIT and default_expanded(view) == ()
    drawn = layout_graph(view, default_expanded(view))
    assert len(drawn.items) == 51 and [item.layer for item in drawn.items] == list(range(51))
    assert drawn.items[1].label == "block0 · forward (20)"
    one_open = layout_graph(view, ("forward|block3",))  # the outer group open, its inner one still collapsed
    assert any(item.key == "forward|block3.layer" for item in one_open.items)
    everything = layout_graph(view, [group.key for group in groups_of(view)])
    assert len(everything.items) == 1001 and max(item.layer for item in everything.items) == 1000


def test_barycentre_order_uncrosses_two_chains() -> None:
    nodes = (GraphNode("a", "Input", KIND_INPUT, (), "", (), "f", ""),
             GraphNode("b", "Input", KIND_INPUT, (), "", (), "f", ""),
             GraphNode("from_b", "Neg", KIND_OP, ("b",), "", (), "f", "forward"),
             GraphNode("from_a", "Neg", KIND_OP, ("a",), "", (), "f", "forward"),
             GraphNode("from_b2", "Neg", KIND_OP, ("from_b",), "", (), "f", "forward"),
             GraphNode("from_a2", "Neg", KIND_OP, ("from_a",), "", (), "f", "forward"))
    view = GraphView("run", "g", "flowscope", "f", "", "unoptimised", 1.0, ".", nodes, ())
    y = {item.key: item.y for item in layout_graph(view, ()).items}
    assert np.sign(y["a"]) == np.sign(y["from_a"]) == np.sign(y["from_a2"]) != np.sign(y["b"])
    assert np.sign(y["b"]) == np.sign(y["from_b"]) == np.sign(y["from_b2"])


def test_a_collapsed_cycle_is_drawn_with_a_back_edge() -> None:
    nodes = (GraphNode("x", "Input", KIND_INPUT, (), "", (), "f", ""),
             GraphNode("a", "Neg", KIND_OP, ("x",), "m", (), "f", "forward"),
             GraphNode("b", "Neg", KIND_OP, ("a",), "", (), "f", "forward"),
             GraphNode("c", "Neg", KIND_OP, ("b",), "m", (), "f", "forward"))
    view = GraphView("run", "g", "flowscope", "f", "", "unoptimised", 1.0, ".", nodes, ())
    drawn = layout_graph(view, ())
    assert [item.key for item in drawn.items] == ["x", "forward|m", "b"] and drawn.back_edges == 1


def test_traced_records_join_by_node_id(tmp_path: Path) -> None:
    run = tmp_path / "run"
    path = write_traced_capture(run, steps=2)
    captured = records_from_trace(fmt.read_trace(path))
    assert captured.traced and captured.steps == 2 and len(captured.records) == 2 * len(TRACED_OPS)
    costs = join_costs(from_graph_file("run", "o", mlp_optimised()), captured)
    assert costs.joined_by == "node id" and costs.matched_records == 18 and costs.unmatched_records == 0
    assert costs.per_node["f1"].time_ms == pytest.approx(0.030) and costs.per_node["n9"].bytes == 8320
    assert costs.per_node["n3"].calls == 1
    on_unoptimised = join_costs(from_graph_file("run", "u", mlp_unoptimised()), captured)
    assert on_unoptimised.unmatched_records == 2 and "f1" not in on_unoptimised.per_node  # f1 exists only there


def _record(name: str, module: str, step: int, ts: float, dur: float, nbytes: int = 0) -> OpRecord:
    return OpRecord(name, module, "", step, ts, dur, nbytes)


def test_eager_records_join_by_name_module_and_occurrence() -> None:
    nodes = (GraphNode("x", "Input", KIND_INPUT, (), "", (), "f", ""),
             GraphNode("first", "Add", KIND_OP, ("x",), "m", (), "f", "forward"),
             GraphNode("other", "Add", KIND_OP, ("first",), "n", (), "f", "forward"),
             GraphNode("second", "Add", KIND_OP, ("other",), "m", (), "f", "forward"),
             GraphNode("fused", "Fused[Mul+Add]", KIND_OP, ("second",), "m", (), "f", "forward", ("Mul", "Add")))
    view = GraphView("run", "g", "flowscope", "f", "", "unoptimised", 1.0, ".", nodes, ())
    records = []
    for step in (0, 1):  # per step: Add in m (1 µs), Add in n (5 µs), Add in m (3 µs), one extra Add in m (9 µs)
        records += [_record("Add", "m", step, 0, 1, 100), _record("Add", "n", step, 2, 5),
                    _record("Add", "m", step, 8, 3, 300), _record("Add", "m", step, 12, 9),
                    _record("Fused[Mul+Add]", "m", step, 22, 4)]
    costs = join_costs(view, CaptureRecords(tuple(records), 2))
    assert costs.joined_by == "op name and module"
    assert {key: (round(cost.time_ms * 1e3, 6), cost.bytes) for key, cost in costs.per_node.items()} == \
        {"first": (1.0, 100), "other": (5.0, 0), "second": (3.0, 300), "fused": (4.0, 0)}
    assert costs.matched_records == 8 and costs.unmatched_records == 2


def test_eager_vs_traced_per_module_and_per_op(tmp_path: Path) -> None:
    eager = CaptureRecords((_record("Linear", "0", 0, 0, 50, 4096), _record("ReLU", "1", 0, 60, 10, 4096),
                            _record("Linear", "0", 1, 100, 30, 4096), _record("ReLU", "1", 1, 140, 10, 4096)), 2)
    traced = records_from_trace(fmt.read_trace(write_traced_capture(tmp_path / "run", steps=2)))
    by_module = {row.key: row for row in compare(eager, traced, "module")}
    assert by_module["0"].eager_ms == pytest.approx(0.040) and by_module["0"].eager_bytes == 4096
    assert by_module["0"].traced_ms == pytest.approx((30 + 40 + 3) / 1e3)
    assert by_module["1"].traced_ms == pytest.approx(0.015) and by_module["(model)"].eager_ms == 0
    assert by_module["0"].time_ratio == pytest.approx(73 / 40)
    by_op = {row.key: row for row in compare(eager, traced, "op")}
    assert by_op["Fused[Linear+ReLU]"].eager_ms == 0 and by_op["Fused[Linear+ReLU]"].traced_ms == pytest.approx(0.03)
    assert by_op["ReLU"].traced_ms == 0 and by_op["ReLU"].time_ratio == 0
    with pytest.raises(ValueError, match="by 'op' or 'module'"):
        compare(eager, traced, "shape")


def test_a_run_lists_its_graph_files_and_reports_bad_ones(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "run"
    with SummaryWriter(run) as writer:
        writer.add_scalar("loss", 1.0, 0)
    write_mlp_graphs(run)
    folder = run / "plugins" / "graph"
    (folder / "notes.txt").write_text("hello")
    (folder / "train_step.1.optimised.json").write_bytes(b'{"version": 1, "nodes": [')  # truncated
    (folder / "train_step.2.optimised.json.tmp-99").write_text("{")  # being written: not listed, no problem
    (tmp_path / "outside.json").write_text("{}")
    (folder / "train_step.3.optimised.json").symlink_to(tmp_path / "outside.json")
    store = _store(tmp_path / "logs")
    listing = list_graphs(store, "run")
    assert [entry.name for entry in listing.entries] == ["train_step.0.optimised", "train_step.0.unoptimised",
                                                         "train_step.1.optimised"]
    assert len(listing.problems) == 2 and any("notes.txt" in line for line in listing.problems)
    assert any("train_step.3.optimised.json: not a regular file" in line for line in listing.problems)
    cache = GraphCache()
    with pytest.raises(Exception, match="train_step.1.optimised.json: not a complete JSON document"):
        cache.open(store, "run", "train_step.1.optimised")
    with pytest.raises(UnknownSeries):
        cache.open(store, "run", "../../outside")
    view = cache.open(store, "run", "train_step.0.optimised")
    assert sibling(store, cache, view, "unoptimised").stage == "unoptimised"
    assert sibling(store, cache, view, "optimised") is None
    assert pass_marks(view.passes) == {"n5": "removed by dead_code", "n1": "merged into f1 by elementwise_fusion",
                                       "n2": "merged into f1 by elementwise_fusion",
                                       "f1": "made by elementwise_fusion from n1, n2"}
    assert list(runs_with_graphs(store)) == ["run"]


def test_torch_add_graph_is_read_and_shown(tmp_path: Path) -> None:
    torch_add_graph(tmp_path / "logs" / "torch")
    store = _store(tmp_path / "logs")
    assert [entry.name for entry in list_graphs(store, "torch").entries] == ["GraphDef"]
    view = GraphCache().open(store, "torch", "GraphDef")
    ops = [node for node in view.nodes if node.kind == KIND_OP]
    assert [node.op for node in ops] == ["aten::linear", "aten::relu", "aten::linear"]
    assert [node.module for node in ops] == ["Sequential/Linear[0]", "Sequential/ReLU[1]", "Sequential/Linear[2]"]
    assert ops[1].inputs == (ops[0].id,) and ops[2].inputs[0] == ops[1].id
    assert ops[0].shape == (2, 8) and ops[2].shape == (2, 3)
    drawn = layout_graph(view, default_expanded(view))
    assert drawn.back_edges == 0 and all(drawn.items[a].layer < drawn.items[b].layer for a, b in drawn.edges)
    assert "graphs" not in not_shown(plugin_uses(store))  # the Graph page draws it now


def test_our_add_graph_is_read_alike(tmp_path: Path) -> None:
    engine.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    with SummaryWriter(tmp_path / "logs" / "ours") as writer:
        writer.add_graph(model, engine.tensor(np.zeros((2, 4), np.float32)))
    store = _store(tmp_path / "logs")
    values = store.plugin_values("ours", metadata.GRAPHS_PLUGIN)[metadata.GRAPH_TAG]
    view = from_graphdef("ours", "GraphDef", values[0].content)
    ops = [node for node in view.nodes if node.kind == KIND_OP]
    assert [(node.op, node.module, node.shape) for node in ops] == [
        ("Linear", "Sequential/0", (2, 8)), ("ReLU", "Sequential/1", (2, 8)), ("Linear", "Sequential/2", (2, 3))]
    assert {node.module for node in view.nodes if node.kind == KIND_PARAMETER} == {"Sequential/0", "Sequential/2"}
    with pytest.raises(ValueError, match="not a GraphDef"):
        from_graphdef("ours", "GraphDef", b"\xff\xff\xff")


def test_tensorflow_meta_graphs_stay_listed_as_not_shown(tmp_path: Path) -> None:
    from board_helpers import version_record
    from instrumentation.format import frame_record, protos

    run = tmp_path / "logs" / "tf"
    run.mkdir(parents=True)
    meta = protos.Event(wall_time=1.7e9, step=0, meta_graph_def=b"\x0a\x00").SerializeToString()
    graph = protos.Event(wall_time=1.7e9, step=0, graph_def=b"").SerializeToString()
    (run / "events.out.tfevents.1700000000.host").write_bytes(version_record() + frame_record(meta) +
                                                             frame_record(graph))
    uses = [use for use in plugin_uses(_store(tmp_path / "logs")) if use.plugin == metadata.GRAPHS_PLUGIN]
    assert [(use.tags, use.shown) for use in uses] == [(1, True), (1, False)]
    assert not_shown(uses) == {"graphs": (1, 1)}
