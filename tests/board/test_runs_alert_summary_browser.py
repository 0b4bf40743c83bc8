"""The Runs page leads with each run's alerts, on runs trained by the demo's own code: one badge per kind, linking to
the page and step that explain it; a run without alerts says so."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from instrumentation import SummaryWriter
from instrumentation.demo import RUNS
from instrumentation.demo.cli import train_run
from instrumentation.format import alert_names

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000


def demo_logdir(logdir: Path, names: tuple[str, ...]) -> Path:
    for run in RUNS:
        if run.name in names:
            train_run(run, str(logdir), seed=0)
    with SummaryWriter(logdir / "quiet") as writer:  # no alerts file at all
        writer.add_scalar("train/loss", 1.0, 0)
    return logdir


def test_runs_page_summarises_alerts_per_run_with_links_to_their_evidence(page: Page, tmp_path: Path,
                                                                          serve_board) -> None:
    logdir = demo_logdir(tmp_path / "logs", ("lr-explodes", "logits-leak", "nan-origin"))
    board = serve_board(logdir)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/")
    summary = page.locator("#runs-alerts")
    expect(summary).to_contain_text("3 of 4 runs raised alerts (2 with errors)")
    row = summary.locator(".runs-alert-row[data-run='lr-explodes'] .fs-alert-link")
    expect(row).to_have_count(2)
    expect(row.nth(0)).to_have_text("loss_spike · step 46")
    expect(row.nth(1)).to_have_text("exploding_gradient ×2 · step 47")
    assert "fs-badge-error" in row.nth(1).get_attribute("class")
    assert "update ratio" in row.nth(1).get_attribute("title")
    expect(summary.locator(".runs-alert-row[data-run='quiet']")).to_contain_text("no alerts")
    # the summary comes before the runs table
    assert page.evaluate("() => document.querySelector('#runs-alerts').compareDocumentPosition("
                         "document.querySelector('#runs-content table.fs-table')) & 4")
    page.screenshot(path=str(tmp_path / "runs-alerts.png"), full_page=True)

    row.nth(1).click()  # a training alert: the run and step on the Dynamics page
    expect(page).to_have_url(board.url + "/dynamics?run=lr-explodes&step=47&kind=exploding_gradient&subject=0.weight")
    expect(page.locator("#dynamics-step-label")).to_have_text("selected step: 47")
    expect(page.locator("#dynamics-alerts")).to_contain_text(alert_names.EXPLODING_GRADIENT)

    page.goto(board.url + "/")
    page.locator(".runs-alert-row[data-run='nan-origin'] .fs-alert-link").click()
    expect(page).to_have_url(board.url + "/dynamics?run=nan-origin&step=33&kind=nonfinite&subject=standardize")
    expect(page.locator("#dynamics-alerts")).to_contain_text("Div in module 'standardize'")

    page.goto(board.url + "/")
    leak = page.locator(".runs-alert-row[data-run='logits-leak'] .fs-alert-link")
    expect(leak).to_have_text("leak · step 39")
    leak.click()  # a memory alert: its snapshot on the Memory page
    expect(page).to_have_url(re.compile(r"/memory\?run=logits-leak&snapshot=\d{4}_\d{2}_\d{2}_"))
    expect(page.locator("#memory-alerts")).to_contain_text("runs.py")
    assert errors == []
