"""The Alerts page links each alert to where its evidence is shown."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from board.components.dynamics_alerts_table import alert_link, all_alerts_table
from board.data.alerts import RunAlert
from instrumentation.format.alerts import Alert


def test_memory_alerts_open_their_snapshot_on_the_memory_page():
    oom = RunAlert("exp/a b", Alert("oom", "error", "fc1", "out of memory", 7, 0.0,
                                    {"snapshot": "2026_11_29_17_00_00"}))
    url = urlsplit(alert_link(oom))
    assert url.path == "/memory"
    assert parse_qs(url.query) == {"run": ["exp/a b"], "snapshot": ["2026_11_29_17_00_00"], "step": ["7"]}
    leak = RunAlert("r", Alert("leak", "warning", "fc1", "grows", 40, 0.0, {}))
    assert alert_link(leak) == "/memory?run=r&step=40"  # the step marked on the chart


def test_training_alerts_open_the_step_on_the_dynamics_page():
    spike = RunAlert("r", Alert("exploding_gradient", "error", "0.weight", "big", 3, 0.0))
    expected = "/dynamics?run=r&step=3&kind=exploding_gradient&subject=0.weight"  # the series to mark: its subject
    assert alert_link(spike) == expected
    table = all_alerts_table([spike])
    link = table.children[1].children[0].children[1].children
    assert link.href == expected
    nan = RunAlert("a&b", Alert("nonfinite", "error", "", "NaN", 5, 0.0))
    assert parse_qs(urlsplit(alert_link(nan)).query) == {"run": ["a&b"], "step": ["5"], "kind": ["nonfinite"]}


def test_input_bound_alerts_open_the_step_on_the_profile_page():
    waiting = RunAlert("exp/r", Alert("input_bound", "warning", "data", "waits for data", 12, 0.0, {}))
    url = urlsplit(alert_link(waiting))
    assert url.path == "/profile" and parse_qs(url.query) == {"run": ["exp/r"], "step": ["12"], "kind": ["input_bound"]}
    windowed = RunAlert("r", Alert("input_bound", "warning", "data", "waits", 19, 0.0,
                                   {"first_step": 0, "last_step": 19}))
    assert parse_qs(urlsplit(alert_link(windowed)).query) == {"run": ["r"], "step": ["19"], "kind": ["input_bound"],
                                                              "first": ["0"], "last": ["19"]}


def test_rank_alerts_open_their_groups_ranks_page():
    straggler = RunAlert("exp/a&b/rank3", Alert("straggler", "warning", "rank3", "slow", 40, 0.0, {}))
    url = urlsplit(alert_link(straggler))
    assert url.path == "/ranks" and parse_qs(url.query) == {"group": ["exp/a&b"]}
    divergence = RunAlert("rank1", Alert("replica_divergence", "error", "rank1", "differ", 10, 0.0, {}))
    assert alert_link(divergence) == "/ranks?group=."
    # the rank and the window of its evidence: the rank highlighted, the window shaded on the busy-time chart
    windowed = RunAlert("g/rank2", Alert("straggler", "warning", "rank2", "slow", 59, 0.0,
                                         {"rank": 2, "window_steps": [40, 59]}))
    assert parse_qs(urlsplit(alert_link(windowed)).query) == {"group": ["g"], "rank": ["2"], "window": ["40-59"]}
    odd = RunAlert("g/rank2", Alert("straggler", "warning", "rank2", "slow", 59, 0.0, {"rank": "2", "window_steps": 5}))
    assert alert_link(odd) == "/ranks?group=g"  # malformed evidence is left out


def test_a_badge_tooltip_does_not_repeat_a_subject_its_message_begins_with():
    from board.components.alert_summary import _badge
    from board.data.alerts import KindSummary

    dead = RunAlert("r", Alert("dead_units", "warning", "3", "3: 94% of its units were never positive", 9, 0.0))
    other = RunAlert("r", Alert("leak", "warning", "fc1", "grows 1 KiB a step", 9, 0.0))
    site = "train.py:12 step"
    leak = RunAlert("r", Alert("leak", "warning", site, f"live memory grows: 1 block per step allocated at {site}",
                               9, 0.0))
    titles = [_badge(KindSummary(item.alert.kind, 1, item.alert.severity, item)).title
              for item in (dead, other, leak)]
    assert titles == ["3: 94% of its units were never positive", "fc1: grows 1 KiB a step", leak.alert.message]
