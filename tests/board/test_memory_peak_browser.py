"""The Memory page on runs whose highest peak is late: the listed peak snapshot is that step's, block steps are
allocation steps, the stack column shows only when stacks were recorded, bytes are IEC (text and chart axis)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from memory_runs import write_late_peak_runs
from scalars_helpers import read_scalars
from test_board_browser import watch_console
from training_loops import SPIKE_BYTES

from instrumentation.format.units import IEC_UNITS, format_bytes

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000
TIMELINE = "[id='{\"device\":\"cpu\",\"type\":\"memory-timeline\"}'] .js-plotly-plot"


def _open_highest_peak(page: Page, url: str, run: str, step: int, peak_bytes: float) -> None:
    page.goto(f"{url}/memory?run={run}")
    highest = page.locator("#memory-snapshots li", has_text="peak (highest)")
    expect(highest).to_have_count(1)
    expect(highest).to_contain_text(f"· step {step} · cpu {format_bytes(peak_bytes)} allocated")
    highest.locator("a").click()
    expect(page).to_have_url(re.compile(r"snapshot=\d{4}_"))
    expect(page.locator("#memory-allocator")).to_contain_text(f"reason peak · step {step} · "
                                                              f"allocated {format_bytes(peak_bytes)}")


def _column(page: Page, header: str) -> list[str]:
    headers = page.locator("#memory-blocks thead th").all_inner_texts()
    index = headers.index(header) + 1
    return page.locator(f"#memory-blocks tbody tr td:nth-child({index})").all_inner_texts()


def test_the_listed_peak_is_the_late_highest_one_with_allocation_steps(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    spikes = write_late_peak_runs(logdir)
    board = serve_board(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    errors = watch_console(page)

    for run in ("late", "late-stacks"):
        logged = read_scalars(str(logdir / run))["mem/cpu/peak_bytes"]  # the oracle: the run's own step peaks
        step = max(logged, key=lambda s: (logged[s], -s))
        assert step == spikes[run] and logged[step] > SPIKE_BYTES
        _open_highest_peak(page, board.url, run, step, logged[step])
        steps = [int(text) for text in _column(page, "allocated at step")]
        sizes = _column(page, "size")
        assert steps and max(steps) <= step and sizes[0] == format_bytes(SPIKE_BYTES) and steps[0] == step
        assert all(text.split(" ")[1] in IEC_UNITS for text in sizes)
        headers = page.locator("#memory-blocks thead th").all_inner_texts()
        if run == "late":
            assert not any("stack" in h for h in headers)
            expect(page.locator("#memory-no-stacks")).to_contain_text("stacks=True")
        else:
            stacks = _column(page, "allocation stack (innermost first)")
            assert any("training_loops.py" in text for text in stacks)
            expect(page.locator("#memory-no-stacks")).to_have_count(0)
        page.wait_for_function(f"() => {{ const gd = document.querySelector(`{TIMELINE}`);"
                               " return gd && gd.layout && gd.layout.yaxis.ticktext; }")
        ticks = page.eval_on_selector(TIMELINE, "gd => Array.from(gd.layout.yaxis.ticktext)")
        assert len(ticks) >= 2 and all(t.split(" ")[1] in IEC_UNITS for t in ticks)
        assert page.eval_on_selector(TIMELINE, "gd => Math.max(...gd.layout.yaxis.tickvals)") >= logged[step]
        page.screenshot(path=str(tmp_path / f"memory-{run}.png"), full_page=True)
    assert errors == []
