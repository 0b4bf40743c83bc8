"""What recorders see of a replayed step: the eager step's op and module events in the eager order (module_begin
before the module's first op, module_end after its last), and nothing changes for a step with no recorder."""
from __future__ import annotations

import numpy as np

import engine
from engine import hooks, memory
from engine.graph import replay
from tests.engine.graph.digits_step import batches, make


class Events(hooks.Recorder):
    def __init__(self):
        self.seen: list[tuple[str, str]] = []

    def module_begin(self, event):
        self.seen.append(("begin", event.path or event.module_type))

    def module_end(self, event):
        self.seen.append(("end", event.path or event.module_type))

    def op(self, op, module, inputs, outputs, output_bytes, start_ns):
        self.seen.append(("op", f"{module}:{op}"))


def events_of_one_step(run, x, y) -> list[tuple[str, str]]:
    recorder = hooks.add_recorder(Events())
    try:
        run(x, y)
    finally:
        hooks.remove_recorder(recorder)
    return recorder.seen


def test_a_replayed_step_brackets_each_module_s_ops_as_eager_does():
    data = list(batches(3))
    _, _, eager = make("mlp")
    _, _, step = make("mlp")
    traced = engine.function(step)
    traced(*data[0])
    replayed = events_of_one_step(traced, *data[1])
    expected = events_of_one_step(eager, *data[1])
    assert replayed == expected
    assert replayed[:4] == [("begin", "Sequential"), ("begin", "0"), ("op", "0:Linear"), ("end", "0")]


def test_module_events_only_are_bracketed_too():
    class Modules(Events):
        op = hooks.Recorder.op  # not overridden: no op records, module events only

    data = list(batches(2))
    _, _, step = make("mlp")
    traced = engine.function(step)
    traced(*data[0])
    recorder = hooks.add_recorder(Modules())
    try:
        traced(*data[1])
    finally:
        hooks.remove_recorder(recorder)
    assert recorder.seen == [("begin", "Sequential"), ("begin", "0"), ("end", "0"), ("begin", "1"), ("end", "1"),
                             ("begin", "2"), ("end", "2"), ("end", "Sequential")]


def test_the_replay_source_tests_hook_flags_and_calls_nodes_in_order():
    _, _, step = make("mlp")
    traced = engine.function(step)
    for x, y in batches(2):
        traced(x, y)
    graph = traced.graphs()[0][1]
    code = replay.source(graph)
    assert code.startswith("def replay(a0, a1):")
    assert code.count("if H.module_begin:") == 4 and code.count("_forward_hooks or H.module_end") == 4
    calls = [line.strip() for line in code.splitlines() if "if observed else" in line]
    assert len(calls) == sum(n.kind in ("forward", "backward") for n in graph.nodes)
    # no recorder: same results as the unoptimised graph's replay
    x, y = next(batches(1, seed=3))
    _, _, plain = make("mlp")
    unoptimised = engine.function(plain, passes=[])
    unoptimised(x, y)
    _, _, again = make("mlp")
    optimised = engine.function(again)
    optimised(x, y)
    assert np.array_equal(optimised(x, y).numpy(), unoptimised(x, y).numpy())


def test_allocations_of_a_replayed_forward_belong_to_their_module_as_in_eager():
    class Blocks(hooks.Recorder):
        def __init__(self):
            self.linear: set[tuple[str, str]] = set()

        def op_begin(self, op, module, inputs):
            if op == "CrossEntropy":  # the two Linear results are alive: which module allocated each
                self.linear = {(b.op, b.module) for b in memory.live_blocks() if b.op == "Linear"}

    data = list(batches(2))
    _, _, eager = make("mlp")
    _, _, step = make("mlp")
    traced = engine.function(step)
    traced(*data[0])
    seen = []
    for run in (eager, traced):
        recorder = hooks.add_recorder(Blocks())
        try:
            run(*data[1])
        finally:
            hooks.remove_recorder(recorder)
        seen.append(recorder.linear)
    assert seen[0] == seen[1] == {("Linear", "0"), ("Linear", "2")}
    assert hooks.current_module() == ""
