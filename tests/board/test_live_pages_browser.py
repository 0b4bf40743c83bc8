"""Live pages in a real browser: points and alerts written by the real writers while a page is open are drawn."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from board.pages.scalar_charts import id_key
from board_helpers import open_page_at
from instrumentation import SummaryWriter
from instrumentation.format.alerts import Alert, AlertWriter
from instrumentation.format.tags import CPU_PERCENT, RSS_BYTES, system_tag

pytestmark = pytest.mark.browser
FIRST_STEPS = 120  # written before the page opens
LATER_STEPS = range(FIRST_STEPS, FIRST_STEPS + 40)  # written while it is open


def _loss(step: int) -> float:
    return 1.0 + 0.5 * np.sin(step / 7.0)  # varies: the y axis is Plotly's, so new points are appended, not rebuilt


def _scalars_graph(tag: str) -> str:
    return f"[id='{json.dumps({'tag': id_key(tag), 'type': 'scalars-graph'}, separators=(',', ':'))}'] .js-plotly-plot"


def _trace_points(page: Page, selector: str, index: int) -> list[list[float]]:
    return page.eval_on_selector(selector, f"gd => [Array.from(gd.data[{index}].x), Array.from(gd.data[{index}].y)]")


@pytest.mark.parametrize("smoothing", [True, False])
def test_scalars_appends_points_written_while_the_page_is_open(page: Page, tmp_path: Path, serve_board,
                                                               smoothing: bool) -> None:
    logdir = tmp_path / "logs"
    for run, offset in (("alpha", 0.0), ("beta", 2.0)):
        with SummaryWriter(logdir / run) as writer:
            for step in range(FIRST_STEPS):
                writer.add_scalar("train/loss", _loss(step) + offset, step, walltime=1.7e9 + step)
    board = serve_board(logdir)
    errors = open_page_at(page, board.url + "/scalars")
    graph = _scalars_graph("train/loss")
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{graph}`);"
                           " return gd && gd.data && gd.data.length === 8"
                           f" && gd.data[0].x.length === {FIRST_STEPS}; }}")
    if not smoothing:
        page.locator("#scalars-smoothing [role=slider]").first.press("Home")  # the handle, in either dash
        expect(page.locator("#scalars-smoothing-value")).to_have_text("0.00")
        page.wait_for_function(f"() => document.querySelector(`{graph}`).data[1].y.length === 0")
    with SummaryWriter(logdir / "alpha") as writer:  # a new event file of the open run, as a restarted writer does
        for step in LATER_STEPS:
            writer.add_scalar("train/loss", _loss(step), step, walltime=1.7e9 + step)
    last = LATER_STEPS[-1]
    page.wait_for_function(f"() => document.querySelector(`{graph}`).data[0].x.includes({last})")
    x, y = _trace_points(page, graph, 0)
    assert x == list(range(FIRST_STEPS)) + list(LATER_STEPS)  # every point once, in order: appended, not doubled
    assert y == pytest.approx([_loss(step) for step in x], rel=1e-6)  # float32 on the wire
    if smoothing:  # the smoothed line grew with the raw one
        smoothed_x, smoothed_y = _trace_points(page, graph, 1)
        assert smoothed_x == x and len(smoothed_y) == len(x)
    beta_x, _ = _trace_points(page, graph, 4)
    assert beta_x == list(range(FIRST_STEPS))  # the other run is left as it was
    assert errors == []


def test_alerts_lists_an_alert_written_while_the_page_is_open(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    with SummaryWriter(logdir / "run") as writer:
        writer.add_scalar("loss", 1.0, 0)
    alerts = AlertWriter(logdir / "run")
    alerts.write(Alert(kind="exploding_gradient", severity="warning", subject="fc.weight",
                       message="first alert: gradient norm 1e4", step=3))
    board = serve_board(logdir)
    errors = open_page_at(page, board.url + "/alerts")
    expect(page.locator("#alerts-table tbody tr")).to_have_count(1)
    alerts.write(Alert(kind="loss_spike", severity="error", subject="loss", message="second alert: loss x40", step=9))
    expect(page.locator("#alerts-table tbody tr")).to_have_count(2)
    cells = page.eval_on_selector_all("#alerts-table tbody tr", "rows => rows.map(r => Array.from(r.cells, c => "
                                      "c.textContent))")
    assert [row[1:3] + row[5:] for row in cells] == [["3", "exploding_gradient", "first alert: gradient norm 1e4"],
                                                     ["9", "loss_spike", "second alert: loss x40"]]
    assert errors == []


def test_system_fills_in_and_appends_samples_written_while_the_page_is_open(page: Page, tmp_path: Path,
                                                                          serve_board) -> None:
    logdir = tmp_path / "logs"
    cpu, rss = system_tag(CPU_PERCENT), system_tag(RSS_BYTES)
    with SummaryWriter(logdir / "run") as writer:
        writer.add_scalar("loss", 1.0, 0)  # a run, not sampling yet
    board = serve_board(logdir)
    errors = open_page_at(page, board.url + "/system")
    expect(page.locator("#empty-system")).to_be_visible()
    with SummaryWriter(logdir / "run") as writer:
        for step in range(FIRST_STEPS):
            writer.add_scalar(cpu, 50 + step % 10, step, walltime=1.7e9 + step)
            writer.add_scalar(rss, 2**30 + 4096 * step, step, walltime=1.7e9 + step)
    cpu_chart = "#system-cpu-process-and-children .js-plotly-plot"
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{cpu_chart}`);"
                           f" return gd && gd.data && gd.data[0].x.length === {FIRST_STEPS}; }}")
    expect(page.locator("#system-run")).to_contain_text("run")
    with SummaryWriter(logdir / "run") as writer:
        for step in LATER_STEPS:
            writer.add_scalar(cpu, 90.0, step, walltime=1.7e9 + step)
            writer.add_scalar(rss, 2**31, step, walltime=1.7e9 + step)
    last = LATER_STEPS[-1]
    page.wait_for_function(f"() => document.querySelector(`{cpu_chart}`).data[0].x.includes({last})")
    x, y = _trace_points(page, cpu_chart, 0)
    assert x == list(range(FIRST_STEPS)) + list(LATER_STEPS)
    assert y[FIRST_STEPS:] == [90.0] * len(LATER_STEPS)
    rss_chart = "#system-rss-process-and-children .js-plotly-plot"
    page.wait_for_function(f"() => document.querySelector(`{rss_chart}`).data[0].x.includes({last})")
    assert _trace_points(page, rss_chart, 0)[1][-1] == 2**31
    assert errors == []
