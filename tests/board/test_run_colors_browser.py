"""Run colours in a real browser: the runs of a demo-like log directory are told apart on Scalars, keep their colour on
the Runs page and across a reload; a thinned series is drawn as markers with no line across its gaps."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page

from board.pages.scalar_charts import id_key
from board_helpers import open_page_at
from instrumentation import SummaryWriter

pytestmark = pytest.mark.browser
RUNS = ["baseline", "lr-explodes", "dead-relu", "vanishing", "logits-leak", "oom", "input-bound", "ddp/rank0",
        "ddp/rank1", "nan-origin", "straggler/rank0", "straggler/rank1", "torch-cnn"]  # 11 groups: one past the palette
THINNED = [*range(32), *range(48, 161, 16), 171]


@pytest.fixture()
def demo_like_logdir(tmp_path: Path) -> Path:
    logdir = tmp_path / "logs"
    for index, run in enumerate(RUNS):
        with SummaryWriter(logdir / run) as writer:
            for step in range(200):
                writer.add_scalar("loss", index + np.exp(-step / 60), step, walltime=1.7e9 + step)
            if run == "lr-explodes":
                for step in THINNED:
                    writer.add_scalar("update/ratio", 0.5 + 0.1 * np.sin(step), step, walltime=1.7e9 + step)
    return logdir


def _graph(tag: str) -> str:
    return f"[id='{json.dumps({'tag': id_key(tag), 'type': 'scalars-graph'}, separators=(',', ':'))}'] .js-plotly-plot"


def _styles(page: Page) -> dict[str, list[str]]:
    """Run → [colour, dash] of its smoothed line (the default smoothing draws it, the raw one faint)."""
    graph = _graph("loss")
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{graph}`);"
                           f" return gd && gd.data && gd.data.length === {4 * len(RUNS)}; }}")
    pairs = page.eval_on_selector(graph, "gd => gd.data.filter((t, i) => i % 4 === 1)"
                                         ".map(t => [t.legendgroup, t.line.color, t.line.dash])")
    return {run: [color, dash] for run, color, dash in pairs}


def test_runs_shown_together_never_share_a_style_and_keep_it_on_every_page(page: Page, demo_like_logdir: Path,
                                                                         serve_board) -> None:
    board = serve_board(demo_like_logdir)
    errors = open_page_at(page, board.url + "/scalars")
    styles = _styles(page)
    assert sorted(styles) == sorted(RUNS)
    assert len({tuple(style) for style in styles.values()}) == len(RUNS)
    assert len({color for color, _ in styles.values()}) == len(RUNS) - 1  # 11 groups, 10 hues: one pair shares a hue
    shared = [run for run, (color, dash) in styles.items() if dash != "solid"]
    assert len(shared) == 1  # ... and is told apart by its dash
    page.screenshot(path="/tmp/shots/scalars_run_colors.png", full_page=True)
    page.reload()
    assert _styles(page) == styles  # a reload keeps them
    page.goto(board.url + "/")
    page.wait_for_selector("[id*='runs-row'] .fs-run-name")
    dots = page.eval_on_selector_all(".fs-table .fs-run-name", "cells => cells.map(c => [c.textContent.trim(), "
                                     "getComputedStyle(c.querySelector('span')).color])")
    rgb = {name.lstrip("● ").split(" ")[0].strip(): color for name, color in dots}
    for run, (color, _) in styles.items():
        red, green, blue = (int(color[i:i + 2], 16) for i in (1, 3, 5))
        assert rgb[run] == f"rgb({red}, {green}, {blue})", run  # the same colour on the Runs page
    assert errors == []


def test_a_thinned_series_shows_markers_and_no_line_across_unmeasured_steps(page: Page, demo_like_logdir: Path,
                                                                            serve_board) -> None:
    board = serve_board(demo_like_logdir)
    errors = open_page_at(page, board.url + "/scalars")
    graph = _graph("update/ratio")
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{graph}`);"
                           " return gd && gd.data && gd.data.length === 4 && gd.data[1].x.length > 0; }")
    smoothed = page.eval_on_selector(graph, "gd => ({mode: gd.data[1].mode, x: Array.from(gd.data[1].x),"
                                            " name: gd.data[1].name})")
    assert "markers" in smoothed["mode"]
    assert [x for x in smoothed["x"] if x is not None] == THINNED
    after_break = [smoothed["x"][i + 1] for i, x in enumerate(smoothed["x"]) if x is None]
    assert after_break == [48, 64, 80, 96, 112, 128, 144, 160, 171]
    assert smoothed["name"].endswith("every 16 steps from step 48, last at step 171")
    # what is drawn: one line with segments (steps 0..31), the other points are alone (a path with no segment)
    pieces = page.eval_on_selector(graph, "gd => Array.from(gd.querySelectorAll('.scatterlayer .trace')[1]"
                                          ".querySelectorAll('path.js-line'), p => p.getAttribute('d'))")
    assert sum("L" in piece for piece in pieces) == 1, pieces
    connector = page.eval_on_selector(graph, "gd => [Array.from(gd.data[3].x), gd.data[3].line.dash]")
    assert connector == [THINNED, "dot"]  # the faint dotted connector through the samples
    page.locator(graph).screenshot(path="/tmp/shots/scalars_thinned.png")
    assert errors == []
