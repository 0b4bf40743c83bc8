"""Module spans derived at export from the ops' module paths: a hand-worked sequence with its expected spans."""
from __future__ import annotations

from engine.op_log import OpRecord
from instrumentation.profiler.export import module_spans


def _op(module: str, phase: str, step: int, start_ns: int, end_ns: int) -> OpRecord:
    return OpRecord("Op", phase, module, step, start_ns, end_ns, (), (), 0, 0, None)


def test_runs_split_at_other_modules_phases_and_steps_and_end_with_their_last_op() -> None:
    ops = [_op("0", "forward", 0, 0, 10), _op("0", "forward", 0, 12, 20),  # one run of module 0
           _op("1.a", "forward", 0, 21, 30), _op("1.b", "forward", 0, 31, 40),  # module 1 holds both
           _op("", "forward", 0, 41, 45),  # outside every module: closes 1.b and 1
           _op("1.b", "backward", 0, 50, 60), _op("1.a", "backward", 0, 61, 70),  # backward visits: new spans
           _op("1.a", "forward", 1, 80, 90)]  # the next step: new spans, left open until the end
    assert module_spans(ops) == [
        ("0", "forward", 0, 0, 20), ("1.a", "forward", 0, 21, 30), ("1.b", "forward", 0, 31, 40),
        ("1", "forward", 0, 21, 40), ("1.b", "backward", 0, 50, 60), ("1.a", "backward", 0, 61, 70),
        ("1", "backward", 0, 50, 70), ("1.a", "forward", 1, 80, 90), ("1", "forward", 1, 80, 90)]


def test_no_ops_no_spans_and_top_level_ops_have_none() -> None:
    assert module_spans([]) == []
    assert module_spans([_op("", "forward", 0, 0, 5), _op("", "backward", 0, 6, 9)]) == []
