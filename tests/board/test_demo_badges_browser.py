"""Every alert badge of the demo, clicked on the Runs page in a real browser, opens a page that draws the alert's
evidence with its step or window marked: the demo's own runs, trained by its own code, read back from Plotly's
figure."""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect

from board_helpers import open_page_at
from instrumentation.demo import RUNS
from instrumentation.format import alert_names as kinds
from tests.instrumentation.demo_training import train_demo_run

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000
SHOTS = Path("/tmp/shots")
DYNAMICS_GRAPH = {kinds.LOSS_SPIKE: "dynamics-loss", kinds.EXPLODING_GRADIENT: "dynamics-ratios",
                  kinds.VANISHING_GRADIENT: "dynamics-ratios", kinds.DEAD_UNITS: "dynamics-dead",
                  kinds.NONFINITE: "dynamics-loss"}
MEMORY_TIMELINE = "[id='{\"device\":\"cpu\",\"type\":\"memory-timeline\"}'] .js-plotly-plot"
MEMORY_MARK = {kinds.LEAK: "leak-step", kinds.OOM: "oom-step"}
def _train_demo(logdir: Path) -> None:
    """Every demo run, as `make demo` trains them (the straggler job retried on a loaded machine: demo_training)."""
    for run in RUNS:
        train_demo_run(run, str(logdir), seed=0)


def _shapes_when(page: Page, selector: str, condition: str) -> list[dict]:
    """The layout shapes of the Plotly figure at `selector`, once one of them satisfies the JS `condition` on `s`."""
    page.wait_for_function(f"() => {{ const gd = document.querySelector({json.dumps(selector)});"
                           f" return gd && gd.layout && (gd.layout.shapes || []).some(s => {condition}); }}")
    return page.eval_on_selector(selector, "gd => gd.layout.shapes.map(s => ({name: s.name || null, x0: s.x0,"
                                           " x1: s.x1}))")


def _check_dynamics_mark(page: Page, kind: str, step: int) -> None:
    plot = f"#{DYNAMICS_GRAPH[kind]} .js-plotly-plot"
    page.wait_for_function(f"() => {{ const gd = document.querySelector({json.dumps(plot)}); return gd && gd.data"
                           f" && gd.data.some(t => t.name === 'alert' && t.x[0] === {step}); }}")
    assert any(shape["x0"] == step for shape in _shapes_when(page, plot, f"s.x0 === {step}"))
    expect(page.locator("#dynamics-step-alert")).to_contain_text(kind)


def _check_mark(page: Page, kind: str, step: int) -> None:
    """The page the badge opened marks the alert: a ringed point and a line at its step, its step outlined, its
    window shaded."""
    query = parse_qs(urlparse(page.url).query)
    if kind in DYNAMICS_GRAPH:
        _check_dynamics_mark(page, kind, step)
    elif kind == kinds.INPUT_BOUND:
        outlined = _shapes_when(page, "#profile-breakdown .js-plotly-plot", f"s.x0 === {step} - 0.5")
        assert any(s["x0"] == step - 0.5 and s["x1"] == step + 0.5 for s in outlined)
        expect(page.locator("#profile-mark-note")).to_contain_text(f"input_bound alert at step {step}")
    elif kind in MEMORY_MARK:
        marked = int(query["step"][0])
        name = MEMORY_MARK[kind]
        shapes = _shapes_when(page, MEMORY_TIMELINE, f"s.name === '{name}'")
        assert [s["x0"] for s in shapes if s["name"] == name] == [marked]
        expect(page.locator("#memory-snapshot-title")).to_contain_text("snapshot")
    elif kind == kinds.STRAGGLER:
        first, last = (int(part) for part in query["window"][0].split("-"))
        shapes = _shapes_when(page, "#ranks-step-times .js-plotly-plot", "s.name === 'alert-window'")
        assert [(s["x0"], s["x1"]) for s in shapes if s["name"] == "alert-window"] == [(first, last)]
        assert first < last == step  # the rule reports at the end of the window it judged
    else:
        raise AssertionError(f"the demo raised {kind}, which this test does not know how to check")


def test_every_demo_badge_opens_its_evidence_with_the_step_marked(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    _train_demo(logdir)
    expected = {kind for run in RUNS for kind in run.expected_alerts}
    board = serve_board(logdir)
    errors = open_page_at(page, board.url + "/", TIMEOUT_MS)
    badges = page.locator("#runs-alerts .fs-alert-link")
    expect(badges.first).to_be_visible()
    found = [(link.get_attribute("href"), link.text_content()) for link in badges.all()]
    clicked = set()
    for index, (href, text) in enumerate(found):
        match = re.fullmatch(r"(\w+)(?: ×\d+)? · step (\d+)", text.strip())
        assert match, text
        kind, step = match.group(1), int(match.group(2))
        page.goto(board.url + "/")
        page.locator("#runs-alerts .fs-alert-link").nth(index).click()
        expect(page).to_have_url(board.url + href)
        _check_mark(page, kind, step)
        clicked.add(kind)
        if SHOTS.is_dir():
            page.screenshot(path=str(SHOTS / f"badge_{kind}.png"), full_page=True)
    assert clicked >= expected, f"no badge for {sorted(expected - clicked)}"
    assert errors == []
