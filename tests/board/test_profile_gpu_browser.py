"""The Profile page in a real browser on a capture with device time: real recorded CPU steps plus kernel timing
records built by hand (tests/instrumentation/profiler/test_gpu_lane.py), written by the profiler's writer."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from board_helpers import REPO

if str(REPO / "tests/instrumentation/profiler") not in sys.path:
    sys.path.insert(0, str(REPO / "tests/instrumentation/profiler"))

from instrumentation.profiler.export import build_trace, write_capture  # noqa: E402
from test_gpu_lane import _kernels, _recorded  # noqa: E402

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000


def test_profile_page_shows_gpu_busy_idle_lane_and_cuda_columns(page: Page, tmp_path: Path, serve_board) -> None:
    recorder = _recorded()
    recorder.added_kernels.extend(_kernels(recorder))
    write_capture(tmp_path / "logs" / "gpu", build_trace(recorder))
    board = serve_board(tmp_path / "logs")
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/profile")
    page.wait_for_function("() => { const gd = document.querySelector('#profile-breakdown .js-plotly-plot');"
                           " return gd && gd.data && gd.data.length === 8; }")
    names = page.eval_on_selector("#profile-breakdown .js-plotly-plot", "gd => gd.data.map(t => t.name)")
    assert names[-2:] == ["GPU busy", "GPU idle"]
    expect(page.locator("#profile-summary")).to_contain_text("kernel events")
    expect(page.locator("#profile-summary")).to_contain_text("GPU busy")
    expect(page.locator("#profile-ops")).to_contain_text("CUDA ms")
    page.wait_for_function("() => { const gd = document.querySelector('#profile-timeline .js-plotly-plot');"
                           " return gd && gd.layout && gd.layout.yaxis.categoryarray"
                           " && gd.layout.yaxis.categoryarray.includes('gpu'); }")
    lanes = page.eval_on_selector("#profile-timeline .js-plotly-plot", "gd => gd.layout.yaxis.categoryarray")
    assert lanes[0] == "gpu" and "ops" in lanes  # the kernels' lane below the host ops
    page.screenshot(path=str(tmp_path / "profile-gpu.png"), full_page=True)
    assert errors == []
