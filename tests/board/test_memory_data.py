"""board.data.memory: the module treemap and the timeline's category bands, from real tracker output."""
from __future__ import annotations

from pathlib import Path

from board.data.memory import devices, memory_alerts, memory_runs, module_treemap, snapshot_headers, snapshots, timeline
from board.data.store import LogdirStore
from board.data.system import gpus, series, system_runs
from instrumentation.format.memory_snapshot import AllocatorState, MemoryBlock, MemorySnapshot
from memory_runs import write_memory_runs


def test_treemap_parents_hold_their_children() -> None:
    blocks = tuple(MemoryBlock(b, (), "float32", "op", module, 0, (), category) for b, module, category in (
        (100, "encoder.layer1", "activation"), (50, "encoder.layer1", "parameter"), (30, "encoder", "activation"),
        (7, "", "input")))
    snapshot = MemorySnapshot("cpu", "manual", 3, 0.0, AllocatorState(187, 187, 187, None, None), blocks)
    tree = module_treemap(snapshot)
    value = dict(zip(tree.ids, tree.values))
    parent = dict(zip(tree.ids, tree.parents))
    assert value["encoder"] == 180 and value["encoder.layer1"] == 150 and value["(top level)"] == 7
    assert value[tree.ids[0]] == 187 and parent["encoder.layer1"] == "encoder"
    assert value["encoder.layer1|activation"] == 100 and parent["encoder.layer1|activation"] == "encoder.layer1"


def test_store_views_of_planted_runs(tmp_path: Path) -> None:
    write_memory_runs(tmp_path)
    store = LogdirStore(tmp_path)
    store.refresh()
    assert memory_runs(store) == ["healthy", "leaky", "oom"]  # "oom" has only its snapshot: it died in step 0
    assert system_runs(store) == ["healthy", "leaky"]
    assert devices(store, "leaky") == ["cpu"]
    line = timeline(store, "leaky", "cpu")
    assert len(line.steps) == 60
    stacked = sum(line.bands.values())
    assert (stacked == line.peak).all()  # the bands stack up to the peak of each step
    assert line.allocated[-1] - line.allocated[-2] == 32 * 48 * 4  # the hook keeps one fc1 output per step
    [leak] = memory_alerts(store, "leaky")
    assert leak.kind == "leak" and leak.evidence["snapshot"] in {f.capture_id for f in snapshots(store, "leaky")}
    listed = {f.capture_id: header for f, header in snapshot_headers(store, "leaky")}
    assert listed[leak.evidence["snapshot"]].reason == "leak" and listed[leak.evidence["snapshot"]].step == leak.step
    [oom] = [header for _, header in snapshot_headers(store, "oom") if header.reason == "oom"]
    assert (oom.device, oom.step) == ("cpu", 0) and oom.allocated_bytes > 0
    assert gpus(store, "healthy") == [0, 1]
    util = series(store, "healthy", "sys/gpu1/util_percent", "wall")
    assert util is not None and set(util.y.tolist()) == {20.0}
