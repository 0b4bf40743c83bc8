"""Dynamics and Histograms in a real browser: each alert kind's link marks its step on the chart of its evidence;
points and histograms written while the page is open are drawn; a thinned series shows its gaps."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from alert_runs import write_alert_runs
from board.components.dynamics_alerts_table import alert_link
from board.data.alerts import RunAlert
from board_helpers import open_page_at, watch_console
from instrumentation import SummaryWriter

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000
EVIDENCE_GRAPH = {"loss_spike": "dynamics-loss", "exploding_gradient": "dynamics-ratios",
                  "vanishing_gradient": "dynamics-ratios", "dead_units": "dynamics-dead", "nonfinite": "dynamics-loss"}


def _plot(graph_id: str) -> str:
    return f"#{graph_id} .js-plotly-plot"


def _figure(page: Page, graph_id: str) -> dict:
    return page.eval_on_selector(_plot(graph_id), "gd => ({data: gd.data.map(t => ({name: t.name,"
                                                  " x: Array.from(t.x), y: Array.from(t.y || []), z: t.z})),"
                                                  " shapes: gd.layout.shapes || []})")


def test_each_dynamics_alert_kinds_link_marks_its_step_on_its_evidence(page: Page, tmp_path: Path, serve_board):
    logdir = tmp_path / "logs"
    found = write_alert_runs(logdir)
    assert set(found) == set(EVIDENCE_GRAPH)
    board = serve_board(logdir)
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)
    for kind, (run, alert) in found.items():
        page.goto(board.url + alert_link(RunAlert(run, alert)))
        graph, step = EVIDENCE_GRAPH[kind], alert.step
        page.wait_for_function(f"() => {{ const gd = document.querySelector('{_plot(graph)}'); return gd && gd.data"
                               f" && gd.data.some(t => t.name === 'alert' && t.x[0] === {step}); }}")
        figure = _figure(page, graph)
        marker = next(trace for trace in figure["data"] if trace["name"] == "alert")
        assert marker["x"] == [step]
        assert any(shape.get("x0") == step for shape in figure["shapes"]), kind  # the step's dotted line too
        if kind in ("exploding_gradient", "vanishing_gradient", "dead_units"):  # ringed on the subject's own series
            series = next(trace for trace in figure["data"] if trace["name"] == alert.subject)
            measured = dict(zip(series["x"], series["y"]))
            assert marker["y"] == [pytest.approx(measured[step])], kind
        expect(page.locator("#dynamics-step-label")).to_have_text(f"selected step: {step}")
        expect(page.locator("#dynamics-step-alert")).to_contain_text(kind)
        if kind == "nonfinite":
            box = page.locator("#dynamics-evidence")
            expect(box).to_contain_text(f"op {alert.evidence['op']} in module {alert.evidence['module']}")
            expect(box).to_contain_text(f"step {step}")
    assert errors == []


def test_dynamics_draws_points_written_while_open_and_leaves_unmeasured_steps_blank(page: Page, tmp_path: Path,
                                                                                   serve_board):
    logdir = tmp_path / "logs"
    first = [*range(32), 40, 48]  # measured: every step, then every 8 steps

    def write(steps: list[int]) -> None:
        with SummaryWriter(logdir / "run") as writer:
            for step in steps:
                writer.add_scalar("update_ratio/w", 3e-3 * (1 + step % 3), step)
                writer.add_scalar("grad_norm/w", 1.0 + step / 100, step)

    write(first)
    board = serve_board(logdir)
    errors = open_page_at(page, board.url + "/dynamics?run=run", TIMEOUT_MS)
    page.wait_for_function(f"() => {{ const gd = document.querySelector('{_plot('dynamics-ratios')}');"
                           " return gd && gd.data && gd.data.length > 0; }")
    expect(page.locator("#dynamics-sampling")).to_contain_text(
        "every step from step 0 to 31, then steps 40, 48 (34 steps)")
    ratios = _figure(page, "dynamics-ratios")
    solid = next(trace for trace in ratios["data"] if trace["name"] == "w")
    assert solid["x"][31:34] == [31, None, 40] and solid["x"][-3:] == [40, None, 48]  # no segment across 32-39
    faint = next(trace for trace in ratios["data"] if trace["name"].startswith("w (not measured"))
    assert faint["x"] == first
    heatmap = _figure(page, "dynamics-heatmap")["data"][0]
    edges, cells = heatmap["x"], heatmap["z"][0]
    blank = [(edges[i], edges[i + 1]) for i, value in enumerate(cells) if value is None]
    assert blank == [(31.5, 39.5), (40.5, 47.5)]
    write([56, 64])  # while the page is open
    page.wait_for_function(f"() => document.querySelector('{_plot('dynamics-ratios')}').data"
                           ".some(t => t.name === 'w' && Array.from(t.x).includes(64))")
    later = next(trace for trace in _figure(page, "dynamics-ratios")["data"] if trace["name"] == "w")
    assert [x for x in later["x"] if x is not None] == [*first, 56, 64]
    expect(page.locator("#dynamics-sampling")).to_contain_text("then every 8 steps from step 40 to 64 (36 steps)")
    page.wait_for_function(f"() => Array.from(document.querySelector('{_plot('dynamics-heatmap')}').data[0].x)"
                           ".includes(64.5)")
    assert errors == []


def test_histograms_draw_a_histogram_written_while_open(page: Page, tmp_path: Path, serve_board):
    logdir = tmp_path / "logs"
    rng = np.random.default_rng(0)
    with SummaryWriter(logdir / "run") as writer:
        for step in (0, 10):
            writer.add_histogram("weight/w", rng.standard_normal(200), step)
    board = serve_board(logdir)
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/histograms")
    median = "gd => Array.from(gd.data[gd.data.length - 1].x).filter(x => x !== null)"  # thinned: split at gaps
    page.wait_for_function(f"() => {{ const gd = document.querySelector('{_plot('histograms-distribution')}');"
                           " return gd && gd.data && gd.data.length > 0; }")
    assert page.eval_on_selector(_plot("histograms-distribution"), median) == [0, 10]
    with SummaryWriter(logdir / "run") as writer:
        writer.add_histogram("weight/w", np.r_[rng.standard_normal(200), [np.nan] * 4], 20)
    page.wait_for_function(f"() => {{ const gd = document.querySelector('{_plot('histograms-distribution')}');"
                           " return Array.from(gd.data[gd.data.length - 1].x).includes(20); }")
    assert page.eval_on_selector(_plot("histograms-distribution"), median) == [0, 10, 20]
    expect(page.locator("#histograms-distribution .gtitle")).to_contain_text("4 NaN/Inf values left out (step 20)")
    # the ridgeline is another figure: its redraw may land after the distribution's
    page.wait_for_function(f"() => {{ const gd = document.querySelector('{_plot('histograms-ridgeline')}');"
                           " return gd && gd.data && gd.data.some(t => t.name === 'step 20'); }")
    ridges = page.eval_on_selector(_plot("histograms-ridgeline"), "gd => gd.data.map(t => t.name)")
    assert sorted(ridges) == ["step 0", "step 10", "step 20"]
    assert errors == []


def test_empty_pages_say_what_to_log(page: Page, tmp_path: Path, serve_board):
    logdir = tmp_path / "logs"
    with SummaryWriter(logdir / "run") as writer:
        writer.add_scalar("loss", 1.0, 0)
    board = serve_board(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    for path, note, code in (("/dynamics", "#empty-dynamics-tags", "watch(model"),
                             ("/histograms", "#histograms-none", "writer.add_histogram("),
                             ("/hparams", "#hparams-summary", "writer.add_hparams("),
                             ("/pr_curves", "#pr-none", "writer.add_pr_curve(")):
        page.goto(board.url + path)
        expect(page.locator(note)).to_contain_text(code)
        expect(page.locator(note)).to_be_visible()
    expect(page.locator("#pr-charts")).to_be_hidden()
