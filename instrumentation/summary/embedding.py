"""add_embedding: the projector plugin's files beside the event files, laid out as torch writes them.

`<log_dir>/<step:05d>/<tag, with % / \\ percent-encoded>/tensors.tsv` (+ `metadata.tsv`, `sprite.png`) and
`<log_dir>/projector_config.pbtxt` listing every embedding the writer added (rewritten whole each time).
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from instrumentation.format import metadata
from instrumentation.summary import images
from instrumentation.summary.inputs import to_numpy


@dataclass(frozen=True, slots=True)
class EmbeddingEntry:
    tensor_name: str
    tensor_path: str
    metadata_path: str | None
    sprite_path: str | None
    sprite_dims: tuple[int, int] | None  # (width, height) of one image


def encode_tag(tag: str) -> str:
    """torch's folder name for a tag: `%`, `/` and `\\` percent-encoded (lower-case hex); `.`/`..` refused."""
    if tag in ("", ".", ".."):
        raise ValueError(f"add_embedding: tag {tag!r} cannot name a folder")
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def _pbtxt_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def projector_config(entries: Sequence[EmbeddingEntry]) -> str:
    """The ProjectorConfig in protobuf text format (what TensorBoard's projector plugin parses)."""
    lines = []
    for entry in entries:
        lines += ["embeddings {", f"  tensor_name: {_pbtxt_string(entry.tensor_name)}",
                  f"  tensor_path: {_pbtxt_string(entry.tensor_path)}"]
        if entry.metadata_path:
            lines.append(f"  metadata_path: {_pbtxt_string(entry.metadata_path)}")
        if entry.sprite_path and entry.sprite_dims:
            lines += ["  sprite {", f"    image_path: {_pbtxt_string(entry.sprite_path)}",
                      *(f"    single_image_dim: {size}" for size in entry.sprite_dims), "  }"]
        lines.append("}")
    return "\n".join(lines) + "\n"


def _metadata_tsv(rows: Sequence[Any], header: Sequence[Any] | None, count: int) -> str:
    if len(rows) != count:
        raise ValueError(f"add_embedding: {len(rows)} metadata rows for {count} points")
    if not header:
        return "".join(f"{row}\n" for row in rows)
    if any(len(row) != len(header) for row in rows):
        raise ValueError(f"add_embedding: metadata rows must have {len(header)} columns, as metadata_header")
    return "".join("\t".join(str(cell) for cell in row) + "\n" for row in [header, *rows])


def _sprite_png(label_img: Any, count: int) -> tuple[bytes, tuple[int, int]]:
    """The label images (N, C, H, W), values in [0, 1], on a square grid of ceil(sqrt(N)) columns."""
    array = np.asarray(to_numpy(label_img), dtype=np.float64)
    if array.ndim != 4 or array.shape[0] != count or array.shape[1] not in (1, 3):
        raise ValueError(f"add_embedding: label_img must be (N={count}, 1 or 3, H, W), got shape {array.shape}")
    grid = images.make_grid(array, columns=math.ceil(math.sqrt(count))).transpose(1, 2, 0)
    square = np.zeros((grid.shape[1], grid.shape[1], 3))
    square[:grid.shape[0]] = grid
    return images.encode_png(np.uint8((square * 255).clip(0, 255))), (array.shape[3], array.shape[2])


def write_embedding(log_dir: str, mat: Any, metadata_rows: Sequence[Any] | None, label_img: Any, step: int,
                    tag: str, header: Sequence[Any] | None) -> EmbeddingEntry:
    """Writes the embedding's files (on the calling thread, as torch does) and returns its config entry."""
    matrix = to_numpy(mat)
    if matrix.ndim != 2 or matrix.dtype.kind not in "biuf":
        raise ValueError(f"add_embedding({tag!r}): mat must be a 2-D numeric array (points x dimensions), "
                         f"got shape {matrix.shape} dtype {matrix.dtype}")
    count = matrix.shape[0]
    metadata_text = None if metadata_rows is None else _metadata_tsv(list(metadata_rows), header, count)
    sprite = None if label_img is None else _sprite_png(label_img, count)
    subdir = f"{step:05d}/{encode_tag(tag)}"
    folder = os.path.join(log_dir, subdir)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tensors.tsv"), "w", encoding="utf-8") as file:
        file.writelines("\t".join(str(value.item()) for value in row) + "\n" for row in matrix)
    if metadata_text is not None:
        with open(os.path.join(folder, "metadata.tsv"), "w", encoding="utf-8") as file:
            file.write(metadata_text)
    if sprite is not None:
        with open(os.path.join(folder, "sprite.png"), "wb") as file:
            file.write(sprite[0])
    return EmbeddingEntry(f"{tag}:{step:05d}", f"{subdir}/tensors.tsv",
                          None if metadata_text is None else f"{subdir}/metadata.tsv",
                          None if sprite is None else f"{subdir}/sprite.png", None if sprite is None else sprite[1])


def write_config(log_dir: str, entries: Sequence[EmbeddingEntry]) -> None:
    path = os.path.join(log_dir, metadata.PROJECTOR_CONFIG_FILE)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(projector_config(entries))
    os.replace(temporary, path)
