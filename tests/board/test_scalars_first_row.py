"""The Scalars page's first row comes drawn in its layout (no request of its own) and its figures are compact JSON."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pytest
from dash._utils import to_json

from board.components.scalar_figure import TRACES_PER_RUN, display_values, scalar_figure
from board.data.store import LogdirStore
from board.data.views import SmoothingCache, scalar_view
from board_helpers import answered_nothing, client_for, write_scalars
from instrumentation import SummaryWriter

STEPS = 10_000
RUNS = ("a", "b", "c", "d")


def test_float32_values_go_out_as_float32_and_read_back_exactly() -> None:
    rng = np.random.default_rng(0)
    logged = rng.normal(size=1000).astype(np.float32).astype(np.float64)  # what a simple_value holds
    sent = display_values(logged)
    assert sent.dtype == np.float32
    decimals = json.loads(orjson.dumps(sent, option=orjson.OPT_SERIALIZE_NUMPY))
    assert np.array_equal(np.array(decimals).astype(np.float32), logged)  # each decimal names its float32 exactly
    assert np.allclose(decimals, logged, rtol=2**-23, atol=0)
    precise = logged + 1e-12  # not a float32: sent as it is
    assert display_values(precise).dtype == np.float64
    assert json.loads(orjson.dumps(display_values(precise), option=orjson.OPT_SERIALIZE_NUMPY)) == precise.tolist()
    huge = np.array([1e300, 1.0])  # beyond float32's range
    assert display_values(huge).dtype == np.float64


@pytest.fixture()
def bench_like_store(tmp_path: Path) -> LogdirStore:
    """Four runs of one float32 tag with 10k steps: what bench/scalars_first_chart.py draws, one chart of it."""
    rng = np.random.default_rng(1)
    for run in RUNS:
        write_scalars(tmp_path / run, "group0/metric0", np.arange(STEPS), rng.normal(size=STEPS))
    store = LogdirStore(tmp_path)
    store.refresh()
    return store


def test_a_smoothed_chart_of_four_runs_costs_under_45_bytes_a_drawn_point(bench_like_store: LogdirStore) -> None:
    cache = SmoothingCache()
    views = [scalar_view(bench_like_store, cache, run, "group0/metric0", smoothing=0.6) for run in RUNS]
    drawn = sum(len(view.x) for view in views)
    assert 4 * 1900 <= drawn <= 4 * 2010  # downsampled for display, the envelope kept
    body = to_json(scalar_figure("group0/metric0", views, x_axis="step", log_y=False, smoothing=True))
    # each drawn point: its step twice (raw and smoothed traces), its value twice (raw, hover) and the smoothed
    # value, at float32's shortest digits; 17-digit floats made this ~69 bytes a point
    assert len(body) / drawn < 45, len(body) / drawn
    figure = json.loads(body)
    for index, view in enumerate(views):
        raw, smoothed = figure["data"][TRACES_PER_RUN * index], figure["data"][TRACES_PER_RUN * index + 1]
        assert raw["x"] == view.x.tolist()
        assert np.array_equal(np.array(raw["y"]).astype(np.float32), view.raw)  # every logged value is a float32
        assert np.array_equal(np.array(smoothed["customdata"]).astype(np.float32), view.raw)
        assert np.allclose(smoothed["y"], view.smoothed, rtol=2**-22, atol=0)  # float32 rounding, then its decimal


def _graphs(component) -> list[dict]:
    """Every scalars chart graph's props in a layout (as JSON), in page order."""
    found = []

    def walk(node) -> None:
        if isinstance(node, dict):
            props = node.get("props", {})
            if node.get("type") == "Graph" and isinstance(props.get("id"), dict):
                found.append(props)
            for value in props.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(to_json(component)))
    return found


def _state_of(layout: dict, tag: str):
    found = []

    def walk(node) -> None:
        if isinstance(node, dict):
            props = node.get("props", {})
            if props.get("id") == {"type": "scalars-state", "tag": tag}:
                found.append(props.get("data"))
            for value in props.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(layout)
    return found[0]


