"""The dispatch core holds: no recorder loop outside ``engine.hooks``, no test of a running trace outside the
tracer, and the side channels that were (the tracer, ``FLOWSCOPE_DEBUG``'s check) are recorders in the one list."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import config, hooks, nn
from engine.debug import NonFiniteCheck
from engine.graph.trace import Tracer

ENGINE = Path(engine.__file__).resolve().parent
_RECORDER_LOOP = re.compile(r"for \w+ in (?:_?hooks)\.\w+")
_PROPAGATING_RULE = re.compile(r"except\s+\(?[\w.]*PropagatingError")
_TRACE_STATE = re.compile(r"_trace\.active|trace\._active|\bTracer\b")


def _engine_sources() -> dict[str, str]:
    return {str(path.relative_to(ENGINE.parent)): path.read_text(encoding="utf-8") for path in ENGINE.rglob("*.py")}


def _offending(pattern: re.Pattern, allowed: set[str]) -> list[str]:
    found = []
    for name, text in _engine_sources().items():
        if name in allowed:
            continue
        found += [f"{name}:{number}: {line.strip()}" for number, line in enumerate(text.splitlines(), 1)
                  if pattern.search(line)]
    return found


def test_the_checks_find_what_they_look_for() -> None:
    assert _RECORDER_LOOP.search("        for record in _hooks.op:")
    assert _PROPAGATING_RULE.search("            except _PropagatingError:")
    assert _TRACE_STATE.search("        tracer = _trace.active")


def test_only_the_core_loops_over_recorders_and_applies_the_error_rule() -> None:
    assert _offending(_RECORDER_LOOP, {"engine/hooks.py"}) == []
    assert _offending(_PROPAGATING_RULE, {"engine/hooks.py"}) == []


def test_no_engine_module_but_the_tracer_knows_a_trace_is_running() -> None:
    assert _offending(_TRACE_STATE, {"engine/graph/trace.py", "engine/graph/traced_function.py"}) == []


def test_the_tracer_is_a_recorder_only_while_it_traces() -> None:
    seen: list[list] = []
    model = nn.Linear(3, 2)

    @engine.function
    def step(x):
        seen.append([r for r in hooks.recorders if isinstance(r, Tracer)])
        return model(x).sum()

    x = engine.tensor(np.ones((2, 3), np.float32))
    step(x)
    assert len(seen[0]) == 1 and not any(isinstance(r, Tracer) for r in hooks.recorders)
    assert not hooks.ops_observed


def test_a_recorder_sees_what_the_tracer_records_in_the_same_call() -> None:
    """The tracer and an op recorder get the same ops from the same dispatch: the graph's op nodes are the ops the
    recorder saw (forward and backward), in order."""
    seen: list[str] = []

    class Ops(hooks.Recorder):
        def op(self, op, module, inputs, outputs, output_bytes, start_ns):
            seen.append(op)

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    optimizer = engine.optim.SGD(model.parameters(), lr=0.1)

    @engine.function(passes=[])
    def step(x):
        optimizer.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        optimizer.step()
        return loss

    recorder = hooks.add_recorder(Ops())
    try:
        step(engine.tensor(np.ones((2, 3), np.float32)))
    finally:
        hooks.remove_recorder(recorder)
    (graph, _), = step.graphs()
    assert [n.op for n in graph.nodes if n.kind in ("forward", "backward")] == seen
    assert any(name.endswith("Backward") for name in seen)


def test_the_debug_check_is_a_recorder_attached_while_debug_is_set() -> None:
    x = engine.tensor(np.array([1.0, 0.0], np.float32), requires_grad=True)
    assert not any(isinstance(r, NonFiniteCheck) for r in hooks.recorders)
    with np.errstate(all="ignore"):
        (x / x).sum()  # NaN, unchecked
        with config.override(DEBUG=1):
            assert any(isinstance(r, NonFiniteCheck) for r in hooks.recorders)
            with pytest.raises(engine.NonFiniteError, match="op 'Div'") as info:
                x / x
            assert isinstance(info.value, FloatingPointError)
            with pytest.raises(engine.NonFiniteError, match="op 'Log'"):
                x.log()
            (x + 1).log().sum()  # finite: no error
    assert not any(isinstance(r, NonFiniteCheck) for r in hooks.recorders)


def test_the_debug_check_sees_backward_nodes_too() -> None:
    class InfiniteGradient(engine.Function):
        def forward(self, x):
            return x.copy()

        def backward(self, grad):
            return (grad * np.inf,)

    x = engine.tensor(np.ones(2, np.float32), requires_grad=True)
    with config.override(DEBUG=1):
        out = InfiniteGradient()(x).sum()
        with pytest.raises(engine.NonFiniteError, match="InfiniteGradientBackward"):
            out.backward()
