"""The straggler rule: each rank compares its busy time with the other ranks' median over a window, decides about
itself and writes the alert into its own run, once per episode."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from instrumentation.distributed import RankMonitor
from instrumentation.distributed.straggler import StragglerSettings, Verdict, compare
from instrumentation.format import alert_names as keys
from instrumentation.format.alerts import ALERTS_RELPATH, AlertReader
from instrumentation.summary import SummaryWriter
from rank_threads import CommEvent, play_step, run_ranks

WINDOW = 20


def alerts_of(run_dir: Path) -> list:
    return AlertReader(os.path.join(run_dir, ALERTS_RELPATH)).read()


def train_ranks(tmp_path: Path, world_size: int, busy_ms, steps: int = WINDOW, wait_ms: float = 2.0,
                data_ms: float = 1.0) -> list[list]:
    """Each rank (a thread) plays ``steps`` steps whose busy time is ``busy_ms(rank, step)``, with a RankMonitor
    writing to ``tmp_path/rank<k>``; the alerts each rank's file holds."""

    def rank_body(rank: int, member) -> list:
        run_dir = tmp_path / f"rank{rank}"
        with SummaryWriter(run_dir) as writer:
            with RankMonitor(writer, group=member) as monitor:
                for step in range(steps):
                    busy = busy_ms(rank, step)
                    play_step(monitor, step, step_ms=busy + wait_ms + data_ms, wait_ms=wait_ms, data_ms=data_ms)
        return alerts_of(run_dir)

    return run_ranks(world_size, rank_body)


@pytest.mark.parametrize("world_size", [2, 4])
def test_the_slow_rank_and_only_it_raises_the_alert_with_its_evidence(tmp_path: Path, world_size: int) -> None:
    slow = world_size - 1
    # NOTE: the first window (steps 0-19) is the warm-up's: compared, not reported; the episode starts at the second
    alerts = train_ranks(tmp_path, world_size, lambda rank, step: 13.0 if rank == slow else 10.0, steps=2 * WINDOW)
    assert [len(a) for a in alerts] == [0] * slow + [1]
    (alert,) = alerts[slow]
    assert (alert.kind, alert.subject, alert.step) == (keys.STRAGGLER, f"rank{slow}", 2 * WINDOW - 1)
    assert alert.evidence == {keys.RANK: slow, keys.WORLD_SIZE: world_size,
                              keys.WINDOW_STEPS: [WINDOW, 2 * WINDOW - 1],
                              keys.BUSY_MS: pytest.approx(13.0), keys.OTHERS_BUSY_MS: pytest.approx(10.0),
                              keys.RATIO: pytest.approx(1.3), keys.MARGIN: 0.15, keys.MIN_STEPS: 16,
                              keys.STEPS_OVER: WINDOW}


def test_a_rank_slow_only_in_the_first_window_the_warm_up_raises_nothing(tmp_path: Path) -> None:
    alerts = train_ranks(tmp_path, 2, lambda rank, step: 13.0 if rank == 1 and step < WINDOW else 10.0,
                         steps=3 * WINDOW)
    assert alerts == [[], []]


def test_a_healthy_group_with_noise_raises_nothing(tmp_path: Path) -> None:
    noise = np.random.default_rng(0).uniform(-0.5, 0.5, size=(4, 3 * WINDOW))  # ±5 % of a 10 ms busy time
    alerts = train_ranks(tmp_path, 4, lambda rank, step: 10.0 + noise[rank, step], steps=3 * WINDOW)
    assert alerts == [[], [], [], []]


def test_the_number_of_steps_over_the_margin_decides(tmp_path: Path) -> None:
    # rank 1 is 20 % busier on 15 steps of the first window, on 16 of the second
    over = {*range(15), *range(WINDOW, WINDOW + 16)}
    alerts = train_ranks(tmp_path, 2, lambda rank, step: 12.0 if rank == 1 and step in over else 10.0,
                         steps=2 * WINDOW)
    assert alerts[0] == []
    (alert,) = alerts[1]
    assert alert.evidence[keys.WINDOW_STEPS] == [WINDOW, 2 * WINDOW - 1]
    assert alert.evidence[keys.STEPS_OVER] == 16