def _chart_request(tag: str, state) -> dict:
    """The chart callback's request, as the browser sends it when "scalars-first-drawn" turns true."""
    return {"output": "..{\"tag\":[\"MATCH\"],\"type\":\"scalars-graph\"}.figure...{\"tag\":[\"MATCH\"],\"type\":"
                      "\"scalars-state\"}.data...{\"tag\":[\"MATCH\"],\"type\":\"scalars-chart\"}.style..",
            "outputs": [{"id": {"tag": tag, "type": "scalars-graph"}, "property": "figure"},
                        {"id": {"tag": tag, "type": "scalars-state"}, "property": "data"},
                        {"id": {"tag": tag, "type": "scalars-chart"}, "property": "style"}],
            "inputs": [{"id": {"tag": tag, "type": "scalars-zoom"}, "property": "data", "value": None},
                       {"id": "scalars-smoothing", "property": "value", "value": 0.6},
                       {"id": "scalars-x-axis", "property": "value", "value": "step"},
                       {"id": "scalars-log-y", "property": "value", "value": []},
                       {"id": "scalars-run-filter", "property": "value", "value": ""},
                       {"id": "scalars-poll", "property": "n_intervals", "value": None},
                       {"id": "scalars-first-drawn", "property": "data", "value": True}],
            "state": [{"id": {"tag": tag, "type": "scalars-graph"}, "property": "id",
                       "value": {"tag": tag, "type": "scalars-graph"}},
                      {"id": {"tag": tag, "type": "scalars-state"}, "property": "data", "value": state}],
            "changedPropIds": ["scalars-first-drawn.data"]}


def test_the_layout_holds_the_first_row_drawn_and_its_callback_then_has_nothing_to_do(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    tags = ["train/loss", "train/acc", "val/loss", "val/acc", "perf/step_time_ms"]
    for run in ("r1", "r2"):
        with SummaryWriter(logdir / run) as writer:
            for step in range(300):
                for index, tag in enumerate(tags):
                    writer.add_scalar(tag, index + 1.0 / (step + 1), step, walltime=1.7e9 + step)
    client = client_for(logdir)
    client.get("/")
    from board.pages import scalars

    with client.application.test_request_context("/scalars"):
        layout = json.loads(to_json(scalars.layout()))
    graphs = _graphs(layout)
    shown = [graph["id"]["tag"] for graph in graphs]
    assert shown == ["train/acc", "train/loss", "val/acc", "val/loss"]  # perf/* is collapsed: no chart yet
    drawn = [graph["id"]["tag"] for graph in graphs if graph["figure"]["data"]]
    assert drawn == shown[:scalars.FIRST_DRAWN]
    for graph in graphs[:scalars.FIRST_DRAWN]:
        runs = [trace["name"] for trace in graph["figure"]["data"][::TRACES_PER_RUN]]
        assert runs == ["r1", "r2"] and len(graph["figure"]["data"][0]["y"]) == 300  # every point: 300 < 2000
    # once the first row is on screen every chart's callback fires: the drawn ones answer "nothing to change", the
    # others their figure
    first, other = shown[0], shown[scalars.FIRST_DRAWN]
    unchanged = client.post("/_dash-update-component", json=_chart_request(first, _state_of(layout, first)))
    assert answered_nothing(unchanged)
    drawn_now = client.post("/_dash-update-component", json=_chart_request(other, _state_of(layout, other)))
    assert drawn_now.status_code == 200
    graph_id = json.dumps({"tag": other, "type": "scalars-graph"}, separators=(",", ":"))
    figure = drawn_now.get_json()["response"][graph_id]
    assert len(figure["figure"]["data"]) == 2 * TRACES_PER_RUN


def test_chart_pages_preload_plotly_and_the_runs_page_does_not(tmp_path: Path) -> None:
    write_scalars(tmp_path / "logs" / "run", "loss", np.arange(10), np.ones(10))
    client = client_for(tmp_path / "logs")
    link = '<link rel="preload" as="script" href="/_dash-component-suites/plotly/package_data/plotly.min.js">'
    for path in ("/scalars", "/hparams"):
        page = client.get(path).get_data(as_text=True)
        assert link in page and page.index(link) < page.index("</head>")
        assert client.get("/_dash-component-suites/plotly/package_data/plotly.min.js").status_code == 200
    assert "rel=\"preload\"" not in client.get("/").get_data(as_text=True)
