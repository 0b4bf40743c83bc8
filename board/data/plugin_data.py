"""One run's summary values of every plugin other than scalars and histograms, kept as read (nothing dropped silently).

Text, images, PR curves, hparams records, graphs and any plugin this board does not draw are held per plugin and
tag, in file order, up to a byte budget per run (past it, values are counted as dropped and the run says so).
They are saved in the run's cache entry as JSON (bytes base64-encoded; never pickled).
"""
from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import numpy as np

from instrumentation.format import metadata
from instrumentation.format.values import PluginValue, TextValue

MAX_RUN_BYTES = 256 << 20  # images and other blobs kept per run; more is counted, not kept
Stored = TextValue | PluginValue


def _size(value: Stored) -> int:
    if value.__class__ is TextValue:
        return len(value.text) + 64
    tensor = value.tensor
    blob = 0 if tensor is None else sum(len(item) for item in tensor.flat) if tensor.dtype == object else tensor.nbytes
    return len(value.content) + blob + 64


def plugin_of(value: Stored) -> str:
    return metadata.TEXT_PLUGIN if value.__class__ is TextValue else value.plugin_name


class PluginData:
    """plugin name → tag → values (file order). Not thread-safe: the run's lock guards it like its scalars."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, list[Stored]]] = {}
        self.bytes = 0
        self.dropped = 0

    def __len__(self) -> int:
        return sum(len(values) for tags in self.values.values() for values in tags.values())

    def add(self, value: Stored) -> None:
        size = _size(value)
        if self.bytes + size > MAX_RUN_BYTES:
            self.dropped += 1
            return
        self.bytes += size
        self.values.setdefault(plugin_of(value), {}).setdefault(value.tag, []).append(value)

    def extend(self, values: Iterable[Stored]) -> None:
        for value in values:
            self.add(value)

    def clear(self) -> None:
        self.values.clear()
        self.bytes = self.dropped = 0

    def tags(self, plugin: str) -> dict[str, list[Stored]]:
        return self.values.get(plugin, {})

    # ---- cache form ---------------------------------------------------------------------------------------
    def to_json(self) -> list[dict[str, Any]]:
        return [_encode(value) for tags in self.values.values() for values in tags.values() for value in values]

    @classmethod
    def from_json(cls, items: list[dict[str, Any]]) -> PluginData:
        """Raises ValueError/KeyError/TypeError on a damaged entry (the cache entry is then not used)."""
        data = cls()
        data.extend(_decode(item) for item in items)
        return data


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode(value: Stored) -> dict[str, Any]:
    head = {"tag": value.tag, "step": value.step, "wall_time": value.wall_time}
    if value.__class__ is TextValue:
        return {**head, "text": value.text}
    item = {**head, "plugin": value.plugin_name, "content": _b64(value.content)}
    tensor = value.tensor
    if tensor is not None:
        if tensor.dtype == object:
            item["strings"], item["shape"] = [_b64(bytes(entry)) for entry in tensor.flat], list(tensor.shape)
        else:
            item["array"], item["dtype"], item["shape"] = _b64(tensor.tobytes()), tensor.dtype.str, list(tensor.shape)
    return item


def _decode(item: dict[str, Any]) -> Stored:
    tag, step, wall_time = str(item["tag"]), int(item["step"]), float(item["wall_time"])
    if "text" in item:
        return TextValue(tag, step, wall_time, str(item["text"]))
    tensor = None
    if "strings" in item:
        tensor = np.empty(len(item["strings"]), dtype=object)
        tensor[:] = [base64.b64decode(entry) for entry in item["strings"]]
        tensor = tensor.reshape(item["shape"])
    elif "array" in item:
        dtype = np.dtype(item["dtype"])
        if dtype.kind not in "biuf":
            raise ValueError(f"cached tensor of dtype {dtype}")
        tensor = np.frombuffer(base64.b64decode(item["array"]), dtype=dtype).reshape(item["shape"])
    return PluginValue(tag, step, wall_time, str(item["plugin"]), base64.b64decode(item["content"]), tensor)
