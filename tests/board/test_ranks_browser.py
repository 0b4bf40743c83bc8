"""The Ranks page in a real browser: a 4-rank group with a planted straggler (its lines, skew, breakdown and the alert
naming the rank), the link from the Runs page, and what it says when ranks or tags are missing."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from board_helpers import watch_console, write_scalars
from ranks_fixture import rank_tags, write_rank, write_straggler_group

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000


def plot(page: Page, graph: str, expression: str):
    return page.eval_on_selector(f"#{graph} .js-plotly-plot", f"gd => {expression}")


def wait_for_traces(page: Page, graph: str, count: int) -> None:
    page.wait_for_function(f"() => {{ const gd = document.querySelector('#{graph} .js-plotly-plot');"
                           f" return gd && gd.data && gd.data.length === {count}; }}")


def zoom(page: Page, graph: str, relayout: str, done: str, attempts: int = 5) -> None:
    """Zoom `graph` as a user would and wait for `done`; again if a relayout event of the chart's first sizing took
    the zoom's place (Dash sees only the latest relayoutData)."""
    for _ in range(attempts):
        page.eval_on_selector(f"#{graph} .js-plotly-plot", f"gd => Plotly.relayout(gd, {relayout})")
        try:
            page.wait_for_function(f"() => {done}", timeout=10_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"zooming {graph} never led to {done}")


def test_ranks_page_shows_each_ranks_line_the_skew_and_the_straggler_alert(page: Page, tmp_path: Path,
                                                                           serve_board) -> None:
    logdir = tmp_path / "logs"
    times = write_straggler_group(logdir, "ddp", ranks=4, steps=40, slow_rank=2)
    write_rank(logdir / "nocomm" / "rank0", rank_tags(np.array([10.0, 11.0])))
    write_rank(logdir / "nocomm" / "rank1", rank_tags(np.array([12.0, 11.0])))
    write_scalars(logdir / "solo", "loss", np.arange(3), np.ones(3))
    board = serve_board(logdir)
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)

    page.goto(board.url + "/")  # the Runs page links each group with ranks, and their rank alerts, to its view
    expect(page.locator(".runs-alert-row[data-run='ddp/rank2'] .fs-alert-link")).to_have_attribute(
        "href", "/ranks?group=ddp&rank=2&window=0-19")  # the straggler, its window
    page.locator("#runs-content .fs-ranks-link").first.click()
    expect(page).to_have_url(board.url + "/ranks?group=ddp")
    expect(page.locator("#nav-ranks")).to_have_text("Ranks")

    wait_for_traces(page, "ranks-step-times", 4)
    assert plot(page, "ranks-step-times", "gd.data.map(t => t.name)") == ["rank0", "rank1", "rank2", "rank3"]
    for rank in range(4):  # every point of each rank (40 steps: nothing to downsample), as written (float32)
        drawn = plot(page, "ranks-step-times", f"Array.from(gd.data[{rank}].y)")
        np.testing.assert_array_equal(drawn, times[rank].astype(np.float32).astype(float))
    wait_for_traces(page, "ranks-skew", 1)
    matrix = np.stack([times[rank].astype(np.float32).astype(float) for rank in range(4)])
    expected = (matrix.max(axis=0) - matrix.min(axis=0)) / np.median(matrix, axis=0)
    np.testing.assert_allclose(plot(page, "ranks-skew", "Array.from(gd.data[0].y)"), expected, rtol=1e-12)
    assert set(plot(page, "ranks-skew", "gd.data[0].customdata.map(c => c[0])")) == {"rank2"}  # the slowest
    expect(page.locator("#ranks-skew .gtitle")).to_contain_text(f"median {np.median(expected):.1%} over 40 steps")
    wait_for_traces(page, "ranks-breakdown", 6)
    assert plot(page, "ranks-breakdown", "gd.data.map(t => t.name)") == ["compute", "wait", "data", "CPU wait",
                                                                        "allreduce (in flight)", "step (median)"]
    compute = plot(page, "ranks-breakdown", "Array.from(gd.data[0].y)")
    assert int(np.argmax(compute)) == 2 and compute[2] > 1.2 * max(compute[:2] + compute[3:])
    cpu_wait = plot(page, "ranks-breakdown", "Array.from(gd.data[3].y)")
    assert all(20 <= value <= 21 for value in cpu_wait)  # the fixture's CPU wait, on top of the stack
    tops = plot(page, "ranks-breakdown", "gd.data[3].base.map((b, i) => b + gd.data[3].y[i])")
    steps = plot(page, "ranks-breakdown", "Array.from(gd.data[5].y)")
    np.testing.assert_allclose(tops, steps, rtol=0.02)  # the medians of the parts stack up to about the median step
    expect(page.locator("#ranks-table thead")).to_contain_text("CPU wait")

    alert = page.locator("#ranks-alerts-table tbody tr")
    expect(alert).to_have_count(1)
    expect(alert.locator(".ranks-alert-subject")).to_have_text("rank2")
    expect(alert).to_contain_text("straggler")
    expect(alert).to_contain_text("busy_ms: 78.0")
    expect(alert).to_contain_text("others_busy_ms: 60.0")
    expect(alert).to_contain_text("window_steps: [0, 19]")
    expect(page.locator("#ranks-replica-indicator")).to_have_text(
        "✓ replicas agree at all 4 checked steps (last: step 30)")
    expect(page.locator("#ranks-replica-table tbody tr")).to_have_count(4)
    expect(page.locator("#ranks-table tbody tr")).to_have_count(4)
    expect(page.locator("#ranks-notes")).to_be_empty()
    page.screenshot(path=str(tmp_path / "ranks.png"), full_page=True)

    page.get_by_label("compute (busy)").check()  # in step time the others' waiting hides the straggler; not here
    expect(page.locator("#ranks-step-times .gtitle")).to_contain_text("compute per rank")
    busy = [plot(page, "ranks-step-times", f"Array.from(gd.data[{rank}].y)") for rank in range(4)]
    assert min(busy[2]) > 1.2 * max(max(busy[rank]) for rank in (0, 1, 3))
    page.get_by_label("cpu wait").check()
    expect(page.locator("#ranks-step-times .gtitle")).to_contain_text("CPU wait per rank (ms)")
    page.wait_for_function("() => { const gd = document.querySelector('#ranks-step-times .js-plotly-plot');"
                           " return gd.data.length === 4 && gd.data.every(t => Math.max(...t.y) <= 21); }")
    page.get_by_label("step time").check()
    expect(page.locator("#ranks-step-times .gtitle")).to_have_text("step time per rank (ms)")

    for rank in range(4):  # training goes on: a new step on every rank reaches the open page
        write_rank(logdir / "ddp" / f"rank{rank}", rank_tags(np.array([100.0 + 10 * rank]), first_step=40))
    page.wait_for_function("() => document.querySelector('#ranks-skew .js-plotly-plot').data[0].x.length === 41")
    assert plot(page, "ranks-skew", "gd.data[0].y[40]") == pytest.approx((130 - 100) / 115)
    expect(page.locator("#ranks-summary")).to_contain_text("at 41 steps (steps 0–40)")

    page.goto(board.url + "/ranks?group=nocomm")
    expect(page.locator("#ranks-notes")).to_contain_text("this run logs no communication timings")
    expect(page.locator("#ranks-notes")).to_contain_text("this run logs no parameter checksums")
    wait_for_traces(page, "ranks-breakdown", 2)  # compute and the step mark: no wait, data or AllReduce bars
    expect(page.locator("#ranks-alerts")).to_have_text("No straggler or replica_divergence alert in this group.")
    page.screenshot(path=str(tmp_path / "ranks-nocomm.png"), full_page=True)

    page.goto(board.url + "/ranks?group=solo")
    expect(page.locator("#ranks-unknown")).to_have_text("No run group 'solo' with rank sub-runs.")
    assert errors == []


