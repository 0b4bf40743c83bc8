"""The Memory and System pages in a real browser, on planted runs (leak, OOM, healthy, fake GPUs)."""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from memory_runs import write_memory_runs
from test_board_browser import watch_console

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000


@pytest.fixture()
def memory_board(page: Page, tmp_path: Path, serve_board) -> tuple[str, list[str]]:
    """The board serving the planted runs: (its URL, the browser console's errors so far)."""
    logdir = tmp_path / "logs"
    write_memory_runs(logdir)
    board = serve_board(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    return board.url, watch_console(page)


def plot(selector: str) -> str:
    return f"{selector} .js-plotly-plot"


def test_memory_page_leak_evidence_and_oom_report(page: Page, tmp_path: Path, memory_board) -> None:
    url, errors = memory_board

    page.goto(url + "/memory?run=leaky")
    timeline = plot("[id='{\"device\":\"cpu\",\"type\":\"memory-timeline\"}']")
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{timeline}`);"
                           " return gd && gd.data && gd.data.length >= 4; }")
    names = page.eval_on_selector(timeline, "gd => gd.data.map(t => t.name)")
    assert {"parameter", "gradient", "activation", "peak", "allocated"} <= set(names)
    stacked = page.eval_on_selector(timeline, "gd => gd.data.filter(t => t.stackgroup === 'bands').length")
    assert stacked >= 3
    expect(page.locator("#memory-alerts")).to_contain_text("leak")
    expect(page.locator("#memory-alerts")).to_contain_text("training_loops.py")
    evidence = plot("[id='{\"index\":0,\"type\":\"memory-leak-evidence\"}']")
    page.wait_for_function(f"() => {{ const gd = document.querySelector(`{evidence}`);"
                           " return gd && gd.data && gd.data.length === 2; }")
    assert "B/step" in page.eval_on_selector(evidence, "gd => gd.data[1].name")
    page.screenshot(path=str(tmp_path / "memory-leak.png"), full_page=True)

    page.goto(url + "/memory?run=oom")
    expect(page.locator("#memory-snapshots")).to_contain_text("· oom · step 0 · cpu")
    link = page.locator(".memory-oom-link")
    expect(link).to_have_count(1)
    link.click()
    expect(page).to_have_url(__import__("re").compile(r"snapshot=\d{4}_"))
    expect(page.locator("#memory-allocator")).to_contain_text("reason oom")
    expect(page.locator("#memory-allocator")).to_contain_text("largest free block")
    rows = page.locator("#memory-blocks tbody tr")
    expect(rows.first).to_be_visible()
    assert rows.count() >= 5
    expect(page.locator("#memory-blocks")).to_contain_text("parameter")
    page.wait_for_function("() => { const gd = document.querySelector('#memory-treemap .js-plotly-plot');"
                           " return gd && gd.data && gd.data[0].type === 'treemap' && gd.data[0].ids.length > 3; }")
    page.screenshot(path=str(tmp_path / "memory-oom.png"), full_page=True)

    page.goto(url + "/memory?run=oom&snapshot=2000_01_01_00_00_00")
    expect(page.locator("#memory-snapshot-error")).to_contain_text("no snapshot 2000_01_01_00_00_00")
    assert errors == []


def test_system_page_gpus_on_step_and_time_axes(page: Page, tmp_path: Path, memory_board) -> None:
    url, errors = memory_board
    page.goto(url + "/system")
    for chart in ("cpu-process-and-children", "rss-process-and-children", "gpu-0-memory", "gpu-1-utilisation",
                  "gpu-1-power", "gpu-0-temperature"):
        page.wait_for_function(f"() => {{ const gd = document.querySelector('#system-{chart} .js-plotly-plot');"
                               " return gd && gd.data && gd.data.length >= 1 && gd.data[0].x.length >= 50; }")
    memory_lines = page.eval_on_selector("#system-gpu-0-memory .js-plotly-plot", "gd => gd.data.map(t => t.name)")
    assert memory_lines == ["mem_used_bytes", "mem_total_bytes", "process_mem_bytes"]
    assert page.eval_on_selector("#system-gpu-1-utilisation .js-plotly-plot", "gd => Array.from(gd.data[0].y)")[0] == 20
    steps = page.eval_on_selector("#system-rss-process-and-children .js-plotly-plot", "gd => Array.from(gd.data[0].x)")
    assert steps[:3] == [1, 2, 3]  # ticked right after each optimizer.step(): the next step is in progress
    page.screenshot(path=str(tmp_path / "system-step.png"), full_page=True)
    page.click("text=wall")
    page.wait_for_function("() => { const gd = document.querySelector('#system-gpu-0-temperature .js-plotly-plot');"
                           " return gd && gd.layout.xaxis.type === 'date'; }")
    assert errors == []
