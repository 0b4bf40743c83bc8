"""/api/text, /api/images, /api/image, /api/pr_curves, /api/hparams, /api/plugins on logs written by torch and by us."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

from board.data.store import LogdirStore
from board_helpers import client_for
from media_runs import HOSTILE_TEXT, STEPS, write_our_runs, write_torch_runs

pytest.importorskip("torch")
RUNS = ["ours_lr0.03", "ours_lr0.3", "torch_lr0.01", "torch_lr0.1"]


@pytest.fixture(scope="module")
def media_logdir(tmp_path_factory) -> Path:
    logdir = tmp_path_factory.mktemp("media") / "logs"
    write_torch_runs(logdir)
    write_our_runs(logdir)
    return logdir


@pytest.fixture(scope="module")
def client(media_logdir):
    return client_for(media_logdir)


def test_hparams_subruns_are_folded_into_their_parent(client):
    runs = client.get("/api/runs").get_json()["runs"]
    assert [run["name"] for run in runs] == RUNS
    assert {(run["scalar_tags"], run["points"], run["files"]) for run in runs} == {(3, 5, 2)}  # + the sub-run's
    folded = client.get("/api/plugins").get_json()["folded_runs"]
    assert sorted(folded.values()) == RUNS and all(sub.startswith(parent + "/") for sub, parent in folded.items())
    tags = client.get("/api/tags?run=torch_lr0.1").get_json()["scalars"]
    assert tags == ["hparam/accuracy", "hparam/loss", "loss"]  # the sub-run's metrics, under the parent
    points = client.get("/api/scalars?run=torch_lr0.1&tag=hparam/accuracy").get_json()
    assert points["values"] == [pytest.approx(0.8)]


def test_hparams_table(client):
    body = client.get("/api/hparams").get_json()
    assert body["hparams"] == ["lr", "nesterov", "optimizer"] and body["problems"] == []
    assert body["metrics"] == ["hparam/accuracy", "hparam/loss"]
    rows = {row["run"]: row for row in body["rows"]}
    assert sorted(rows) == RUNS
    assert rows["torch_lr0.1"]["hparams"] == {"lr": 0.1, "optimizer": "adam", "nesterov": 0.0}  # torch: bool → number
    assert rows["ours_lr0.03"]["hparams"] == {"lr": 0.03, "optimizer": "sgd", "nesterov": False}
    assert rows["torch_lr0.01"]["metrics"]["hparam/accuracy"] == pytest.approx(0.9)


@pytest.mark.parametrize("tag", ["notes", "notes/text_summary"])
def test_text_by_either_name(client, tag):
    assert client.get("/api/text").get_json()["runs"] == {run: ["hostile", "notes"] for run in RUNS}
    points = client.get(f"/api/text?run=torch_lr0.1&tag={tag}").get_json()["points"]
    assert [point["step"] for point in points] == list(STEPS)
    assert points[1]["text"].startswith("step 10: **lr** 0.1")
    hostile = client.get("/api/text?run=ours_lr0.3&tag=hostile").get_json()["points"]
    assert hostile[0]["text"] == HOSTILE_TEXT  # the API returns it as logged; the page renders it without HTML


def test_images_served_with_their_pixels(client, media_logdir):
    for run in RUNS:
        points = client.get(f"/api/images?run={run}&tag=samples").get_json()["points"]
        assert [(p["step"], p["width"], p["height"], p["mime_type"]) for p in points] == \
            [(step, 24, 16, "image/png") for step in STEPS]
        response = client.get(points[1]["url"])
        assert response.status_code == 200 and response.mimetype == "image/png"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        pixels = np.asarray(Image.open(io.BytesIO(response.data)))
        assert pixels.shape == (16, 24, 3)
        assert pixels[:, 8:16].max() == 255 and pixels[:, :8].max() == 0  # step 10: the band in the second third


def test_pr_curves_equal_what_tensorboard_reads(client, media_logdir):
    for run in RUNS:
        points = client.get(f"/api/pr_curves?run={run}&tag=pr").get_json()["points"]
        accumulator = event_accumulator.EventAccumulator(str(media_logdir / run), size_guidance={"tensors": 0})
        accumulator.Reload()
        expected = [tensor_util.make_ndarray(event.tensor_proto) for event in accumulator.Tensors("pr")]
        assert [point["step"] for point in points] == list(STEPS)
        for point, reference in zip(points, expected):
            assert len(point["thresholds"]) == 21 and point["thresholds"][-1] == 1.0
            np.testing.assert_allclose(point["precision"], reference[4])
            np.testing.assert_allclose(point["true_positives"], reference[0])


def test_tensorboardx_logs_are_read_alike(tmp_path):
    tensorboardx = pytest.importorskip("tensorboardX")
    writer = tensorboardx.SummaryWriter(str(tmp_path / "logs" / "tbx"))
    writer.add_text("notes", "*hello*", 3)
    writer.add_image("pic", np.ones((3, 4, 6), np.float32), 3)
    rng = np.random.default_rng(0)
    writer.add_pr_curve("pr", rng.integers(0, 2, 50), rng.random(50), 3, num_thresholds=9)
    writer.add_hparams({"lr": 0.1}, {"hparam/acc": 0.5})
    writer.close()
    client = client_for(tmp_path / "logs")
    assert client.get("/api/text?run=tbx&tag=notes").get_json()["points"][0]["text"] == "*hello*"
    image = client.get("/api/images?run=tbx&tag=pic").get_json()["points"]
    assert [(p["step"], p["width"], p["height"], p["mime_type"]) for p in image] == [(3, 6, 4, "image/png")]
    assert len(client.get("/api/pr_curves?run=tbx&tag=pr").get_json()["points"][0]["precision"]) == 9
    rows = client.get("/api/hparams").get_json()["rows"]
    assert [(row["run"], row["hparams"]) for row in rows] == [("tbx", {"lr": 0.1})]


def test_plugins_lists_what_is_not_shown(client):
    body = client.get("/api/plugins").get_json()
    assert body["not_shown"] == {"projector": {"runs": 1, "tags": 1}}  # torch's graph: the Graph page draws it
    shown = {(use["run"], use["plugin"]) for use in body["plugins"] if use["shown"]}
    assert ("torch_lr0.1", "graphs") in shown
    for run in RUNS:
        assert {(run, plugin) for plugin in ("scalars", "text", "images", "pr_curves", "hparams")} <= shown
    projector = next(use for use in body["plugins"] if use["plugin"] == "projector")
    assert projector == {"run": "torch_lr0.1", "plugin": "projector", "source": "files", "tags": 1, "values": 1,
                         "shown": False}


def test_pages_answer(client):
    for page in ("/text", "/images", "/hparams", "/pr_curves"):
        assert client.get(page).status_code == 200


def test_plugin_values_survive_the_cache(media_logdir, tmp_path):
    first = LogdirStore(media_logdir, cache_root=tmp_path / "cache", workers=0)
    first.refresh()
    second = LogdirStore(media_logdir, cache_root=tmp_path / "cache", workers=0)
    second.refresh()
    for store in (first, second):
        images = store.plugin_values("ours_lr0.3", "images")["samples"]
        assert [value.step for value in images] == list(STEPS)
        assert images[0].tensor[2].startswith(b"\x89PNG")
    assert second.plugin_values("torch_lr0.1", "text").keys() == first.plugin_values("torch_lr0.1", "text").keys()
