"""The Graph page in Chromium: traced graphs with passes and a fused node, coloured by a real engine profile and a
replay capture, eager vs traced; and the GraphDef of torch's add_graph (screenshots under $FLOWSCOPE_SCREENSHOTS)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from board_helpers import pick_option, watch_console
from graph_runs import chain_graph, torch_add_graph, write_mlp_graphs, write_traced_capture
from instrumentation import SummaryWriter
from instrumentation.format.graph_file import write_graph
from profile_fixtures import profiled_engine_run

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000
PROFILED_STEPS = 4


def _shot(page: Page, name: str) -> None:
    folder = os.environ.get("FLOWSCOPE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"graph_{name}.png"), full_page=True)


def _pick(page: Page, dropdown: str, option: str) -> None:
    pick_option(page, dropdown, option)


def _labels(page: Page) -> list[str]:
    return page.locator("#graph-figure .scatterlayer .textpoint text").all_text_contents()


def test_traced_run_graph_profile_passes_and_comparison(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    profiled_engine_run(logdir / "mlp", steps=PROFILED_STEPS)  # a real eager capture by the engine's profiler
    write_mlp_graphs(logdir / "mlp")
    write_traced_capture(logdir / "mlp", steps=2)
    (logdir / "mlp" / "plugins" / "graph" / "train_step.1.optimised.json").write_text('{"version": 1, "nod')
    board = serve_board(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    errors = watch_console(page)
    page.goto(board.url + "/graph")
    expect(page.locator("#nav-graph")).to_have_text("Graph")
    summary = page.locator("#graph-summary")
    expect(summary).to_contain_text("train_step (x: float32[32,64] cpu; y: int64[32] cpu) · optimised")
    expect(summary).to_contain_text("18 op records joined by node id, 0 not joined, 2 steps")
    expect(page.locator("#graph-figure .scatterlayer .textpoint text", has_text="Fused[Linear+ReLU]")).to_have_count(1)
    expect(page.locator("#graph-figure .colorbar .cbtitle")).to_have_text("ms/step")
    rows = page.locator("#graph-passes-table tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_text(re.compile(r"dead_code\s*11 → 10\s*n5 \(Mul\)\s*—"))
    expect(rows.nth(1)).to_contain_text("n1 (Linear), n2 (ReLU) → f1")
    expect(page.locator("#graph-fused-table tbody tr")).to_have_text(re.compile(r"f1\s*Linear \+ ReLU\s*0"))
    _shot(page, "optimised_time")

    page.locator("#graph-color").get_by_text("memory").click()
    expect(page.locator("#graph-figure .colorbar .cbtitle")).to_have_text("bytes/step")

    _pick(page, "graph-name", "train_step.1.optimised")  # a truncated file: named, nothing else breaks
    expect(page.locator("#graph-problems")).to_contain_text(
        "graph train_step.1.optimised of run mlp is not shown: ")
    expect(page.locator("#graph-problems")).to_contain_text("train_step.1.optimised.json: not a complete JSON document")
    expect(page.locator("#graph-figure .annotation-text")).to_have_text("no graph")
    _shot(page, "truncated")

    _pick(page, "graph-name", "train_step.0.unoptimised")
    expect(page.locator("#graph-problems")).to_be_hidden()
    expect(summary).to_contain_text("· unoptimised")
    expect(summary).to_contain_text(f"{8 * PROFILED_STEPS} op records joined by op name and module, 0 not joined")
    assert "Mul" in _labels(page)  # the dead op, ringed as changed by a pass
    expect(page.locator("#graph-figure .legendtext", has_text="changed by a pass")).to_have_count(1)
    _shot(page, "unoptimised_memory")

    page.locator("#graph-collapse-all").click()
    expect(page.locator("#graph-figure .scatterlayer .textpoint text", has_text="0 · forward (3)")).to_have_count(1)
    assert "Linear" not in _labels(page)
    _shot(page, "collapsed")
    group = page.locator("#graph-figure .scatterlayer .trace .points path").nth(0)
    expect(group).to_be_visible()
    label = page.locator("#graph-figure .scatterlayer .textpoint text", has_text="1 · backward (1)")
    box = label.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] + 8)  # the marker below its label
    expect(page.locator("#graph-expanded")).to_contain_text("1 · backward")
    expect(page.locator("#graph-figure .scatterlayer .textpoint text", has_text="ReLUBackward")).to_have_count(1)

    compare = page.locator("#graph-compare")
    expect(page.locator("#graph-compare-note")).to_contain_text("ms of ops per step")
    keys = compare.locator("td[data-dash-column='key']")
    expect(keys).to_have_count(4)
    assert sorted(keys.all_inner_texts()) == ["(model)", "0", "1", "2"]
    page.locator("#graph-compare-by").get_by_text("op", exact=True).click()
    expect(compare.locator("td[data-dash-column='key']", has_text="Fused[Linear+ReLU]")).to_have_count(1)
    _shot(page, "comparison")
    assert errors == [], "\n".join(errors)


def test_torch_add_graph_logdir(page: Page, tmp_path: Path, serve_board) -> None:
    pytest.importorskip("torch")
    logdir = tmp_path / "logs"
    torch_add_graph(logdir / "torch")
    board = serve_board(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    errors = watch_console(page)
    page.goto(board.url + "/graph")
    expect(page.locator("#graph-summary")).to_contain_text("TensorBoard GraphDef (add_graph) · 3 ops")
    expect(page.locator("#graph-summary")).to_contain_text("run metadata: step1")
    expect(page.locator("#graph-figure .scatterlayer .textpoint text", has_text="aten::relu")).to_have_count(1)
    expect(page.locator("#graph-figure .scatterlayer .textpoint text", has_text="aten::linear")).to_have_count(2)
    expect(page.locator("#graph-passes")).to_contain_text("No optimised graph")
    _shot(page, "torch_graphdef")
    page.goto(board.url + "/")
    expect(page.locator("table.fs-table .fs-run-name")).to_have_count(1)
    expect(page.locator("#runs-plugins-not-shown")).to_have_count(0)  # the graph is shown now
    assert errors == [], "\n".join(errors)


def test_a_thousand_node_graph_opens_collapsed(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    with SummaryWriter(logdir / "big") as writer:
        writer.add_scalar("loss", 1.0, 0)
    write_graph(logdir / "big", chain_graph(50, 20))
    board = serve_board(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    errors = watch_console(page)
    page.goto(board.url + "/graph")
    expect(page.locator("#graph-summary")).to_contain_text("1000 ops")
    points = page.locator("#graph-figure .scatterlayer .trace .points path")
    expect(points).to_have_count(51)  # the input and 50 collapsed modules
    _shot(page, "thousand_collapsed")
    page.locator("#graph-expand-all").click()
    expect(points).to_have_count(1001)
    _shot(page, "thousand_expanded")
    assert errors == [], "\n".join(errors)
