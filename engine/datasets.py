"""Small data sets for examples and tests: scikit-learn's bundled 8x8 digits, and MNIST-format IDX files."""
from __future__ import annotations

import gzip
import os
import struct
import zlib

import numpy as np

# IDX type codes (the third byte of the magic number) -> big-endian numpy dtypes.
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

Split = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def load_digits(seed: int = 0, test_fraction: float = 0.2) -> Split:
    """``(x_train, y_train), (x_test, y_test)``: the 1797 8x8 digits, x float32 (n, 64) in [0, 1], y int64;
    a stratified split seeded by ``seed`` (the same seed gives identical arrays). Nothing is downloaded."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"load_digits: test_fraction must be in (0, 1), got {test_fraction!r}")
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    digits = sklearn_digits()
    x = (digits.data / 16.0).astype(np.float32)  # raw pixel values are 0..16
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=test_fraction, random_state=seed,
                                                        stratify=y)
    return (x_train, y_train), (x_test, y_test)


def load_idx(images_path: str | os.PathLike, labels_path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``(images, labels)`` from a pair of IDX files (MNIST's format; ``.gz`` files are decompressed).

    Images keep the file's element type in native byte order (uint8 for MNIST) and shape (count, rows, cols);
    labels are one-dimensional. A malformed file or a count mismatch raises ValueError naming the file.
    """
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim < 2:
        raise ValueError(f"{os.fspath(images_path)}: an images file needs at least 2 dimensions (count, ...), "
                         f"this one has shape {images.shape}")
    if labels.ndim != 1:
        raise ValueError(f"{os.fspath(labels_path)}: a labels file must be 1-dimensional (magic 0x00000801), "
                         f"this one has shape {labels.shape}")
    if len(images) != len(labels):
        raise ValueError(f"{os.fspath(images_path)} has {len(images)} images but {os.fspath(labels_path)} has "
                         f"{len(labels)} labels")
    return images, labels


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """One IDX file as a numpy array (native byte order)."""
    name = os.fspath(path)
    data = _read_bytes(name)
    if len(data) < 4:
        raise ValueError(f"{name}: {len(data)} bytes is too short for an IDX header (4-byte magic number)")
    zero, type_code, ndim = struct.unpack_from(">HBB", data)
    if zero != 0:
        raise ValueError(f"{name}: bad magic number 0x{data[:4].hex()}: an IDX file starts with two zero bytes")
    if type_code not in IDX_DTYPES:
        known = ", ".join(f"0x{code:02X}" for code in IDX_DTYPES)
        raise ValueError(f"{name}: unknown IDX data type code 0x{type_code:02X} in magic 0x{data[:4].hex()} "
                         f"(known: {known})")
    if ndim == 0:
        raise ValueError(f"{name}: magic 0x{data[:4].hex()} declares 0 dimensions")
    header_bytes = 4 + 4 * ndim
    if len(data) < header_bytes:
        raise ValueError(f"{name}: truncated header: {ndim} dimensions need {header_bytes} bytes, the file has "
                         f"{len(data)}")
    shape = struct.unpack_from(f">{ndim}I", data, 4)
    dtype = IDX_DTYPES[type_code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    actual = len(data) - header_bytes
    if actual != expected:
        problem = "truncated data" if actual < expected else "trailing bytes after the data"
        raise ValueError(f"{name}: {problem}: header dims {shape} of {dtype.name} need {expected} bytes, "
                         f"the file has {actual} after its {header_bytes}-byte header")
    array = np.frombuffer(data, dtype=dtype, offset=header_bytes).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=True)


def _read_bytes(name: str) -> bytes:
    if not name.endswith(".gz"):
        with open(name, "rb") as file:
            return file.read()
    try:
        with gzip.open(name, "rb") as file:
            return file.read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:  # a cut stream is an EOFError
        raise ValueError(f"{name}: not a valid gzip file ({type(error).__name__}: {error})") from error
