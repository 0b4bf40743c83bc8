"""The Profile page of a torch.profiler logdir (the DataLoader's time as data, modules from torch's nn.Module events,
the memory curve), no capture message before an action, the input_bound badge marking its step, and the Graph
page's empty state and a demo run's graph — in a real browser, on traces and runs written by the real code."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from instrumentation import SummaryWriter
from instrumentation.demo import RUNS
from instrumentation.demo.cli import train_run
from instrumentation.format.trace import read_trace
from profile_fixtures import torch_cnn_trace

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000
SHOTS = Path("/tmp/shots")


def figure(page: Page, graph_id: str) -> dict:
    """The figure Plotly drew in ``graph_id`` once it has traces (data and layout, typed arrays decoded)."""
    page.wait_for_function(f"() => {{ const gd = document.querySelector('#{graph_id} .js-plotly-plot');"
                           f" return gd && gd.data && gd.data.length > 0; }}")
    return json.loads(page.eval_on_selector(
        f"#{graph_id} .js-plotly-plot",
        "gd => JSON.stringify({data: gd.data.map(t => ({name: t.name, type: t.type, x: Array.from(t.x || []),"
        " y: Array.from(t.y || [])})), shapes: gd.layout.shapes || [], annotations: (gd.layout.annotations || [])"
        ".map(a => a.text)})"))


def poll_went_by(page: Page, output: str):
    """Waits (as a context) for one poll of the callback writing ``output``."""
    return page.expect_response(lambda response: "_dash-update-component" in response.url
                                and "profile-poll.n_intervals" in (response.request.post_data or "")
                                and output in (response.request.post_data or ""))


def screenshot(page: Page, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


def test_profile_page_of_a_torch_trace(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    path = torch_cnn_trace(logdir / "cnn", steps=3)
    with SummaryWriter(logdir / "cnn") as writer:  # the run writes scalars too: a run the Capture row can name
        writer.add_scalar("loss", 1.0, 0)
    trace = read_trace(path)
    loader_ms = sum(e["dur"] for e in trace["traceEvents"] if e.get("ph") == "X"
                    and e["name"].startswith("enumerate(DataLoader)#")) / 1e3
    memory_events = sum(1 for e in trace["traceEvents"] if e.get("name") == "[memory]")
    board = serve_board(logdir)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(TIMEOUT_MS)
    with poll_went_by(page, "profile-capture-status"):
        page.goto(board.url + "/profile")
    expect(page.locator("#profile-capture-status")).to_have_text("")  # nothing said before Capture is pressed
    expect(page.locator("#profile-request-run")).to_contain_text("cnn")  # the shown capture's run

    drawn = figure(page, "profile-breakdown")
    parts = {trace_["name"]: trace_["y"] for trace_ in drawn["data"]}
    assert sum(parts["data"]) == pytest.approx(loader_ms, rel=1e-3)  # the loader's spans, as the trace has them
    assert "waiting on other ranks" not in parts  # one process: no such part
    step_ms = [sum(values) for values in zip(*parts.values())]
    assert all(forward + data <= step + 1e-6 for forward, data, step in zip(parts["forward"], parts["data"], step_ms))

    memory = figure(page, "profile-memory")
    (curve,) = [t for t in memory["data"] if t["name"] == "allocated"]
    assert len(curve["y"]) == memory_events and max(curve["y"]) > 0  # every [memory] event, drawn
    expect(page.locator("#profile-memory-note")).to_have_text("")

    page.click("#profile-group-by label:has-text('module')")
    table = page.locator("#profile-ops")
    expect(table).to_contain_text("Sequential_0.Conv2d_0")
    expect(table).to_contain_text("Sequential_0.Linear_0")
    expect(table).to_contain_text("(outside modules)")
    expect(page.locator("#profile-ops-note")).to_contain_text("nn.Module events")
    expect(table.locator("th")).to_contain_text(["self mem B (net)", "total mem B (net)", "self allocated B (gross)"])
    screenshot(page, "profile_torch.png")
    assert errors == []


def test_input_bound_badge_opens_profile_with_its_step_marked(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    (run,) = [r for r in RUNS if r.name == "input-bound"]
    train_run(run, str(logdir), seed=0)
    board = serve_board(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/")
    page.locator(".runs-alert-row[data-run='input-bound'] .fs-alert-link").click()
    expect(page).to_have_url(re.compile(r"/profile\?run=input-bound&step=\d+&kind=input_bound"))
    step = int(page.url.split("step=")[1].split("&")[0])
    expect(page.locator("#profile-mark-note")).to_contain_text(f"input_bound alert at step {step}")
    drawn = figure(page, "profile-breakdown")
    outlined = [s for s in drawn["shapes"] if s.get("x0") == step - 0.5 and s.get("x1") == step + 0.5]
    assert outlined, drawn["shapes"]
    assert f"alert · step {step}" in drawn["annotations"]
    expect(page.locator("#profile-step")).to_contain_text(str(step))
    page.wait_for_function(f"() => {{ const gd = document.querySelector('#profile-timeline .js-plotly-plot');"
                           f" return gd && gd.layout.title && gd.layout.title.text === 'step {step} timeline'; }}")
    screenshot(page, "profile_input_bound.png")


def test_graph_page_empty_state_then_a_demo_runs_graph(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    with SummaryWriter(logdir / "plain") as writer:
        writer.add_scalar("loss", 1.0, 0)
    board = serve_board(logdir)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(board.url + "/graph")
    expect(page.locator("#graph-none")).to_be_visible()
    expect(page.locator("#graph-none")).to_contain_text("engine.function(train_step, logdir=writer.log_dir)")
    expect(page.locator("#graph-none")).to_contain_text("add_graph")
    expect(page.locator("#graph-views")).to_be_hidden()  # no controls, no blank charts
    screenshot(page, "graph_empty.png")

    (run,) = [r for r in RUNS if r.name == "hparams-media"]
    train_run(run, str(logdir), seed=0)  # trained under engine.function: the page shows it once it is read
    expect(page.locator("#graph-views")).to_be_visible()
    expect(page.locator("#graph-none")).to_be_hidden()
    expect(page.locator("#graph-run")).to_contain_text("hparams-media")
    page.wait_for_function("() => { const gd = document.querySelector('#graph-figure .js-plotly-plot');"
                           " return gd && gd.data && gd.data.length > 0; }")
    expect(page.locator("#graph-summary")).to_contain_text("train_step")
    screenshot(page, "graph_demo.png")