def test_ranks_page_without_any_rank_group_says_what_is_missing_until_one_appears(page: Page, tmp_path: Path,
                                                                                   serve_board) -> None:
    write_scalars(tmp_path / "logs" / "solo", "loss", np.arange(3), np.ones(3))
    board = serve_board(tmp_path / "logs")
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/ranks")
    expect(page.locator("#empty-ranks-groups")).to_contain_text("No run has rank sub-runs yet")
    expect(page.locator("#ranks-content")).to_be_hidden()
    for rank in range(2):  # a data-parallel job starts: the open page shows it
        write_rank(tmp_path / "logs" / "job" / f"rank{rank}", rank_tags(np.array([10.0, 12.0 + rank])))
    wait_for_traces(page, "ranks-step-times", 2)
    expect(page.locator("#empty-ranks-groups")).to_have_count(0)
    expect(page.locator("#ranks-summary")).to_contain_text("2 ranks · skew over 2 ranks at 2 steps")


def test_zooming_either_step_chart_fetches_that_window_for_both(page: Page, tmp_path: Path, serve_board) -> None:
    write_straggler_group(tmp_path / "logs", "ddp", ranks=2, steps=40, slow_rank=1)
    board = serve_board(tmp_path / "logs")
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/ranks?group=ddp")
    wait_for_traces(page, "ranks-step-times", 2)
    zoom(page, "ranks-step-times", "{'xaxis.range[0]': 10, 'xaxis.range[1]': 20}",
         "document.querySelector('#ranks-skew .js-plotly-plot').data[0].x.length === 13")
    # the window's points and one neighbour on each side, on both charts; the skew chart follows the zoom
    assert plot(page, "ranks-skew", "Array.from(gd.data[0].x)") == list(range(9, 22))
    assert plot(page, "ranks-skew", "gd.layout.xaxis.range") == [10, 20]
    page.wait_for_function("() => document.querySelector('#ranks-step-times .js-plotly-plot').data[0].x.length === 13")
    for rank in range(2):  # a refresh of the page (a new step reaches it) keeps the zoom
        write_rank(tmp_path / "logs" / "ddp" / f"rank{rank}", rank_tags(np.array([100.0]), first_step=40))
    expect(page.locator("#ranks-summary")).to_contain_text("at 41 steps")
    assert plot(page, "ranks-step-times", "gd.layout.xaxis.range") == [10, 20]
    assert plot(page, "ranks-skew", "gd.data[0].x.length") == 13
    zoom(page, "ranks-skew", "{'xaxis.autorange': true}",
         "document.querySelector('#ranks-step-times .js-plotly-plot').data[0].x.length === 41")
