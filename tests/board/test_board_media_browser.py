"""The Text, Images, HParams and PR curves pages and the Runs page's notice, in Chromium, on logs written by torch's
SummaryWriter and by ours (screenshots under $FLOWSCOPE_SCREENSHOTS when set)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from board_helpers import pick_option, watch_console
from media_runs import write_our_runs, write_torch_runs

pytestmark = pytest.mark.browser
pytest.importorskip("torch")
TIMEOUT_MS = 60_000
RUNS = ["ours_lr0.03", "ours_lr0.3", "torch_lr0.01", "torch_lr0.1"]


@pytest.fixture()
def board(tmp_path, serve_board, page: Page):
    logdir = tmp_path / "logs"
    write_torch_runs(logdir)
    write_our_runs(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    return serve_board(logdir)


def _shot(page: Page, name: str) -> None:
    folder = os.environ.get("FLOWSCOPE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def test_text_page_renders_markdown_without_html(page: Page, board) -> None:
    errors = watch_console(page)
    page.goto(board.url + "/text")
    rows = page.locator("#text-steps > tbody > tr")
    expect(page.locator("#text-steps > thead th")).to_have_text(["step", *RUNS])
    expect(rows).to_have_count(1)  # the first tag, "hostile", logged at one step
    cell = rows.first.locator("> td").nth(1)
    expect(cell.locator("strong").first).to_have_text("bold")
    expect(cell).to_contain_text("<script>window.")  # shown as the text it is
    expect(cell.locator("script, img")).to_have_count(0)  # raw HTML is shown as text, never made elements
    expect(cell.locator("a")).to_have_count(2)
    hrefs = cell.locator("a").evaluate_all("links => links.map(link => link.getAttribute('href'))")
    assert hrefs == ["javascript:void(0)"] * 2  # react-markdown's URL sanitizer replaced both
    # NOTE: the one vector that could act late is an <img src=x onerror=...> (its load must fail first): a control
    # image of ours with the same src, created after the cell was drawn, must have failed (its listener ran) before
    # the check, so a hostile one, had it been made, would have had its error too (no fixed wait)
    assert page.evaluate("""() => new Promise(resolve => {
        const control = new Image();
        control.addEventListener('error', () => resolve('failed'));
        control.addEventListener('load', () => resolve('loaded'));
        control.src = 'x';
    })""") == "failed"
    assert page.evaluate("() => window.__pwned") is None
    _shot(page, "text_hostile")
    pick_option(page, "text-tag", "notes")
    expect(rows).to_have_count(3)
    expect(rows.first.locator("> td").first).to_have_text("20")  # newest first
    expect(rows.locator("strong").first).to_have_text("lr")  # markdown rendered
    expect(rows.locator("table").first).to_be_visible()  # a markdown table inside the cell
    _shot(page, "text")
    assert errors == [], "\n".join(errors)


def test_images_page_runs_side_by_side_with_a_step_slider(page: Page, board) -> None:
    errors = watch_console(page)
    page.goto(board.url + "/images")
    cards = page.locator("#images-panel figure")
    expect(cards).to_have_count(4)
    expect(cards.locator("figcaption")).to_have_text([f"{run} · step 20 · 24×16" for run in RUNS])
    image = cards.first.locator("img")
    expect(image).to_have_attribute("src", "/api/image?run=ours_lr0.03&tag=samples&step=20&index=0")
    page.wait_for_function("() => [...document.querySelectorAll('#images-panel img')].every(i => i.naturalWidth == 24)")
    _shot(page, "images")
    page.locator("#images-step [role=slider]").press("Home")  # the first logged step
    expect(cards.locator("figcaption")).to_have_text([f"{run} · step 0 · 24×16" for run in RUNS])
    with page.context.expect_page() as opened:  # full size on click
        image.click()
    full = opened.value
    full.wait_for_load_state()
    assert full.url.endswith("/api/image?run=ours_lr0.03&tag=samples&step=0&index=0")
    assert errors == [], "\n".join(errors)


def test_hparams_page_table_sort_filter_and_figures(page: Page, board) -> None:
    errors = watch_console(page)
    page.goto(board.url + "/hparams")
    rows = page.locator("#hparams-table tbody tr:has(td)")
    expect(rows).to_have_count(4)
    expect(page.locator("#hparams-summary")).to_contain_text("4 runs with hyperparameters")
    expect(page.locator("#hparams-parallel .xtick text")).to_have_text(["lr", "nesterov", "optimizer",
                                                                        "hparam/accuracy", "hparam/loss"])
    # accuracies 0.6, 0.7, 0.8, 0.9: four of the five colour bins, one trace (a line per run) each
    expect(page.locator("#hparams-parallel .scatterlayer .trace")).to_have_count(4)
    expect(page.locator("#hparams-scatter .scatterlayer .point")).to_have_count(4)
    _shot(page, "hparams")
    accuracy = page.locator("#hparams-table th.dash-header", has_text="hparam/accuracy")
    accuracy.locator(".column-header--sort").click()  # ascending
    first_runs = page.locator("#hparams-table tbody tr:has(td) td.dash-cell.column-0")
    expect(first_runs).to_have_text(["ours_lr0.03", "ours_lr0.3", "torch_lr0.1", "torch_lr0.01"])
    lr_filter = page.locator("#hparams-table th.dash-filter.column-1 input[type=text]")
    lr_filter.fill("> 0.05")
    lr_filter.press("Enter")
    expect(first_runs).to_have_text(["ours_lr0.3", "torch_lr0.1"])
    assert errors == [], "\n".join(errors)


def test_pr_curves_page_draws_a_line_per_run(page: Page, board) -> None:
    errors = watch_console(page)
    page.goto(board.url + "/pr_curves")
    expect(page.locator("#pr-figure .scatterlayer .trace")).to_have_count(4)
    # the thresholds above every prediction (TP + FP = 0) are left out, and said so
    expect(page.locator("#pr-figure .gtitle")).to_have_text(
        re.compile(r"^pr · step 20 · \d+ threshold\(s\) with nothing predicted positive not drawn$"))
    expect(page.locator("#pr-figure .legendtext")).to_have_text([f"{run} (step 20)" for run in RUNS])
    _shot(page, "pr_curves")
    assert errors == [], "\n".join(errors)


def test_runs_page_names_the_data_it_does_not_show(page: Page, board) -> None:
    errors = watch_console(page)
    page.goto(board.url + "/")
    expect(page.locator("#runs-plugins-not-shown li")).to_have_text(["projector: 1 run, 1 tag"])  # graphs: shown
    # hparams sub-runs folded away
    expect(page.locator("table.fs-table .fs-run-name")).to_have_text([re.compile(f"{run}$") for run in RUNS])
    _shot(page, "runs")
    assert errors == [], "\n".join(errors)


def test_text_and_images_follow_a_live_run(page: Page, tmp_path, serve_board) -> None:
    import numpy as np

    from instrumentation import SummaryWriter

    run = tmp_path / "logs" / "live"
    with SummaryWriter(run) as writer:
        writer.add_text("notes", "first", 1)
        writer.add_image("pic", np.zeros((3, 4, 4), np.float32), 1)
    board = serve_board(tmp_path / "logs")
    page.set_default_timeout(TIMEOUT_MS)
    errors = watch_console(page)
    page.goto(board.url + "/text")
    rows = page.locator("#text-steps > tbody > tr")
    expect(rows).to_have_count(1)
    with SummaryWriter(run) as writer:
        writer.add_text("notes", "second", 2)
        writer.add_image("pic", np.ones((3, 4, 4), np.float32), 2)
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("second")
    page.goto(board.url + "/images")
    expect(page.locator("#images-panel figcaption")).to_have_text(["live · step 2 · 4×4"])
    assert errors == [], "\n".join(errors)
