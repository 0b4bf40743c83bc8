"""add_image / add_images / add_figure / add_pr_curve: read back by TensorBoard's own reader, compared with torch's."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image
from tensorboard.backend.event_processing import event_accumulator, plugin_event_accumulator
from tensorboard.plugins.pr_curve import plugin_data_pb2
from tensorboard.util import tensor_util

from instrumentation.summary import SummaryWriter
from instrumentation.summary.pr_curves import compute_curve

torch_tensorboard = pytest.importorskip("torch.utils.tensorboard")

GUIDANCE = {event_accumulator.IMAGES: 0, event_accumulator.TENSORS: 0, event_accumulator.SCALARS: 0}


def _accumulator(path) -> event_accumulator.EventAccumulator:
    accumulator = event_accumulator.EventAccumulator(str(path), size_guidance=GUIDANCE)
    accumulator.Reload()
    return accumulator


def _pixels(encoded: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(encoded)))


IMAGE_CASES = [
    ("add_image", (np.random.default_rng(0).random((3, 5, 7)), "CHW")),
    ("add_image", (np.random.default_rng(1).integers(0, 256, (6, 4, 3), dtype=np.uint8), "HWC")),
    ("add_image", (np.random.default_rng(2).random((6, 4)), "HW")),
    ("add_image", (np.random.default_rng(3).integers(0, 256, (1, 6, 4), dtype=np.uint8), "CHW")),
    ("add_image", (np.random.default_rng(4).random((6, 4, 4)).astype(np.float32), "HWC")),
    ("add_images", (np.random.default_rng(5).random((11, 3, 4, 5)), "NCHW")),
    ("add_images", (np.random.default_rng(6).integers(0, 256, (3, 4, 5, 1), dtype=np.uint8), "NHWC")),
]


@pytest.mark.parametrize("method, case", IMAGE_CASES)
def test_images_match_torch_pixel_for_pixel(tmp_path, method, case):
    array, dataformats = case
    with SummaryWriter(tmp_path / "ours") as writer:
        getattr(writer, method)("pic", array, 3, dataformats=dataformats)
    theirs = torch_tensorboard.SummaryWriter(str(tmp_path / "torch"))
    getattr(theirs, method)("pic", array, 3, dataformats=dataformats)
    theirs.close()
    ours_read = _accumulator(tmp_path / "ours").Images("pic")
    torch_read = _accumulator(tmp_path / "torch").Images("pic")
    assert [e.step for e in ours_read] == [3]
    ours, reference = ours_read[0], torch_read[0]
    assert (ours.width, ours.height) == (reference.width, reference.height)
    np.testing.assert_array_equal(_pixels(ours.encoded_image_string), _pixels(reference.encoded_image_string))


def test_images_are_what_the_images_plugin_serves(tmp_path):
    """TensorBoard's data_compat turns the TF1 image into the images plugin's [width, height, png] tensor."""
    with SummaryWriter(tmp_path) as writer:
        writer.add_image("pic", np.zeros((3, 2, 9), np.uint8), 1)
    accumulator = plugin_event_accumulator.EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    accumulator.Reload()
    assert accumulator.PluginTagToContent("images").keys() == {"pic"}
    strings = tensor_util.make_ndarray(accumulator.Tensors("pic")[0].tensor_proto)
    assert strings[:2].tolist() == [b"9", b"2"]
    assert _pixels(strings[2]).shape == (2, 9, 3)


@pytest.mark.parametrize("bad, message", [
    ((np.zeros((3, 4)), "CHW"), "does not match"),
    ((np.zeros((2, 4, 4)), "CHW"), "channels"),
    ((np.zeros((3, 0, 4)), "CHW"), "empty"),
    ((np.array([["a"]]), "HW"), "dtype"),
    ((np.zeros((3, 4, 4)), "CCW"), "at most once"),
])
def test_bad_images_name_the_tag(tmp_path, bad, message):
    with SummaryWriter(tmp_path) as writer, pytest.raises(ValueError, match=message) as caught:
        writer.add_image("bad/tag", bad[0], dataformats=bad[1])
    assert "bad/tag" in str(caught.value)


def test_figure_is_rendered_like_torch(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib import pyplot

    def figure():
        fig = pyplot.figure(figsize=(2, 1.5), dpi=50)
        pyplot.plot([0, 1, 2], [2, 0, 1])
        return fig

    with SummaryWriter(tmp_path / "ours") as writer:
        writer.add_figure("fig", figure(), 0)
        writer.add_figure("figs", [figure(), figure()], 0)
    theirs = torch_tensorboard.SummaryWriter(str(tmp_path / "torch"))
    theirs.add_figure("fig", figure(), 0)
    theirs.add_figure("figs", [figure(), figure()], 0)
    theirs.close()
    for tag in ("fig", "figs"):
        ours = _accumulator(tmp_path / "ours").Images(tag)[0]
        reference = _accumulator(tmp_path / "torch").Images(tag)[0]
        np.testing.assert_array_equal(_pixels(ours.encoded_image_string), _pixels(reference.encoded_image_string))
    assert _pixels(ours.encoded_image_string).shape == (75, 200, 3)
    assert pyplot.get_fignums() == []  # close=True closed them


def test_pr_curve_matches_torch_and_numpy_reference(tmp_path):
    rng = np.random.default_rng(7)
    labels, predictions = rng.integers(0, 2, 300), rng.random(300)
    weights = rng.random(300)
    with SummaryWriter(tmp_path / "ours") as writer:
        writer.add_pr_curve("pr", labels, predictions, 5, num_thresholds=11)
        writer.add_pr_curve("weighted", labels, predictions, 5, num_thresholds=500, weights=weights)
    theirs = torch_tensorboard.SummaryWriter(str(tmp_path / "torch"))
    theirs.add_pr_curve("pr", labels, predictions, 5, num_thresholds=11)
    theirs.add_pr_curve("weighted", labels, predictions, 5, num_thresholds=500, weights=weights)
    theirs.close()
    ours_acc, torch_acc = _accumulator(tmp_path / "ours"), _accumulator(tmp_path / "torch")
    for tag, thresholds in (("pr", 11), ("weighted", 127)):
        ours = tensor_util.make_ndarray(ours_acc.Tensors(tag)[0].tensor_proto)
        reference = tensor_util.make_ndarray(torch_acc.Tensors(tag)[0].tensor_proto)
        assert ours.shape == (6, thresholds)
        np.testing.assert_array_equal(ours, reference)
        content = ours_acc.SummaryMetadata(tag).plugin_data
        assert content.plugin_name == "pr_curves"
        assert plugin_data_pb2.PrCurvePluginData.FromString(content.content).num_thresholds == thresholds
    # independent check of the arithmetic: TP at threshold t counts positives predicted >= t (bucketed)
    curve = compute_curve(labels.astype(float), predictions, 11)
    for index in range(11):
        predicted = np.floor(predictions * 10) >= index
        assert curve[0, index] == np.sum(predicted & (labels == 1))
        assert curve[1, index] == np.sum(predicted & (labels == 0))


@pytest.mark.parametrize("labels, predictions, message", [
    ([0, 1], [0.5], "2 labels for 1 predictions"),
    ([0, 1], [0.5, 1.5], r"\[0, 1\]"),
    ([0, 1], [0.5, float("nan")], r"\[0, 1\]"),
    (["a"], [0.5], "dtype"),
])
def test_bad_pr_curves_name_the_tag(tmp_path, labels, predictions, message):
    with SummaryWriter(tmp_path) as writer, pytest.raises(ValueError, match=message):
        writer.add_pr_curve("pr", np.array(labels), np.array(predictions))


def test_graph_of_an_engine_model_is_read_by_tensorboard(tmp_path):
    import engine
    from engine import nn

    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    with SummaryWriter(tmp_path) as writer:
        writer.add_graph(model, engine.tensor(np.zeros((5, 4), np.float32)))
    accumulator = _accumulator(tmp_path)
    graph = accumulator.Graph()  # TensorBoard's own GraphDef class parses our bytes
    nodes = {node.name: node for node in graph.node}
    assert [(node.name, node.op, list(node.input)) for node in graph.node if node.op not in ("Parameter",)] == [
        ("input/input_0", "IO Node", []),
        ("Sequential/0/Linear_0", "Linear", ["input/input_0", "Sequential/0/weight", "Sequential/0/bias"]),
        ("Sequential/1/ReLU_0", "ReLU", ["Sequential/0/Linear_0"]),
        ("Sequential/2/Linear_0", "Linear", ["Sequential/1/ReLU_0", "Sequential/2/weight", "Sequential/2/bias"]),
        ("output/output_0", "IO Node", ["Sequential/2/Linear_0"])]
    shape = nodes["Sequential/2/Linear_0"].attr["_output_shapes"].list.shape[0]
    assert [dim.size for dim in shape.dim] == [5, 2]
    assert [dim.size for dim in nodes["Sequential/0/weight"].attr["_output_shapes"].list.shape[0].dim] == [3, 4]
    with SummaryWriter(tmp_path / "other") as writer, pytest.raises(ValueError, match="input_to_model"):
        writer.add_graph(model)


def test_add_graph_leaves_no_training_step_open(tmp_path):
    import engine
    from engine import hooks, nn

    class Steps(hooks.Recorder):
        def __init__(self):
            self.begun = []

        def step_begin(self, event):
            self.begun.append(event.step)

        def op(self, *args):  # ops observed: the engine opens a step on the first forward op
            pass

    model = nn.Sequential(nn.Linear(2, 2))
    before = hooks.current_step()
    with SummaryWriter(tmp_path) as writer:
        writer.add_graph(model, engine.tensor(np.zeros((1, 2), np.float32)))
    steps = hooks.add_recorder(Steps())
    try:
        model(engine.tensor(np.zeros((1, 2), np.float32)))  # the first op of real training opens the step again
    finally:
        hooks.remove_recorder(steps)
        hooks.cancel_step_begin()
    assert hooks.current_step() == before and steps.begun == [before]


def test_embedding_files_match_torch(tmp_path):
    import torch
    from google.protobuf import text_format
    from tensorboard.plugins.projector import projector_config_pb2

    rng = np.random.default_rng(3)
    mat = rng.standard_normal((6, 3)).astype(np.float32)
    labels = rng.random((6, 1, 4, 5)).astype(np.float32)
    meta = [["a", 1], ["b", 2], ["c", 3], ["d", 4], ["e", 5], ["f", 6]]
    with SummaryWriter(tmp_path / "ours") as writer:
        writer.add_embedding(mat, metadata=[row[0] for row in meta], tag="plain")
        writer.add_embedding(mat, metadata=meta, label_img=labels, global_step=7, tag="with/slash 100%",
                             metadata_header=["name", "index"])
    theirs = torch_tensorboard.SummaryWriter(str(tmp_path / "torch"))
    theirs.add_embedding(torch.from_numpy(mat), metadata=[row[0] for row in meta], tag="plain")
    theirs.add_embedding(torch.from_numpy(mat), metadata=meta, label_img=torch.from_numpy(labels), global_step=7,
                         tag="with/slash 100%", metadata_header=["name", "index"])
    theirs.close()

    def config(root):
        return text_format.Parse((root / "projector_config.pbtxt").read_text(), projector_config_pb2.ProjectorConfig())

    assert config(tmp_path / "ours") == config(tmp_path / "torch")
    for entry in config(tmp_path / "ours").embeddings:
        for relative in (entry.tensor_path, entry.metadata_path):
            assert (tmp_path / "ours" / relative).read_text() == (tmp_path / "torch" / relative).read_text()
        if entry.sprite.image_path:
            ours, reference = (_pixels((tmp_path / root / entry.sprite.image_path).read_bytes())
                               for root in ("ours", "torch"))
            np.testing.assert_array_equal(ours, reference)
    with SummaryWriter(tmp_path / "bad") as writer, pytest.raises(ValueError, match="2 metadata rows for 6 points"):
        writer.add_embedding(mat, metadata=["x", "y"])
    with SummaryWriter(tmp_path / "bad") as writer, pytest.raises(ValueError, match="cannot name a folder"):
        writer.add_embedding(mat, tag="..")
    assert not (tmp_path / "00000").exists()
