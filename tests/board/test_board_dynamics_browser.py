"""The Dynamics and Alerts pages in a real browser, on runs with planted pathologies (trained under watch())."""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

import numpy as np
from board_helpers import pick_option, write_scalars
from dynamics_fixture import write_dynamics_logdir

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000


def watch_console(page: Page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def graph_data(page: Page, graph: str, expression: str):
    return page.eval_on_selector(f"#{graph} .js-plotly-plot", f"gd => {expression}")


def test_dynamics_page_shows_ratios_norms_dead_fractions_and_selects_an_alert_step(page: Page, tmp_path: Path,
                                                                                   serve_board) -> None:
    logdir = write_dynamics_logdir(tmp_path / "logs")
    board = serve_board(logdir)
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)

    page.goto(board.url + "/dynamics?run=lr_too_high")
    page.wait_for_function("() => { const gd = document.querySelector('#dynamics-heatmap .js-plotly-plot');"
                           " return gd && gd.data && gd.data.length === 1 && gd.data[0].y.length === 4; }")
    assert graph_data(page, "dynamics-heatmap", "Array.from(gd.data[0].y)") == ["0.bias", "0.weight", "2.bias",
                                                                               "2.weight"]
    edges = graph_data(page, "dynamics-heatmap", "Array.from(gd.data[0].x)")  # the cells' edges: one more than cells
    assert edges[0] == -0.5 and edges[-1] == 45.5  # two epochs of 23 steps
    assert graph_data(page, "dynamics-heatmap", "gd.data[0].z[0].length") == len(edges) - 1
    assert graph_data(page, "dynamics-heatmap", "gd.data[0].z[3][1]") > 0  # 2.weight's step-1 update: ratio > 1
    page.wait_for_function("() => { const gd = document.querySelector('#dynamics-ratios .js-plotly-plot');"
                           " return gd && gd.data && gd.data.filter(t => t.mode === 'lines+markers').length === 4; }")
    assert graph_data(page, "dynamics-ratios", "gd.layout.yaxis.type") == "log"
    band = graph_data(page, "dynamics-ratios", "gd.layout.shapes[0]")
    assert (band["y0"], band["y1"]) == (0.001, 0.01)
    page.wait_for_function("() => { const gd = document.querySelector('#dynamics-dead .js-plotly-plot');"
                           " return gd && gd.data && gd.data.filter(t => t.mode === 'lines+markers').length === 1; }")
    assert graph_data(page, "dynamics-dead", "gd.data.filter(t => t.mode === 'lines+markers')[0].name") == "1"
    expect(page.locator("#dynamics-heatmap .gtitle")).to_contain_text("healthy band")

    rows = page.locator("#dynamics-alerts table tbody tr")
    expect(rows.first).to_contain_text("exploding_gradient")
    first_button = page.locator("#dynamics-alerts .fs-step-button").first
    step = int(first_button.text_content().split()[-1])
    first_button.click()
    expect(page.locator("#dynamics-step-label")).to_have_text(f"selected step: {step}")
    page.wait_for_function(f"() => {{ const gd = document.querySelector('#dynamics-grad-norms .js-plotly-plot');"
                           f" return gd.layout.shapes && gd.layout.shapes.some(s => s.x0 === {step}); }}")
    page.screenshot(path=str(tmp_path / "dynamics.png"), full_page=True)

    page.goto(board.url + "/dynamics?run=dead_relu&step=9")
    expect(page.locator("#dynamics-step-label")).to_have_text("selected step: 9")
    expect(page.locator("#dynamics-alerts table tbody tr")).to_have_count(1)
    expect(page.locator("#dynamics-alerts")).to_contain_text("dead_units")
    assert errors == []


def test_alerts_page_lists_every_run_filters_by_kind_and_links_to_the_step(page: Page, tmp_path: Path,
                                                                           serve_board) -> None:
    logdir = write_dynamics_logdir(tmp_path / "logs")
    board = serve_board(logdir)
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/alerts")
    table = page.locator("#alerts-table tbody tr")
    expect(table.first).to_be_visible()
    total = table.count()
    assert total >= 4
    expect(page.locator("#alerts-table")).to_contain_text("dead_relu")
    expect(page.locator("#alerts-table")).to_contain_text("lr_too_high")
    page.screenshot(path=str(tmp_path / "alerts.png"), full_page=True)

    pick_option(page, "alerts-kind", "dead_units")
    page.locator("h2").first.click()  # close the dropdown's menu, which covers the table
    expect(table).to_have_count(2)  # one per run
    for row in range(2):
        expect(table.nth(row).locator("td").nth(2)).to_have_text("dead_units")
    table.filter(has_text="dead_relu").locator("a").click()
    expect(page.locator("#dynamics-step-label")).to_have_text("selected step: 9")
    assert page.url.endswith("/dynamics?run=dead_relu&step=9&kind=dead_units&subject=1")
    assert errors == []


def test_a_logdir_without_dynamics_tags_gets_a_message_and_no_blank_charts(page: Page, tmp_path: Path,
                                                                           serve_board) -> None:
    write_scalars(tmp_path / "logs" / "plain", "loss", np.arange(20), np.linspace(1, 0, 20))
    board = serve_board(tmp_path / "logs")
    errors = watch_console(page)
    page.set_default_timeout(60_000)
    page.goto(board.url + "/dynamics")
    expect(page.locator("#empty-dynamics-tags")).to_contain_text("handle = watch(model, SummaryWriter(")
    expect(page.locator("#dynamics-charts")).to_be_hidden()
    expect(page.locator("#dynamics-heatmap")).to_be_hidden()
    assert errors == []
