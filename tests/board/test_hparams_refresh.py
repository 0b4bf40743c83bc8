"""The HParams table is built once per change of the log directory, and the page's poll sends no rows to compare."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from dash._utils import to_json

from board.data.hparams_table import hparams_table
from board.data.store import LogdirStore
from board_helpers import answered_nothing, client_for
from instrumentation import SummaryWriter


def _write(logdir: Path, run: str, lr: float, accuracy: float) -> None:
    with SummaryWriter(logdir / run) as writer:
        writer.add_scalar("loss", 1.0, 0, walltime=1.7e9)
        writer.add_hparams({"lr": lr, "optimizer": "sgd"}, {"hparam/accuracy": accuracy}, run_name="1733130000.5")


@pytest.fixture()
def logdir(tmp_path: Path) -> Path:
    for index in range(3):
        _write(tmp_path / "logs", f"trial{index}", 0.1 * (index + 1), 0.5 + 0.1 * index)
    return tmp_path / "logs"


def test_the_table_is_built_again_only_when_the_directory_changed(logdir: Path) -> None:
    store = LogdirStore(logdir)
    store.refresh()
    table = hparams_table(store)
    assert [row.run for row in table.rows] == ["trial0", "trial1", "trial2"]
    assert [row.metrics["hparam/accuracy"] for row in table.rows] == pytest.approx([0.5, 0.6, 0.7])
    store.refresh()  # nothing new: the same table
    assert hparams_table(store) is table
    _write(logdir, "trial3", 0.4, 0.9)
    store.refresh()
    grown = hparams_table(store)
    assert grown is not table and [row.run for row in grown.rows][-1] == "trial3"
    assert grown.rows[-1].hparams == {"lr": pytest.approx(0.4), "optimizer": "sgd"}
    assert hparams_table(LogdirStore(logdir)) is not grown  # per store


def _poll_request(shown: dict) -> dict:
    """The page's poll callback request, as the browser sends it: the generation and digest, not the rows."""
    return {"output": "..hparams-table.columns...hparams-table.data...hparams-generation.data..",
            "outputs": [{"id": "hparams-table", "property": "columns"}, {"id": "hparams-table", "property": "data"},
                        {"id": "hparams-generation", "property": "data"}],
            "inputs": [{"id": "hparams-poll", "property": "n_intervals", "value": 1}],
            "state": [{"id": "hparams-generation", "property": "data", "value": shown}],
            "changedPropIds": ["hparams-poll.n_intervals"]}


def _find(node, component_id: str):
    if isinstance(node, dict):
        props = node.get("props", {})
        if props.get("id") == component_id:
            return props
        for value in props.values():
            found = _find(value, component_id)
            if found is not None:
                return found
    elif isinstance(node, list):
        for item in node:
            found = _find(item, component_id)
            if found is not None:
                return found
    return None


def test_the_poll_answers_nothing_while_the_directory_is_unchanged_and_new_rows_when_they_change(logdir: Path) -> None:
    client = client_for(logdir)
    client.get("/")
    from board.pages import hparams

    with client.application.test_request_context("/hparams"):
        layout = json.loads(to_json(hparams.layout()))
    shown = _find(layout, "hparams-generation")["data"]
    assert len(_find(layout, "hparams-table")["data"]) == 3
    quiet = client.post("/_dash-update-component", json=_poll_request(shown))
    assert answered_nothing(quiet)
    store = client.application.extensions["flowscope"].store
    store.generation += 1  # a change somewhere that leaves the table as it was: only the generation moves
    same = client.post("/_dash-update-component", json=_poll_request(shown)).get_json()["response"]
    assert list(same) == ["hparams-generation"] and same["hparams-generation"]["data"]["digest"] == shown["digest"]
    _write(logdir, "trial3", 0.4, 0.9)
    store.refresh()
    grown = client.post("/_dash-update-component", json=_poll_request(same["hparams-generation"]["data"])).get_json()
    rows = grown["response"]["hparams-table"]["data"]
    assert [row["run"] for row in rows] == ["trial0", "trial1", "trial2", "trial3"]
    assert rows[-1]["m:hparam/accuracy"] == pytest.approx(0.9)
