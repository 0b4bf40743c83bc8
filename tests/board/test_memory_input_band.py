"""The Memory page's `input` band on a run whose pipeline holds an oversized prefetch(100) of 1 MiB elements: in the
timeline data, in the page's figure and in a real browser."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page

from board.components.memory_figures import timeline_figure
from board.data.memory import timeline
from board.data.store import LogdirStore
from board_helpers import REPO, watch_console

if str(REPO / "tests/instrumentation/memory") not in sys.path:
    sys.path.insert(0, str(REPO / "tests/instrumentation/memory"))

from pipeline_loops import MiB, PREFETCHED, write_prefetch_run  # noqa: E402

STEPS = 30


def test_the_timeline_has_an_input_band_holding_the_queue(tmp_path: Path) -> None:
    before, _ = write_prefetch_run(tmp_path / "prefetch", steps=STEPS)
    store = LogdirStore(tmp_path)
    store.refresh()
    line = timeline(store, "prefetch", "cpu")
    assert line.steps.tolist() == list(range(STEPS))
    held = line.bands["input"][1:] - before
    assert (held >= PREFETCHED).all() and (held < PREFETCHED + MiB).all()
    # the band is part of the stack that reaches the peak (scalars are float32 on disk: 101 MiB is exact to ~8 bytes)
    np.testing.assert_allclose(sum(line.bands.values()), line.peak, rtol=1e-7)
    [band] = [trace for trace in timeline_figure(line, "prefetch")["data"] if trace["name"] == "input"]
    assert band["stackgroup"] == "bands" and np.min(band["y"][1:]) >= PREFETCHED
    assert all("MiB" in text for text in band["customdata"][1:])


@pytest.mark.browser
def test_the_memory_page_draws_the_input_band(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    write_prefetch_run(logdir / "prefetch", steps=STEPS)
    board = serve_board(logdir)
    errors = watch_console(page)
    page.set_default_timeout(60_000)
    page.goto(board.url + "/memory?run=prefetch")
    timeline_plot = "[id='{\"device\":\"cpu\",\"type\":\"memory-timeline\"}'] .js-plotly-plot"
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{timeline_plot}`); "
                           "return gd && gd.data && gd.data.some(t => t.name === 'input'); }")
    # the data travels as typed arrays: read the band back from the drawn figure's own y values
    highest = page.eval_on_selector(timeline_plot,
                                    "gd => Math.max(...Array.from(gd.data.find(t => t.name === 'input').y))")
    assert highest >= PREFETCHED
    legend = page.eval_on_selector(timeline_plot,
                                   "gd => Array.from(gd.querySelectorAll('.legendtext')).map(e => e.textContent)")
    assert "input" in legend
    page.screenshot(path=str(tmp_path / "memory-input.png"), full_page=True)
    assert not errors
