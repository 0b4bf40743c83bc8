"""The Runs page, which draws no chart, loads plotly.js once it is idle, so that the first page with charts finds
it compiled; pages with charts load it once, themselves."""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from board_helpers import watch_console
from instrumentation import SummaryWriter

pytestmark = pytest.mark.browser
TIMEOUT_MS = 30_000
PLOTLY_LOADS = "performance.getEntriesByType('resource').filter(e => e.name.includes('plotly.min.js')).length"


def logdir_with_a_run(tmp_path: Path) -> Path:
    with SummaryWriter(tmp_path / "logs" / "run") as writer:
        for step in range(5):
            writer.add_scalar("loss", 1.0 / (step + 1), step)
    return tmp_path / "logs"


def test_the_runs_page_loads_plotly_when_idle_and_chart_pages_load_it_once(page: Page, tmp_path: Path,
                                                                           serve_board) -> None:
    board = serve_board(logdir_with_a_run(tmp_path))
    page.set_default_timeout(TIMEOUT_MS)
    errors = watch_console(page)
    page.goto(board.url + "/")
    expect(page.locator("body")).to_contain_text("run")
    page.wait_for_function("() => typeof window.Plotly === 'object' && !!window.Plotly.newPlot")
    assert page.evaluate(PLOTLY_LOADS) == 1
    page.goto(board.url + "/scalars")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .scatterlayer path').length > 0")
    assert page.evaluate(PLOTLY_LOADS) == 1  # the chart page's own load, not a second one from the warm-up
    assert errors == []
