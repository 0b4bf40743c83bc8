"""Run styles: every run of a log directory its own colour/dash/marker, kept across a new store and new runs."""
from __future__ import annotations

import colorsys
from pathlib import Path

from board.components.colors import PALETTE, slot_style
from board.data.discovery import RunLocation
from board.data.run_slots import RunSlot, RunSlots, creation_key, rank_of
from board.data.store import LogdirStore
from instrumentation import SummaryWriter

DEMO_LIKE = ["baseline", "lr-explodes", "dead-relu", "vanishing", "logits-leak", "oom", "input-bound", "ddp/rank0",
             "ddp/rank1", "ddp/rank2", "ddp/rank3", "nan-origin", "straggler/rank0", "straggler/rank1"]


def _write(logdir: Path, runs: list[str]) -> None:
    for run in runs:  # one after the other, as runs are created
        with SummaryWriter(logdir / run) as writer:
            writer.add_scalar("loss", 1.0, 0)


def _styles(store: LogdirStore) -> dict[str, tuple[str, str, str]]:
    styles = {run: slot_style(store.run_slot(run)) for run in store.run_names()}
    return {run: (style.color, style.dash, style.symbol) for run, style in styles.items()}


def _store(logdir: Path) -> LogdirStore:
    store = LogdirStore(logdir)
    store.refresh()
    return store


def _hue(color: str) -> float:
    return colorsys.rgb_to_hls(*(int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)))[0]


def test_every_run_gets_its_own_style_and_ranks_share_their_groups_hue(tmp_path: Path) -> None:
    _write(tmp_path, DEMO_LIKE)
    styles = _styles(_store(tmp_path))
    assert sorted(styles) == sorted(DEMO_LIKE)
    assert len(set(styles.values())) == len(DEMO_LIKE)
    groups = {"baseline", "lr-explodes", "dead-relu", "vanishing", "logits-leak", "oom", "input-bound", "ddp",
              "nan-origin", "straggler"}  # 10 groups: one hue each, no dash needed
    colors = {run: color for run, (color, _, _) in styles.items()}
    assert len({colors[r] for r in DEMO_LIKE}) == len(DEMO_LIKE)  # colour alone tells them apart
    assert all(dash == "solid" for _, dash, _ in styles.values())
    ddp_hues = {round(_hue(colors[f"ddp/rank{n}"]), 2) for n in range(4)}
    assert len(ddp_hues) == 1  # shades of one hue
    assert len({round(_hue(colors[g]), 2) for g in groups - {"ddp", "straggler"}} | ddp_hues) == 9


def test_a_new_store_on_the_same_logdir_gives_every_run_the_same_style(tmp_path: Path) -> None:
    _write(tmp_path, DEMO_LIKE[:6])
    first = _store(tmp_path)
    before = _styles(first)
    _write(tmp_path, ["aaa-added-later", "m-added-later"])  # sort before some of the others by name
    first.refresh()
    after = _styles(first)
    assert {run: after[run] for run in before} == before  # the runs there keep theirs
    assert len(set(after.values())) == len(after)
    assert after == _styles(_store(tmp_path))  # and a restarted board agrees (creation order, not names)


def test_beyond_the_palette_runs_differ_in_dash_and_marker(tmp_path: Path) -> None:
    runs = [f"run{index:02d}" for index in range(len(PALETTE) + 5)]
    _write(tmp_path, runs)
    styles = _styles(_store(tmp_path))
    assert len(set(styles.values())) == len(runs)
    for index in range(5):
        same_hue = styles[runs[index]], styles[runs[index + len(PALETTE)]]
        assert same_hue[0][0] == same_hue[1][0] and same_hue[0][1:] != same_hue[1][1:]
        assert same_hue[0][1] != same_hue[1][1] and same_hue[0][2] != same_hue[1][2]


def test_slot_styles_are_distinct_over_sixty_groups_of_eleven_ranks() -> None:
    styles = [slot_style(RunSlot(group, rank)) for group in range(60) for rank in (None, *range(11))]
    assert len(set(styles)) == len(styles)


def test_a_freed_slot_is_taken_by_the_next_new_group_and_the_others_keep_theirs() -> None:
    slots = RunSlots()
    key = (1.7e9, "host", 1, 0)
    slots.assign({"a": key, "b": (1.7e9, "host", 1, 1), "c": (1.7e9, "host", 1, 2)})
    assert [slots.slot(r).group for r in "abc"] == [0, 1, 2]
    slots.assign({"a": key, "c": (1.7e9, "host", 1, 2), "d": (1.7e9 + 5, "host", 2, 0)})
    assert [slots.slot(r).group for r in "acd"] == [0, 2, 1]


def test_creation_key_and_rank_come_from_the_names() -> None:
    location = RunLocation("r", Path("."),
                           ("events.out.tfevents.1700000009.h.7.3", "events.out.tfevents.1700000010.h.7.1"))
    assert creation_key(location) == (1700000009.0, "h", 7, 3)
    assert creation_key(RunLocation("r", Path("."), ("events.out.tfevents.weird",)))[0] == float("inf")
    assert [rank_of(r) for r in ("job/rank3", "rank3", "job/ranks", "job")] == [3, 3, None, None]


def test_run_color_outside_a_board_is_stable_per_name() -> None:
    from board.components.colors import run_color, run_style

    assert run_color("x-run") == run_color("x-run") == run_style("x-run").color
    assert run_color("x-run") != run_color("y-run")
