"""The Profile page in a real browser: breakdown, top ops, timeline, a torch trace, Capture round trip, read-only."""
from __future__ import annotations

import math
import threading
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

import engine
import instrumentation
from engine import nn
from engine.nn import functional as F
from instrumentation import SummaryWriter
from profile_fixtures import budgeted_run, profiled_engine_run, torch_profiler_trace

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000


def graph_has(page: Page, graph_id: str, condition: str) -> None:
    page.wait_for_function(f"() => {{ const gd = document.querySelector('#{graph_id} .js-plotly-plot');"
                           f" return gd && gd.data && ({condition}); }}")


def open_profile(page: Page, board) -> list[str]:
    """Open the board's Profile page; returns the list the page's JavaScript errors are appended to."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/profile")
    return errors


def test_profile_page_shows_a_capture_and_a_torch_trace(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    torch_profiler_trace(logdir / "torch_run")
    profiled_engine_run(logdir / "mlp")  # the newest capture: selected first
    errors = open_profile(page, serve_board(logdir))
    graph_has(page, "profile-breakdown", "gd.data.length === 6 && gd.data[0].x.length === 6")
    expect(page.locator("#profile-summary")).to_contain_text("flowscope trace")
    expect(page.locator("#profile-ops tbody tr").nth(1)).to_be_visible()
    expect(page.locator("#profile-ops")).to_contain_text("LinearBackward")
    graph_has(page, "profile-timeline", "gd.data.length >= 4")
    lanes = page.eval_on_selector("#profile-timeline .js-plotly-plot", "gd => gd.layout.yaxis.categoryarray")
    assert lanes == ["ops", "module 1", "spans", "step"]
    page.screenshot(path=str(tmp_path / "profile.png"), full_page=True)

    page.click("#profile-group-by label:has-text('module')")
    expect(page.locator("#profile-ops th").first).to_contain_text("module")
    expect(page.locator("#profile-ops")).to_contain_text("(model)")
    page.eval_on_selector("#profile-timeline .js-plotly-plot", "gd => Plotly.relayout(gd, {'xaxis.range': [0, 0.05]})")
    page.wait_for_function("() => document.querySelector('#profile-timeline .js-plotly-plot')"
                           ".layout.xaxis.range[1] === 0.05")

    page.click("#profile-group-by label:has-text('op')")
    page.click("#profile-capture")
    page.click("text=torch_run · worker0")
    expect(page.locator("#profile-summary")).to_contain_text("torch trace")
    expect(page.locator("#profile-ops")).to_contain_text("aten::addmm")
    graph_has(page, "profile-breakdown", "gd.data[0].x.length === 4")
    page.screenshot(path=str(tmp_path / "profile_torch.png"), full_page=True)
    with page.expect_download() as download:
        page.click("#profile-download-button")
    assert download.value.suggested_filename.endswith(".pt.trace.json")
    assert errors == []


def test_capture_button_round_trip_with_a_training_thread(page: Page, tmp_path: Path, serve_board) -> None:
    run_dir = tmp_path / "logs" / "live"
    with SummaryWriter(run_dir) as writer:
        writer.add_scalar("loss", 1.0, 0)
    stop = threading.Event()

    def training() -> None:
        engine.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
        optimizer = engine.optim.SGD(model.parameters(), lr=0.01)
        rng = np.random.default_rng(0)
        x, y = engine.tensor(rng.standard_normal((16, 8)).astype(np.float32)), engine.tensor(np.arange(16) % 2)
        with instrumentation.profile(run_dir, on_demand=True, input_bound=False):
            while not stop.is_set():
                optimizer.zero_grad()
                F.cross_entropy(model(x), y).backward()
                optimizer.step()

    thread = threading.Thread(target=training)
    thread.start()
    try:
        board = serve_board(tmp_path / "logs")
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(board.url + "/profile")
        expect(page.locator("#profile-capture-button")).to_be_enabled()
        expect(page.locator("#profile-no-capture")).to_contain_text("No profile capture")  # instead of empty charts
        expect(page.locator("#profile-breakdown")).to_be_hidden()
        page.fill("#profile-request-steps", "3")
        page.click("#profile-capture-button")
        expect(page.locator("#profile-capture-status")).to_contain_text("is ready")
        graph_has(page, "profile-breakdown", "gd.data[0].x.length === 3")
        expect(page.locator("#profile-summary")).to_contain_text("flowscope trace")
        expect(page.locator("#profile-no-capture")).to_be_hidden()
        page.screenshot(path=str(tmp_path / "profile_captured.png"), full_page=True)
    finally:
        stop.set()
        thread.join(60)


def test_read_only_board_disables_capture(page: Page, tmp_path: Path, serve_board) -> None:
    (tmp_path / "logs").mkdir()
    board = serve_board(tmp_path / "logs", "--read-only")
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/profile")
    expect(page.locator("#profile-capture-button")).to_be_disabled()
    expect(page.locator("#profile-capture-status")).to_contain_text("read-only")


def test_profile_page_shows_the_instrumentation_breakdown_of_a_budgeted_run(page: Page, tmp_path: Path,
                                                                             serve_board) -> None:
    logdir = tmp_path / "logs"
    budgeted_run(logdir / "budgeted")
    errors = open_profile(page, serve_board(logdir))
    graph_has(page, "profile-overhead", "gd.data.length === 1 && gd.data[0].y.length === 3")
    observers = page.eval_on_selector("#profile-overhead .js-plotly-plot", "gd => gd.data[0].y")
    assert sorted(observers) == ["memory", "watch", "watch_histograms"]
    shares = page.eval_on_selector("#profile-overhead .js-plotly-plot", "gd => Array.from(gd.data[0].x)")
    # NOTE: a last window's share is a timing: a stall under load can take one past 100 % (or a quiet window to 0)
    assert len(shares) == 3 and all(math.isfinite(share) and share >= 0 for share in shares) and max(shares) > 0
    labels = page.eval_on_selector("#profile-overhead .js-plotly-plot", "gd => gd.data[0].text")
    assert all(label.startswith("every ") and "ms/step" in label for label in labels)
    expect(page.locator("#profile-overhead-table")).to_contain_text("watch_histograms")
    expect(page.locator("#profile-overhead-table")).to_contain_text("% of step time")
    graph_has(page, "profile-breakdown", "gd.data.length === 6 && gd.data[0].x.length === 5")  # its capture too
    page.screenshot(path=str(tmp_path / "profile_overhead.png"), full_page=True)
    assert errors == []
