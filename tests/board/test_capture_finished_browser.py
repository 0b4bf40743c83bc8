"""Capture on a finished demo run says at once that no training process is listening, and writes no request; a
request left pending for a run whose process is gone says so too. (A live run: test_profile_browser's round trip.)"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from instrumentation.demo import RUNS
from instrumentation.demo.cli import train_run
from instrumentation.format import trace as fmt

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000


def test_capture_on_a_finished_run_says_no_process_is_listening(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    (leak,) = [run for run in RUNS if run.name == "logits-leak"]
    run_dir, _ = train_run(leak, str(logdir), seed=0)
    board = serve_board(logdir)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/profile")
    status = page.locator("#profile-capture-status")
    said = ("cannot capture logits-leak: no training process is listening to this run: it has finished, or it trains "
            "without on-demand capture (watch(..., capture_requests=True) or profile(..., on_demand=True))")
    with page.expect_response(lambda response: "_dash-update-component" in response.url
                              and '"changedPropIds":["profile-poll.n_intervals"]' in (response.request.post_data or "")
                              .replace(" ", "") and "profile-capture-status" in (response.request.post_data or "")):
        pass  # a poll of the capture status went by before any click: it said nothing
    expect(status).to_have_text("")
    with page.expect_response(lambda response: "_dash-update-component" in response.url
                              and '"changedPropIds":["profile-capture-button.n_clicks"]'
                              in (response.request.post_data or "").replace(" ", "")) as clicked:
        page.click("#profile-capture-button")
    assert said in clicked.value.text()  # the click's own answer, at once
    expect(status).to_have_text(said)
    assert not os.path.exists(fmt.request_path(run_dir))
    page.screenshot(path=str(tmp_path / "capture-finished.png"), full_page=True)

    fmt.write_capture_request(run_dir, 4)  # left by an older board, say: the page does not wait for it in silence
    expect(status).to_have_text("requested 4 steps of logits-leak, but no training process is listening to this "
                                "run: it has finished, or it trains without on-demand capture (watch(..., "
                                "capture_requests=True) or profile(..., on_demand=True))")
    assert errors == []
