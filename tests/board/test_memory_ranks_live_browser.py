"""The Memory and Ranks pages in a real browser: points appended to the log directory while a page is open are drawn
(read back from the Plotly figure), and the links of the `leak`, `oom` and `straggler` alerts open a page with the
alert's evidence marked (the leak's window, the OOM step, the straggler's window shaded and its rank highlighted)."""
from __future__ import annotations

import gc
import json
import re
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from board_helpers import watch_console
from engine import hooks
from instrumentation import MemoryTracker, SummaryWriter
from memory_truth_runs import write_leak_run, write_oom_run
from ranks_fixture import rank_tags, write_rank, write_straggler_group
from training_loops import train

pytestmark = pytest.mark.browser
TIMELINE = "[id='{\"device\":\"cpu\",\"type\":\"memory-timeline\"}'] .js-plotly-plot"
RANK_LINES = "#ranks-step-times .js-plotly-plot"


def _last_x(selector: str, trace: str) -> str:
    """JS: the last x of the trace named `trace` in the Plotly figure at `selector` (-1 until drawn)."""
    return (f"() => {{ const gd = document.querySelector({json.dumps(selector)}); if (!gd || !gd.data) return -1;"
            f" const t = gd.data.find(t => t.name === {json.dumps(trace)}); if (!t) return -1;"
            " const x = Array.from(t.x).filter(v => v !== null); return x.length ? Math.max(...x) : -1; }")


def _wait_last_x(page: Page, selector: str, trace: str, step: int) -> None:
    """Wait (bounded by the page's timeout) until the trace's last drawn step is `step`."""
    page.wait_for_function(f"() => ({_last_x(selector, trace)})() === {step}")


def _shapes(page: Page, selector: str) -> list[dict]:
    return page.eval_on_selector(selector, "gd => (gd.layout.shapes || []).map(s => ({name: s.name, x0: s.x0, "
                                           "x1: s.x1, width: s.line && s.line.width}))")


def _track(run_dir: Path, steps: int, first_step: int) -> None:
    """`steps` training steps from `first_step`, every one logged by a memory tracker."""
    gc.collect()
    hooks.reset_step(first_step)
    with SummaryWriter(run_dir) as writer:
        tracker = MemoryTracker(writer, stacks=False, leak=None, host_rss=False, every=1)
        train(steps, "")
        tracker.close()
    hooks.reset_step(0)


