"""profile's schedule against torch.profiler.schedule (the oracle), and the profiler's cycle transitions."""
from __future__ import annotations

import pytest

from instrumentation.profiler.schedule import ProfilerAction, schedule

CONFIGS = [dict(wait=1, warmup=1, active=3, repeat=1), dict(wait=0, warmup=0, active=2, repeat=3),
           dict(wait=2, warmup=1, active=1, repeat=0, skip_first=3),
           dict(wait=1, warmup=2, active=4, repeat=2, skip_first=1)]


@pytest.mark.parametrize("config", CONFIGS)
def test_actions_match_torch_profiler_schedule(config: dict) -> None:
    torch_profiler = pytest.importorskip("torch.profiler")
    ours, theirs = schedule(**config), torch_profiler.schedule(**config)
    assert [ours(step).name for step in range(60)] == [theirs(step).name for step in range(60)]


def test_invalid_arguments_name_the_bad_value() -> None:
    with pytest.raises(ValueError, match="active must be a positive integer, got 0"):
        schedule(wait=1, warmup=1, active=0)
    with pytest.raises(ValueError, match="wait must be a non-negative integer, got -1"):
        schedule(wait=-1, warmup=1, active=1)


def test_cycle_shape() -> None:
    actions = [schedule(wait=1, warmup=1, active=2, repeat=2)(step) for step in range(9)]
    N, W, R, S = ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE
    assert actions == [N, W, R, S, N, W, R, S, N]


@pytest.mark.parametrize("config", CONFIGS + [dict(wait=0, warmup=0, active=1, repeat=0),
                                              dict(wait=3, warmup=0, active=1)])
def test_next_change_never_skips_a_step_with_something_to_do(config: dict) -> None:
    """Brute force: between a step and its next_change, every action equals the step's and none ends a cycle."""
    plan = schedule(**config)
    actions = [plan(step) for step in range(80)]
    for step in range(60):
        change = plan.next_change(step)
        if change is None:
            assert all(action is ProfilerAction.NONE for action in actions[step:])
            continue
        assert change > step
        quiet = actions[step + 1:min(change, 80)]
        assert all(action is actions[step] for action in quiet)
        assert ProfilerAction.RECORD_AND_SAVE not in actions[step:min(change, 80) - 1]
