"""backward() walks the stack once for all its allocations (engine.hooks.enter_site_scope): every buffer gets the site
its own stack walk would have found, also when user code (a user-defined op, an observer) allocates inside."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import hooks, memory
from engine.op import Function


class _UserScale(Function):
    """An op defined outside the engine: its backward is user code."""

    made: list = []

    def forward(self, x: np.ndarray) -> np.ndarray:
        return x * 3.0

    def backward(self, grad: np.ndarray) -> tuple:
        _UserScale.made.append(engine.tensor(np.ones(7, np.float32)))  # allocated in a user op's backward
        return (grad * 3.0,)


class _AllocatingObserver:
    """An observer that allocates a tensor on each backward op it sees."""

    def __init__(self) -> None:
        self.made: list = []

    def op_end(self, event: hooks.OpEvent) -> None:
        if event.phase == "backward" and not self.made:
            self.made.append(engine.tensor(np.ones(11, np.float32)))  # allocated by an observer


def _step(kept: list) -> None:
    engine.manual_seed(0)
    layer = engine.nn.Linear(5, 4)
    x = engine.tensor(np.ones((3, 5), np.float32))
    loss = _UserScale()(layer(x).relu()).sum()
    loss.backward()  # the backward line
    kept += [layer, x, loss]


def _sites(make_tracker, scoped: bool, monkeypatch) -> dict[tuple, tuple]:
    monkeypatch.undo()
    if not scoped:  # every allocation walks the stack itself
        monkeypatch.setattr(hooks, "enter_site_scope", lambda: hooks.site_scope)
    tracker, observer, kept = make_tracker(stacks=True, leak=None), _AllocatingObserver(), []
    _UserScale.made.clear()
    hooks.subscribe(observer)
    try:
        _step(kept)
    finally:
        hooks.unsubscribe(observer)
    sites = {(block.op, block.shape, block.category): block.site for block in memory.live_blocks()
             if block.phase == "backward" or block.category == "gradient"}
    tracker.close()
    return sites


def test_backward_allocations_get_the_sites_of_their_own_stack_walks(make_tracker, monkeypatch) -> None:
    walked, scoped = [_sites(make_tracker, scoped, monkeypatch) for scoped in (False, True)]  # from one line
    assert scoped == walked
    frames = {key[2]: site[0] for key, site in scoped.items()}
    assert frames["gradient"].endswith(" _step") and f":{_line('# the backward line')} " in frames["gradient"]
    user_op = scoped[("tensor", (7,), "input")][0]
    assert user_op.endswith(" backward") and f":{_line('# allocated in a user op')} " in user_op
    observer = scoped[("tensor", (11,), "input")][0]
    assert observer.endswith(" op_end") and f":{_line('# allocated by an observer')} " in observer
    assert hooks.site_scope is None


def test_without_a_site_recorder_backward_sets_no_scope() -> None:
    seen = []

    class Watch:
        def alloc(self, event: hooks.MemoryEvent) -> None:
            seen.append(hooks.site_scope)

    watch = hooks.subscribe(Watch())
    try:
        kept: list = []
        _step(kept)
    finally:
        hooks.unsubscribe(watch)
    assert seen and all(scope is None for scope in seen) and hooks.site_scope is None


def test_a_failing_backward_leaves_no_scope_behind(make_tracker) -> None:
    make_tracker(stacks=True, leak=None)
    x = engine.tensor(np.ones(3, np.float32), requires_grad=True)
    y = (x * 2.0).sum()
    y.backward()
    with pytest.raises(RuntimeError):
        y.backward()  # the graph was freed
    z = (x * 2.0).sum()
    memory.set_limit(memory.allocated_bytes("cpu"))
    with pytest.raises(memory.OutOfMemoryError):
        z.backward()
    memory.set_limit(None)
    assert hooks.site_scope is None


def _line(marker: str) -> int:
    from pathlib import Path
    return next(number for number, text in enumerate(Path(__file__).read_text().splitlines(), start=1)
                if text.rstrip().endswith(marker) or marker in text and "_line(" not in text)
