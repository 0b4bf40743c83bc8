"""Images for the writer: validation and layout on the calling thread, PNG encoding (Pillow) on the writer thread."""
from __future__ import annotations

import io
from typing import Any

import numpy as np

from instrumentation.format import protos
from instrumentation.summary.inputs import to_numpy

GRID_COLUMNS = 8  # add_images lays a batch out 8 to a row, as torch does
MAX_IMAGE_PIXELS = 1 << 26  # 64 Mi pixels: far beyond any useful summary, and still encodable


def _require_pillow() -> Any:
    try:
        from PIL import Image
    except ImportError as error:
        raise ImportError("add_image/add_images/add_figure need Pillow to encode PNG: pip install pillow") from error
    return Image


def _check_format(tag: str, shape: tuple[int, ...], dataformats: Any, ndim_allowed: tuple[int, ...]) -> str:
    if not isinstance(dataformats, str):
        raise ValueError(f"image {tag!r}: dataformats must be a str such as 'CHW', got {dataformats!r}")
    layout = dataformats.upper()
    if len(set(layout)) != len(layout) or not set(layout) <= set("NCHW") or len(layout) not in ndim_allowed:
        raise ValueError(f"image {tag!r}: dataformats {dataformats!r} must use each of N, C, H, W at most once "
                         f"({' or '.join(map(str, ndim_allowed))} letters)")
    if len(shape) != len(layout):
        raise ValueError(f"image {tag!r}: array of shape {shape} does not match dataformats {dataformats!r}")
    if not {"H", "W"} <= set(layout):
        raise ValueError(f"image {tag!r}: dataformats {dataformats!r} must name H and W")
    return layout


def make_grid(images_nchw: np.ndarray, columns: int = GRID_COLUMNS) -> np.ndarray:
    """N images (N, C, H, W) with C 1 or 3 side by side on a black (3, rows*H, cols*W) canvas, row by row."""
    if images_nchw.shape[1] == 1:
        images_nchw = np.concatenate([images_nchw] * 3, axis=1)
    count, _, height, width = images_nchw.shape
    columns = min(count, columns)
    rows = -(-count // columns)
    canvas = np.zeros((3, height * rows, width * columns), dtype=images_nchw.dtype)
    for index in range(count):
        row, column = divmod(index, columns)
        canvas[:, row * height:(row + 1) * height, column * width:(column + 1) * width] = images_nchw[index]
    return canvas


def to_hwc(tag: str, values: Any, dataformats: str, batch: bool) -> np.ndarray:
    """The image as (H, W, C) with C in 1..4 turned into 3 (gray) or kept (RGB, RGBA); a batch as a grid."""
    _require_pillow()
    try:
        array = to_numpy(values)
    except Exception as error:
        raise ValueError(f"image {tag!r} is not an array: {type(values).__name__} ({error})") from None
    if array.dtype.kind not in "biuf":
        raise ValueError(f"image {tag!r} must hold real numbers, got dtype {array.dtype}")
    layout = _check_format(tag, array.shape, dataformats, (4,) if batch else (2, 3))
    if array.size == 0:
        raise ValueError(f"image {tag!r} is empty (shape {array.shape})")
    if len(layout) == 4:
        if "C" not in layout:
            raise ValueError(f"image {tag!r}: dataformats {dataformats!r} must name C")
        nchw = array.transpose([layout.index(c) for c in "NCHW"])
        if nchw.shape[1] not in (1, 3):
            raise ValueError(f"image {tag!r}: a batch needs 1 or 3 channels, got {nchw.shape[1]}")
        hwc = make_grid(nchw).transpose(1, 2, 0)
    elif len(layout) == 3:
        hwc = array.transpose([layout.index(c) for c in "HWC"])
        if hwc.shape[2] == 1:
            hwc = np.concatenate([hwc] * 3, axis=2)
    else:
        hw = array.transpose([layout.index(c) for c in "HW"])
        hwc = np.stack([hw] * 3, axis=2)
    if hwc.shape[2] not in (3, 4):
        raise ValueError(f"image {tag!r}: 1, 3 or 4 channels expected, got {hwc.shape[2]}")
    if hwc.shape[0] * hwc.shape[1] > MAX_IMAGE_PIXELS:
        raise ValueError(f"image {tag!r}: {hwc.shape[1]}x{hwc.shape[0]} pixels is more than {MAX_IMAGE_PIXELS}")
    return np.array(hwc, copy=True, order="C")


def to_uint8(hwc: np.ndarray) -> np.ndarray:
    """torch's rule: uint8 as is; any other dtype is taken as [0, 1] and scaled by 255, clipped, truncated."""
    if hwc.dtype == np.uint8:
        return hwc
    return (hwc.astype(np.float32) * 255).clip(0, 255).astype(np.uint8)


def encode_png(hwc_uint8: np.ndarray) -> bytes:
    output = io.BytesIO()
    _require_pillow().fromarray(hwc_uint8).save(output, format="PNG")
    return output.getvalue()


def image_value(tag: str, hwc: np.ndarray) -> Any:
    """A TF1 `Summary.Value.image` (what torch writes and TensorBoard's images plugin reads)."""
    pixels = to_uint8(hwc)
    height, width, channels = pixels.shape
    image = protos.Summary.Image(height=height, width=width, colorspace=channels,
                                 encoded_image_string=encode_png(pixels))
    return protos.Summary.Value(tag=tag, image=image)


def figure_to_chw(figure: Any, close: bool) -> np.ndarray:
    """A matplotlib figure rendered by the Agg canvas, RGB as (3, H, W) uint8."""
    try:
        import matplotlib.pyplot as pyplot
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError as error:
        raise ImportError("add_figure needs matplotlib (an optional dependency): pip install matplotlib") from error
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    width, height = canvas.get_width_height()
    rgba = np.frombuffer(canvas.buffer_rgba(), dtype=np.uint8).reshape(height, width, 4)
    if close:
        pyplot.close(figure)
    return np.ascontiguousarray(np.moveaxis(rgba[:, :, :3], 2, 0))
