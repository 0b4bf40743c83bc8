"""The Scalars page in a real browser: order, pinned row, sorted hover, exact constants, unit axes, quiet filtering."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from board.pages.scalar_charts import id_key
from board_helpers import watch_console
from instrumentation import SummaryWriter

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000
RUNS = {"alpha": 1.0, "beta": 3.0, "gamma": 2.0}  # loss offsets: at any step beta > gamma > alpha
DEAD = 0.0625


@pytest.fixture()
def scalars_logdir(tmp_path: Path) -> Path:
    logdir = tmp_path / "logs"
    rng = np.random.default_rng(1)
    for run, offset in RUNS.items():
        with SummaryWriter(logdir / run) as writer:
            for step in range(675):
                writer.add_scalar("train/loss", offset + 0.5 * np.exp(-step / 200), step, walltime=1.7e9 + step)
                writer.add_scalar("val/acc", 0.5 + step / 2000, step, walltime=1.7e9 + step)
                writer.add_scalar("act/features.1/dead_fraction", DEAD, step, walltime=1.7e9 + step)
                writer.add_scalar("mem/host/allocated_bytes", 228_000 + 4096 * rng.standard_normal(), step,
                                  walltime=1.7e9 + step)
                writer.add_scalar("perf/step_time_ms", 12 + rng.random(), step, walltime=1.7e9 + step)
    return logdir


def graph(tag: str) -> str:
    return f"[id='{json.dumps({'tag': id_key(tag), 'type': 'scalars-graph'}, separators=(',', ':'))}'] .js-plotly-plot"


def wait_drawn(page: Page, tag: str, traces: int = 12) -> None:
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{graph(tag)}`);"
                           f" return gd && gd.data && gd.data.length === {traces} && gd.data[1].y.length > 0; }}")


def tick_labels(page: Page, tag: str) -> list[str]:
    return [t.text_content() for t in page.locator(graph(tag) + " .ytick text").all()]


def open_page(page: Page, board) -> list[str]:
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/scalars")
    wait_drawn(page, "train/loss")
    return errors


def test_users_tags_lead_and_instrumentation_groups_start_collapsed(page: Page, scalars_logdir: Path,
                                                                     serve_board) -> None:
    errors = open_page(page, serve_board(scalars_logdir))
    groups = page.eval_on_selector_all("details.fs-section[data-group]",
                                       "els => els.map(e => [e.dataset.group, e.open])")
    assert groups == [["train", True], ["val", True], ["act", False], ["perf", False], ["mem", False]]
    assert page.locator(graph("act/features.1/dead_fraction")).count() == 0  # not drawn until opened
    top = page.eval_on_selector(graph("train/loss"), "gd => gd.getBoundingClientRect().top")
    assert top < 400
    expect(page.locator("#scalars-smoothing-value")).to_have_text("0.60")
    page.screenshot(path=str(scalars_logdir.parent / "scalars_order.png"), full_page=True)
    assert errors == []


def test_constant_series_is_drawn_flat_at_its_value(page: Page, scalars_logdir: Path, serve_board) -> None:
    errors = open_page(page, serve_board(scalars_logdir))
    page.click("details[data-group='act'] > summary")
    tag = "act/features.1/dead_fraction"
    wait_drawn(page, tag)
    smoothed = page.eval_on_selector(graph(tag), "gd => [0, 4, 8].flatMap(i => Array.from(gd.data[i + 1].y))")
    assert set(smoothed) == {DEAD}  # smoothing 0.6: TensorBoard's debiased EMA of a constant is that constant
    low, high = page.eval_on_selector(graph(tag), "gd => gd._fullLayout.yaxis.range")
    assert low < DEAD < high and (high - low) > 0.01 * DEAD  # the axis spans the value, not float noise
    labels = tick_labels(page, tag)
    assert labels and not any(re.search(r"\d{6,}", label) for label in labels), labels
    page.locator(graph(tag)).screenshot(path=str(scalars_logdir.parent / "constant.png"))
    assert errors == []


def test_hover_lists_every_run_at_the_step_sorted_by_value(page: Page, scalars_logdir: Path, serve_board) -> None:
    errors = open_page(page, serve_board(scalars_logdir))
    box = page.eval_on_selector(graph("train/loss"), """gd => {
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, r = gd.getBoundingClientRect();
        return {x: r.left + xa._offset + xa.l2p(300), y: r.top + ya._offset + ya._length / 2}; }""")
    page.mouse.move(box["x"], box["y"])
    page.wait_for_selector(graph("train/loss") + " .hoverlayer .legend")
    text = page.locator(graph("train/loss") + " .hoverlayer .legend").text_content()
    order = sorted((text.index(run), run) for run in RUNS)
    assert [run for _, run in order] == ["beta", "gamma", "alpha"], text  # largest value first
    assert "raw" in text
    page.locator(graph("train/loss")).screenshot(path=str(scalars_logdir.parent / "hover.png"))
    # the CSV and pin buttons sit clear of Plotly's toolbar, which shows on hover
    plot = page.locator(graph("train/loss")).bounding_box()
    bar = page.locator(graph("train/loss") + " .modebar").bounding_box()
    assert bar["y"] >= plot["y"]
    chart_id = json.dumps({"tag": "train/loss", "type": "scalars-chart"}, separators=(",", ":"))
    for button in page.locator(f"[id='{chart_id}'] .fs-chart-head button").all():
        b = button.bounding_box()
        assert b["y"] + b["height"] <= plot["y"] + 1, (b, plot, bar)  # above the plot, its toolbar included
    assert errors == []


def test_bytes_and_times_get_unit_axes(page: Page, scalars_logdir: Path, serve_board) -> None:
    errors = open_page(page, serve_board(scalars_logdir))
    page.click("details[data-group='mem'] > summary")
    page.click("details[data-group='perf'] > summary")
    wait_drawn(page, "mem/host/allocated_bytes")
    wait_drawn(page, "perf/step_time_ms")
    byte_labels, time_labels = tick_labels(page, "mem/host/allocated_bytes"), tick_labels(page, "perf/step_time_ms")
    assert byte_labels and all(label.endswith(" KiB") for label in byte_labels), byte_labels
    assert time_labels and all(label.endswith(" ms") for label in time_labels), time_labels
    assert errors == []


def test_pinned_row_leads_and_survives_a_reload(page: Page, scalars_logdir: Path, serve_board) -> None:
    board = serve_board(scalars_logdir)
    errors = open_page(page, board)
    pin = json.dumps({"pinned": False, "tag": "val/acc", "type": "scalars-pin"}, separators=(",", ":"))
    page.click(f"[id='{pin}']")
    expect(page.locator("#scalars-pinned-row " + graph("val/acc"))).to_have_count(1)
    wait_drawn(page, "val/acc")
    assert page.eval_on_selector_all("#scalars-sections > details", "els => els[0].id") == "scalars-pinned-row"
    assert page.locator("details[data-group='val']").count() == 0  # moved, not drawn twice
    page.reload()
    wait_drawn(page, "val/acc")
    expect(page.locator("#scalars-pinned-row " + graph("val/acc"))).to_have_count(1)
    page.screenshot(path=str(scalars_logdir.parent / "pinned.png"), full_page=True)
    unpin = json.dumps({"pinned": True, "tag": "val/acc", "type": "scalars-pin"}, separators=(",", ":"))
    page.click(f"[id='{unpin}']")
    expect(page.locator("#scalars-pinned-row")).to_have_count(0)
    expect(page.locator("details[data-group='val'] " + graph("val/acc"))).to_have_count(1)
    assert errors == []


def test_changing_the_run_filter_draws_the_matching_runs_without_console_errors(page: Page, scalars_logdir: Path,
                                                                                serve_board) -> None:
    errors = open_page(page, serve_board(scalars_logdir))
    for pattern in ("alp", "beta|gamma", "zzz", "a", ""):  # quick changes, coalescing with poll ticks
        page.fill("#scalars-run-filter", pattern)
        page.press("#scalars-run-filter", "Enter")
    page.fill("#scalars-run-filter", "^gamma$")
    page.press("#scalars-run-filter", "Enter")
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{graph('train/loss')}`);"
                           " return gd && gd.data.length === 4 && gd.data[0].name === 'gamma'; }")
    page.fill("#scalars-run-filter", "nothing-matches")
    page.press("#scalars-run-filter", "Enter")
    chart_id = json.dumps({"tag": "train/loss", "type": "scalars-chart"}, separators=(",", ":"))
    expect(page.locator(f"[id='{chart_id}']")).to_be_hidden()
    page.fill("#scalars-run-filter", "")
    page.press("#scalars-run-filter", "Enter")
    wait_drawn(page, "train/loss")
    assert errors == []


ROW_IS_DRAWN = """(() => {
    const plots = Array.from(document.querySelectorAll('#scalars-sections .js-plotly-plot')).slice(0, 2);
    return plots.length === 2 && plots.every(gd => gd.querySelector('.scatterlayer .trace path.js-line')); })"""
# Each callback request with whether the first row was on screen when it was sent (read in the same JS turn: a
# poll from the test would see the drawing late on a loaded machine).
RECORD_CALLBACKS = """(() => {
    window.__callbacks = [];
    const fetch0 = window.fetch;
    window.fetch = function(url, init) {
        if (String(url).includes('_dash-update-component') && init && init.body) {
            window.__callbacks.push([JSON.parse(init.body).output, %s()]);
        }
        return fetch0.apply(this, arguments);
    };
})();""" % ROW_IS_DRAWN
FIRST_ROW_DRAWN = "() => %s()" % ROW_IS_DRAWN


def test_the_first_row_is_drawn_before_any_chart_asks_for_its_figure(page: Page, tmp_path: Path, serve_board) -> None:
    """One callback round trip (the page itself) before the first row is on screen; the other charts ask after it."""
    tags = ["train/loss", "train/acc", "val/loss", "val/acc", "eval/score"]
    for run, offset in RUNS.items():
        with SummaryWriter(tmp_path / "logs" / run) as writer:
            for step in range(500):
                for index, tag in enumerate(tags):
                    writer.add_scalar(tag, offset + index + np.sin(step / 50), step, walltime=1.7e9 + step)
    board = serve_board(tmp_path / "logs", "--reload-interval", "60")  # the page polls every 5 s: no tick early on
    errors = watch_console(page)
    page.set_default_timeout(TIMEOUT_MS)
    page.add_init_script(RECORD_CALLBACKS)
    page.goto(board.url + "/scalars")
    page.wait_for_function(FIRST_ROW_DRAWN, polling="raf")
    first_row = page.eval_on_selector_all("#scalars-sections .js-plotly-plot",
                                          "els => els.slice(0, 2).map(gd => gd.layout.title.text)")
    assert first_row == ["eval/score", "train/acc"]  # groups by name, then tags by name
    for tag in tags:
        wait_drawn(page, tag)
    calls = page.evaluate("() => window.__callbacks")
    before = [output for output, row_drawn in calls if not row_drawn]
    # NOTE: no count of `before`: on a loaded machine a poll tick may come before the first row is drawn; what
    # matters is that the first row came with the page and no chart asked for its figure before it was on screen.
    assert any("_pages_content" in output for output in before), before
    assert not any("scalars-graph" in output for output in before), before
    after = [output for output, row_drawn in calls if row_drawn and "scalars-graph" in output]
    assert len(after) >= len(tags) - 2, calls  # each chart once when the first row is drawn (and once a poll tick)
    assert errors == []