def test_the_memory_page_draws_steps_appended_while_it_is_open(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    _track(logdir / "live", 10, 0)
    board = serve_board(logdir)
    errors = watch_console(page)
    page.goto(board.url + "/memory?run=live")
    _wait_last_x(page, TIMELINE, "peak", 9)
    listed = page.locator("#memory-snapshots li").count()
    expect(page.locator("#memory-snapshot-count")).to_have_text(f"snapshots ({listed})")
    _track(logdir / "live", 10, 10)  # a second event file of the same run, as a resumed run writes
    _wait_last_x(page, TIMELINE, "peak", 19)
    on_disk = len(list((logdir / "live" / "plugins" / "memory").glob("*.snapshot.json.gz")))
    assert on_disk > listed  # the second tracker wrote its own peak snapshot: the list follows
    expect(page.locator("#memory-snapshot-count")).to_have_text(f"snapshots ({on_disk})")
    expect(page.locator("#memory-snapshots li")).to_have_count(on_disk)
    assert page.eval_on_selector(TIMELINE, "gd => Array.from(gd.data.find(t => t.name === 'allocated').x).length") == 20
    assert not errors


def test_the_ranks_page_draws_steps_appended_while_it_is_open(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    write_straggler_group(logdir, steps=40)
    board = serve_board(logdir)
    errors = watch_console(page)
    page.goto(board.url + "/ranks?group=ddp")
    _wait_last_x(page, RANK_LINES, "rank0", 39)
    rng = np.random.default_rng(1)
    for rank in range(4):
        write_rank(logdir / "ddp" / f"rank{rank}", rank_tags(100.0 + rng.uniform(0, 1, 20), first_step=40))
    for rank in range(4):
        _wait_last_x(page, RANK_LINES, f"rank{rank}", 59)
    assert not errors


def _open_alert(page: Page, url: str, kind: str) -> None:
    """Open the Alerts page and follow the link of the (only) alert of `kind`."""
    page.goto(url + "/alerts")
    row = page.locator("#alerts-table tbody tr", has=page.locator("td", has_text=kind))
    expect(row).to_have_count(1)
    row.locator("a").first.click()


def test_memory_alert_links_open_the_chart_with_the_evidence_marked(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    write_leak_run(logdir / "leaky")
    write_oom_run(logdir / "oom")
    board = serve_board(logdir)
    errors = watch_console(page)

    _open_alert(page, board.url, "leak")
    expect(page).to_have_url(re.compile(r"/memory\?run=leaky&snapshot=\d{4}_.*&step=\d+$"))
    expect(page.locator("#memory-snapshot-title")).to_contain_text("snapshot")
    page.wait_for_function(f"() => {{ const gd = document.querySelector({json.dumps(TIMELINE)});"
                           " return gd && gd.layout && (gd.layout.shapes || []).length >= 2; }")
    shapes = {s["name"]: s for s in _shapes(page, TIMELINE)}
    alert = page.locator("#memory-alerts").text_content()
    assert "leak-window" in shapes and "leak-step" in shapes
    window = (int(shapes["leak-window"]["x0"]), int(shapes["leak-window"]["x1"]))
    assert f"steps {window[0]}–{window[1]}" in alert  # the shaded window is the alert's
    assert shapes["leak-step"]["x0"] == window[1] and shapes["leak-step"]["width"] > 2  # drawn strong: the one opened
    peak_x = page.eval_on_selector(TIMELINE, "gd => Array.from(gd.data.find(t => t.name === 'peak').x)")
    assert window[1] in peak_x  # the alert's step is a logged point

    _open_alert(page, board.url, "oom")
    expect(page).to_have_url(re.compile(r"/memory\?run=oom&snapshot=\d{4}_.*&step=\d+$"))
    expect(page.locator("#memory-allocator")).to_contain_text("reason oom")
    page.wait_for_function(f"() => {{ const gd = document.querySelector({json.dumps(TIMELINE)});"
                           " return gd && gd.layout && (gd.layout.shapes || []).some(s => s.name === 'oom-step'); }")
    [oom] = [s for s in _shapes(page, TIMELINE) if s["name"] == "oom-step"]
    step = int(page.locator("#memory-allocator").text_content().split("step ")[1].split(" ")[0])
    assert oom["x0"] == step and oom["width"] > 2
    assert page.evaluate(f"({_last_x(TIMELINE, 'peak')})()") == step  # the OOM step is on the chart
    assert page.eval_on_selector(TIMELINE, "gd => gd.data.some(t => t.name === 'limit')")
    assert not errors


def test_a_straggler_link_shades_its_window_and_highlights_its_rank(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    write_straggler_group(logdir, steps=40, slow_rank=2)
    board = serve_board(logdir)
    errors = watch_console(page)
    _open_alert(page, board.url, "straggler")
    expect(page).to_have_url(re.compile(r"/ranks\?group=ddp&rank=2&window=0-19$"))
    # the busy time the rule compares (the input found by its label: dash 2.17 gives radio inputs no value attribute)
    expect(page.locator("#ranks-series label", has_text="compute (busy)").locator("input")).to_be_checked()
    page.wait_for_function(f"() => {{ const gd = document.querySelector({json.dumps(RANK_LINES)});"
                           " return gd && gd.layout"
                           " && (gd.layout.shapes || []).some(s => s.name === 'alert-window'); }")
    [window] = [s for s in _shapes(page, RANK_LINES) if s["name"] == "alert-window"]
    assert (window["x0"], window["x1"]) == (0, 19)
    widths = page.eval_on_selector(RANK_LINES, "gd => Object.fromEntries(gd.data.map(t => [t.name, t.line.width]))")
    assert widths["rank2"] > max(width for name, width in widths.items() if name != "rank2")
    assert not errors


def test_empty_memory_and_ranks_pages_say_what_to_log_and_memory_draws_once_data_appears(
        page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    with SummaryWriter(logdir / "plain") as writer:  # a run, but no memory data and no ranks
        writer.add_scalar("loss", 1.0, 0)
    board = serve_board(logdir)
    errors = watch_console(page)
    page.goto(board.url + "/ranks")
    expect(page.locator("#empty-ranks-groups code")).to_contain_text("SummaryWriter(rank_logdir(")
    page.goto(board.url + "/memory")
    expect(page.locator("#empty-memory")).to_contain_text("MemoryTracker(writer)")
    _track(logdir / "tracked", 6, 0)  # memory data appears while the page is open
    _wait_last_x(page, TIMELINE, "peak", 5)
    expect(page.locator("#empty-memory")).to_have_count(0)
    assert not errors
