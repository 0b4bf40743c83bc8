"""The Memory and System pages in a real browser on runs with device memory (tests/board/gpu_runs.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from gpu_runs import write_gpu_runs
from test_board_browser import watch_console

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000


@pytest.fixture()
def gpu_board(page: Page, tmp_path: Path, serve_board) -> tuple[str, list[str]]:
    logdir = tmp_path / "logs"
    write_gpu_runs(logdir)
    board = serve_board(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    return board.url, watch_console(page)


def _plot(device: str) -> str:
    return f"[id='{{\"device\":\"{device}\",\"type\":\"memory-timeline\"}}'] .js-plotly-plot"


def test_memory_page_shows_host_and_device_side_by_side(page: Page, tmp_path: Path, gpu_board) -> None:
    url, errors = gpu_board
    page.goto(url + "/memory?run=gpu")
    for device in ("cpu", "cuda:0"):
        page.wait_for_function(f"() => {{ const gd = document.querySelector(`{_plot(device)}`);"
                               " return gd && gd.data && gd.data.length >= 2; }")
    host, device = page.locator(_plot("cpu")).bounding_box(), page.locator(_plot("cuda:0")).bounding_box()
    assert abs(host["y"] - device["y"]) < 2 and device["x"] > host["x"] + host["width"] / 2  # one row, host left
    names = page.eval_on_selector(_plot("cuda:0"), "gd => gd.data.map(t => t.name)")
    assert "reserved" in names and "temporary" in names and "peak" in names
    assert "reserved" not in page.eval_on_selector(_plot("cpu"), "gd => gd.data.map(t => t.name)")
    assert "device cuda:0" in page.eval_on_selector(_plot("cuda:0"), "gd => gd.layout.title.text")
    expect(page.locator("#memory-alerts")).to_contain_text("fragmentation · step 10 · cuda:0")
    expect(page.locator(".memory-fragmentation")).to_contain_text("100.0 MiB unusable of 288.0 MiB reserved")
    page.screenshot(path=str(tmp_path / "memory-gpu.png"), full_page=True)
    assert errors == []


def test_system_page_nvml_beside_engine_memory_and_the_absent_note(page: Page, tmp_path: Path, gpu_board) -> None:
    url, errors = gpu_board
    page.goto(url + "/system")
    chart = "#system-gpu-0-memory .js-plotly-plot"
    page.wait_for_function(f"() => {{ const gd = document.querySelector('{chart}'); return gd && gd.data"
                           " && gd.data.length === 5; }")
    names = page.eval_on_selector(chart, "gd => gd.data.map(t => t.name)")
    assert names == ["mem_used_bytes", "mem_total_bytes", "process_mem_bytes", "engine allocated_bytes",
                     "engine reserved_bytes"]
    assert page.eval_on_selector(chart, "gd => Array.from(gd.data[3].y)")[0] == 64 * (1 << 20)
    expect(page.locator("#system-nvml-note")).to_have_text("")
    for chart_id in ("gpu-0-utilisation", "gpu-0-power", "gpu-0-temperature"):
        expect(page.locator(f"#system-{chart_id}")).to_be_visible()
    page.locator("#system-run").click()
    page.locator(".Select-menu-outer, [role='listbox']").get_by_text("no-nvml", exact=True).click()
    expect(page.locator("#system-nvml-note")).to_contain_text("NVML is absent for this run")
    expect(page.locator("#system-nvml-note")).to_contain_text("NVML Shared Library Not Found")
    expect(page.locator("#system-gpu-0-memory")).to_have_count(0)
    page.screenshot(path=str(tmp_path / "system-no-nvml.png"), full_page=True)
    assert errors == []