def test_one_alert_per_episode_and_another_after_recovering(tmp_path: Path) -> None:
    slow_windows = {1, 2, 4}  # straggles in windows 1 and 2 (one episode), recovers in 3, straggles again in 4
    alerts = train_ranks(tmp_path, 2, lambda rank, step: 14.0 if rank == 0 and step // WINDOW in slow_windows else 10.0,
                         steps=5 * WINDOW)
    assert [a.step for a in alerts[0]] == [2 * WINDOW - 1, 5 * WINDOW - 1]
    assert alerts[1] == []


def test_waiting_for_the_others_is_not_being_slow(tmp_path: Path) -> None:
    # rank 0 waits 4 ms in allreduce for rank 1 at each step: their step times are equal, their busy times are not
    def rank_body(rank: int, member) -> list:
        with SummaryWriter(tmp_path / f"rank{rank}") as writer, RankMonitor(writer, group=member) as monitor:
            for step in range(2 * WINDOW):  # the first window is the warm-up's (not reported)
                play_step(monitor, step, step_ms=15.0, wait_ms=5.0 if rank == 0 else 1.0)
        return monitor.alerts

    no_alerts, (alert,) = run_ranks(2, rank_body)
    assert no_alerts == []
    assert alert.subject == "rank1" and alert.evidence[keys.BUSY_MS] == pytest.approx(14.0)
    assert alert.evidence[keys.OTHERS_BUSY_MS] == pytest.approx(10.0)


def test_compare_takes_the_median_of_the_others_and_skips_steps_without_figures() -> None:
    settings = StragglerSettings(window=4, margin=0.15, min_steps=3)
    busy = np.array([[10.0, 10.0, 10.0, np.nan],
                     [10.0, 30.0, 10.0, 10.0],  # one slow step is not a straggler
                     [11.0, 11.0, 11.0, 11.0],
                     [12.0, 12.0, np.nan, 12.0]])
    verdicts = [compare(busy, rank, settings) for rank in range(4)]
    assert [v.straggler for v in verdicts] == [False, False, False, False]
    # rank 3: others' medians 10, 11 (the 30 ms step is one of three), -, 10.5 (rank 0 has no figure): 12 ms is over
    # 1.15x only at step 0; its own step 2 has no figure and is left out
    assert verdicts[3] == Verdict(steps_over=1, busy_ms=12.0, others_busy_ms=10.5, straggler=False)
    assert verdicts[1].steps_over == 1  # 30 vs 11
    slow = busy.copy()
    slow[3] = [13.0, 13.0, 12.0, 12.5]
    verdict = compare(slow, 3, settings)  # 1.3x, 1.18x, 1.2x, 1.19x the others
    assert [s >= 1.15 * o for s, o in zip(slow[3], [10.0, 11.0, 10.0, 10.5])] == [True, True, True, True]
    assert (verdict.steps_over, verdict.straggler) == (4, True)
    assert compare(slow[:1], 0, settings) is None  # a single rank has nobody to compare with


def test_a_rank_whose_step_figures_fail_still_joins_the_exchange(tmp_path: Path, capsys) -> None:
    # rank 1's events are malformed at every step: its figures are skipped (reported once), but it makes the window's
    # all_gather like every rank (a rank that skipped it would leave the others waiting: the group's barrier breaks)
    def rank_body(rank: int, member) -> list:
        with SummaryWriter(tmp_path / f"rank{rank}") as writer, RankMonitor(writer, group=member) as monitor:
            for step in range(WINDOW):
                if rank == 1:
                    monitor.communication(CommEvent("allreduce", 0, 8, None, None, step))  # no times: it fails
                play_step(monitor, step, step_ms=12.0)
        return member.group.calls[rank]

    assert run_ranks(2, rank_body) == [1, 1]
    assert capsys.readouterr().err.count("the step's figures failed") == 1
