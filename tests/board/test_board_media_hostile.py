"""Hostile input for the text/images/PR-curve/hparams/plugins API: bad names, forged bytes, malformed plugin data,
truncated files, huge images, a projector config that is a link out of the log directory."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from board.data import plugin_data
from board_helpers import assert_refused, client_for, version_record
from instrumentation import SummaryWriter
from instrumentation.format import frame_record, protos
from instrumentation.format.tensors import string_tensor


def _record(value, step: int = 1) -> bytes:
    event = protos.Event(wall_time=1.7e9 + step, step=step, summary=protos.Summary(value=[value]))
    return frame_record(event.SerializeToString())


def _plugin_value(tag: str, plugin: str, content: bytes = b"", tensor=None):
    plugin_data = protos.SummaryMetadata.PluginData(plugin_name=plugin, content=content)
    metadata = protos.SummaryMetadata(plugin_data=plugin_data)
    return protos.Summary.Value(tag=tag, metadata=metadata, **({"tensor": tensor} if tensor is not None else {}))


def _write(run_dir: Path, *records: bytes) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "events.out.tfevents.1700000000.host.1.0").write_bytes(version_record() + b"".join(records))


@pytest.fixture()
def hostile_logdir(tmp_path) -> Path:
    logdir = tmp_path / "logs"
    forged = protos.Summary.Image(height=2, width=2, colorspace=3,
                                  encoded_image_string=b"<html><script>alert(1)</script></html>")
    bad_dims = np.empty(3, dtype=object)
    bad_dims[:] = [b"wide", b"-5", b"\x89PNG\r\n\x1a\nnot really"]
    pr_wrong_shape = protos.TensorProto(dtype=1, float_val=[0.5, 0.5, 0.5],
                                        tensor_shape=protos.TensorShapeProto(dim=[protos.TensorShapeProto.Dim(size=3)]))
    _write(logdir / "forged",
           _record(protos.Summary.Value(tag="img", image=forged)),
           _record(_plugin_value("odd", "images", tensor=string_tensor(["wide", "-5", "x"])), 2),
           _record(_plugin_value("_hparams_/session_start_info", "hparams", content=b"\xff\xff\xff garbage")),
           _record(_plugin_value("pr", "pr_curves", tensor=pr_wrong_shape)),
           _record(_plugin_value("custom", "my_plugin", content=b"\x00\x01")))
    with SummaryWriter(logdir / "truncated") as writer:
        writer.add_text("note", "complete", 1)
        writer.add_text("note", "cut short", 2)
    event_file = next((logdir / "truncated").glob("events.out.tfevents.*"))
    data = event_file.read_bytes()
    event_file.write_bytes(data[:-7])  # the last record is cut mid-way: a writer still writing it
    with SummaryWriter(logdir / "huge") as writer:
        writer.add_image("big", np.zeros((3, 3000, 4000), np.uint8), 0)
    (logdir / "linked").mkdir()
    with SummaryWriter(logdir / "linked") as writer:
        writer.add_scalar("x", 1.0, 0)
    os.symlink("/etc/passwd", logdir / "linked" / "projector_config.pbtxt")
    return logdir


def test_bad_names_and_parameters_are_refused(hostile_logdir):
    client = client_for(hostile_logdir)
    for endpoint in ("text", "images", "pr_curves"):
        assert_refused(client, f"/api/{endpoint}?run=../../etc/passwd&tag=x", 404, "unknown run")
        assert_refused(client, f"/api/{endpoint}?run=forged&tag=../../etc/passwd", 404, "has no")
        assert_refused(client, f"/api/{endpoint}?run=forged%00&tag=x", 400, "NUL")
        assert_refused(client, f"/api/{endpoint}?run=forged", 400, "missing query parameter 'tag'")
    for step in ("abc", "1.5", "²", "9" * 40, ""):
        assert_refused(client, f"/api/image?run=huge&tag=big&step={step}", 400, "'step' must be an integer")
    assert_refused(client, "/api/image?run=huge&tag=big&step=7", 404, "no image 0 at step 7")


def test_forged_image_bytes_are_never_served(hostile_logdir):
    client = client_for(hostile_logdir)
    points = client.get("/api/images?run=forged&tag=img").get_json()["points"]
    assert points == [{"step": 1, "wall_time": 1.7e9 + 1, "index": 0, "width": 2, "height": 2, "mime_type": None,
                       "url": None}]
    response = client.get("/api/image?run=forged&tag=img&step=1&index=0")
    assert response.status_code == 415 and response.mimetype == "text/plain"
    odd = client.get("/api/images?run=forged&tag=odd").get_json()["points"]
    assert [(p["width"], p["height"], p["mime_type"]) for p in odd] == [(0, 0, None)]
    assert client.get("/images").status_code == 200


def test_malformed_plugin_data_is_reported_not_fatal(hostile_logdir):
    client = client_for(hostile_logdir)
    body = client.get("/api/hparams").get_json()
    assert body["rows"] == [] and len(body["problems"]) == 1 and body["problems"][0].startswith("forged: ")
    assert client.get("/api/pr_curves?run=forged&tag=pr").get_json()["points"] == []
    assert client.get("/hparams").status_code == 200 and client.get("/pr_curves").status_code == 200
    not_shown = client.get("/api/plugins").get_json()["not_shown"]
    assert not_shown["my_plugin"] == {"runs": 1, "tags": 1}


def test_truncated_file_keeps_what_was_complete(hostile_logdir):
    client = client_for(hostile_logdir)
    points = client.get("/api/text?run=truncated&tag=note").get_json()["points"]
    assert [point["text"] for point in points] == ["complete"]


def test_huge_image_is_served_whole(hostile_logdir):
    client = client_for(hostile_logdir)
    points = client.get("/api/images?run=huge&tag=big").get_json()["points"]
    assert [(p["width"], p["height"]) for p in points] == [(4000, 3000)]
    assert client.get(points[0]["url"]).data.startswith(b"\x89PNG")


def test_projector_config_link_out_of_the_logdir_is_not_read(hostile_logdir):
    client = client_for(hostile_logdir)
    uses = client.get("/api/plugins").get_json()["plugins"]
    projector = [use for use in uses if use["plugin"] == "projector"]
    assert projector == [{"run": "linked", "plugin": "projector", "source": "files", "tags": 0, "values": 1,
                          "shown": False}]


def test_plugin_values_over_the_budget_are_counted_and_said(tmp_path, monkeypatch):
    monkeypatch.setattr(plugin_data, "MAX_RUN_BYTES", 2000)
    with SummaryWriter(tmp_path / "logs" / "run") as writer:
        for step in range(20):
            writer.add_text("t", "x" * 200, step)
    client = client_for(tmp_path / "logs")
    kept = client.get("/api/text?run=run&tag=t").get_json()["points"]
    assert 0 < len(kept) < 20
    warnings = client.get("/api/runs").get_json()["runs"][0]["warnings"]
    assert any(f"{20 - len(kept)} image/text/plugin value(s) not kept" in line for line in warnings)
