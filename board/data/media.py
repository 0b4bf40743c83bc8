"""Text, images and PR curves of a run as frozen value objects, whichever TensorBoard-family writer stored them."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from board.data.plugin_data import Stored
from board.data.store import LogdirStore, UnknownSeries
from instrumentation.format import metadata
from instrumentation.format.values import PluginValue, TextValue

_IMAGE_SIGNATURES = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF87a": "image/gif",
                     b"GIF89a": "image/gif"}


def display_tag(tag: str) -> str:
    """A text tag as the user wrote it (torch and tensorboardX append `/text_summary`)."""
    return tag.removesuffix(metadata.TEXT_TAG_SUFFIX)


def resolve_tag(tags: dict[str, list[Stored]], tag: str) -> list[Stored] | None:
    """The values of `tag` as stored, or of `tag` + `/text_summary` (torch's name for it)."""
    found = tags.get(tag)
    return found if found is not None else tags.get(tag + metadata.TEXT_TAG_SUFFIX)


def tag_names(store: LogdirStore, plugin: str) -> dict[str, list[str]]:
    """Run → its tags of one plugin (text tags without torch's suffix), for every run that has any."""
    names = {}
    for summary in store.runs():
        tags = store.plugin_values(summary.name, plugin)
        if tags:
            names[summary.name] = sorted({display_tag(tag) if plugin == metadata.TEXT_PLUGIN else tag for tag in tags})
    return names


def _values(store: LogdirStore, run: str, plugin: str, tag: str) -> list[Stored]:
    found = resolve_tag(store.plugin_values(run, plugin), tag)
    if found is None:
        raise UnknownSeries(f"run {run!r} has no {plugin} tag {tag!r}")
    return found


# ---- text ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TextPoint:
    step: int
    wall_time: float
    text: str  # markdown, rendered without raw HTML


def text_points(store: LogdirStore, run: str, tag: str) -> list[TextPoint]:
    points = []
    for value in _values(store, run, metadata.TEXT_PLUGIN, tag):
        if value.__class__ is TextValue:
            points.append(TextPoint(value.step, value.wall_time, value.text))
        elif value.tensor is not None and value.tensor.dtype == object:  # a text tensor of another shape
            points.append(TextPoint(value.step, value.wall_time,
                                    "\n".join(bytes(item).decode("utf-8", "replace") for item in value.tensor.flat)))
    return points


# ---- images -------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ImagePoint:
    step: int
    wall_time: float
    index: int  # which image of the step (TF2 writes several per value)
    width: int
    height: int
    mime_type: str | None  # None: the bytes are not an image format a browser shows safely
    encoded: bytes


def _dimension(raw: bytes) -> int:
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


def image_points(store: LogdirStore, run: str, tag: str) -> list[ImagePoint]:
    """Every image of the tag: the images plugin's tensor is [width, height, encoded image, ...]."""
    points = []
    for value in _values(store, run, metadata.IMAGES_PLUGIN, tag):
        tensor = value.tensor if value.__class__ is PluginValue else None
        if tensor is None or tensor.dtype != object or tensor.ndim != 1 or tensor.size < 3:
            continue
        width, height = _dimension(tensor[0]), _dimension(tensor[1])
        for index, encoded in enumerate(tensor[2:]):
            encoded = bytes(encoded)
            mime = next((kind for signature, kind in _IMAGE_SIGNATURES.items() if encoded.startswith(signature)), None)
            points.append(ImagePoint(value.step, value.wall_time, index, width, height, mime, encoded))
    return points


# ---- PR curves ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PrCurvePoint:
    step: int
    wall_time: float
    thresholds: np.ndarray  # i / (n - 1)
    rows: dict[str, np.ndarray]  # metadata.PR_CURVE_ROWS → values per threshold


def pr_curve_points(store: LogdirStore, run: str, tag: str) -> list[PrCurvePoint]:
    """Curves stored as the pr_curves plugin's (6, n) tensor; values of any other shape are skipped."""
    points = []
    for value in _values(store, run, metadata.PR_CURVES_PLUGIN, tag):
        tensor = value.tensor if value.__class__ is PluginValue else None
        if tensor is None or tensor.dtype.kind not in "iuf" or tensor.ndim != 2 or \
                tensor.shape[0] != len(metadata.PR_CURVE_ROWS) or tensor.shape[1] < 2:
            continue
        data = tensor.astype(np.float64)
        count = data.shape[1]
        points.append(PrCurvePoint(value.step, value.wall_time, np.arange(count) / (count - 1),
                                   dict(zip(metadata.PR_CURVE_ROWS, data))))
    return points
