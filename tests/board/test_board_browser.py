"""The board in a real browser (pytest-playwright driving Debian's chromium): pages, zoom, live updates."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from board_helpers import watch_console, write_scalars
from instrumentation import SummaryWriter

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000


def graph_selector(tag: str) -> str:
    return f"[id='{json.dumps({'tag': tag, 'type': 'scalars-graph'}, separators=(',', ':'))}'] .js-plotly-plot"


def trace_x(page: Page, tag: str, trace: int = 0) -> list:
    return page.eval_on_selector(graph_selector(tag),
                                 f"gd => (gd.data && gd.data[{trace}]) ? Array.from(gd.data[{trace}].x) : []")


def test_every_page_renders_the_fixture_without_console_errors(page: Page, fixture_logdir: Path, serve_board) -> None:
    board = serve_board(fixture_logdir)
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)

    page.goto(board.url + "/")
    expect(page.locator("table.fs-table tbody tr")).to_have_count(4)  # the "ddp" group row and three runs
    expect(page.locator("table.fs-table")).to_contain_text("ddp/rank1")
    expect(page.locator("table.fs-table")).to_contain_text("3000")

    page.click("#nav-scalars")
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{graph_selector('loss/train')}`);"
                           " return gd && gd.data && gd.data.length === 12 && gd.data[0].x.length > 500; }")
    expect(page.locator(graph_selector("loss/train") + " .gtitle")).to_have_text("loss/train")
    raw_y = page.eval_on_selector(graph_selector("loss/train"), "gd => Array.from(gd.data[0].y)")
    assert max(y for y in raw_y if y is not None) == 50.0  # the spike survives display downsampling
    markers = page.eval_on_selector(graph_selector("loss/train"), "gd => Array.from(gd.data[2].text)")
    assert markers == ["nan"]  # the NaN at step 3000 is marked, not dropped
    page.screenshot(path=str(fixture_logdir.parent / "scalars.png"), full_page=True)

    page.click("#nav-histograms")
    page.wait_for_function("() => { const gd = document.querySelector('#histograms-ridgeline .js-plotly-plot');"
                           " return gd && gd.data && gd.data.length === 10; }")
    page.wait_for_function("() => { const gd = document.querySelector('#histograms-distribution .js-plotly-plot');"
                           " return gd && gd.data && gd.data.length === 6; }")  # 4 band bars, median (+ dotted)
    expect(page.locator("#histograms-distribution .gtitle")).to_contain_text("weight/fc")
    assert errors == []


def test_zoom_fetches_the_window_at_full_resolution(page: Page, tmp_path: Path, serve_board) -> None:
    steps = np.arange(60_000)
    write_scalars(tmp_path / "logs" / "long", "wave", steps, np.sin(steps / 50.0))
    board = serve_board(tmp_path / "logs")
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/scalars")
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{graph_selector('wave')}`);"
                           " return gd && gd.data && gd.data.length === 4 && gd.data[0].x.length > 0; }")
    overview = trace_x(page, "wave")
    assert 1000 < len(overview) < 2100  # downsampled for display
    page.eval_on_selector(graph_selector("wave"), "gd => Plotly.relayout(gd, {'xaxis.range': [30000, 30600]})")
    page.wait_for_function(f"() => document.querySelector(`{graph_selector('wave')}`).data[0].x[0] === 29999")
    assert trace_x(page, "wave") == list(range(29_999, 30_602))  # every point of the window
    page.eval_on_selector(graph_selector("wave"), "gd => Plotly.relayout(gd, {'xaxis.autorange': true})")
    page.wait_for_function(f"() => document.querySelector(`{graph_selector('wave')}`).data[0].x[0] === 0")
    assert 1000 < len(trace_x(page, "wave")) < 2100
    assert errors == []


def test_a_point_written_after_page_load_appears_without_reload(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    write_scalars(logdir / "run", "loss", np.arange(100), np.ones(100))
    board = serve_board(logdir)
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/scalars")
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{graph_selector('loss')}`);"
                           " return gd && gd.data && gd.data.length === 4 && gd.data[0].x.length === 100; }")
    with SummaryWriter(logdir / "run") as writer:
        writer.add_scalar("loss", 7.5, 5000)
    page.wait_for_function(f"() => document.querySelector(`{graph_selector('loss')}`).data[0].x.includes(5000)")
    assert trace_x(page, "loss")[-1] == 5000
    assert page.eval_on_selector(graph_selector("loss"), "gd => gd.data[0].y[gd.data[0].y.length - 1]") == 7.5
    assert errors == []
