"""Tests of engine.datasets: the digits split against scikit-learn's raw data, IDX files written in tmp_path."""
from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from engine.datasets import load_digits, load_idx, read_idx

IDX_CODES = {np.uint8: 0x08, np.int8: 0x09, np.int16: 0x0B, np.int32: 0x0C, np.float32: 0x0D, np.float64: 0x0E}


def idx_bytes(array: np.ndarray, code: int | None = None) -> bytes:
    """An IDX file written from the spec: 0, 0, type code, ndim; big-endian uint32 dims; big-endian data."""
    code = IDX_CODES[array.dtype.type] if code is None else code
    header = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def write(path, data: bytes) -> str:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as file:
        file.write(data)
    return str(path)


# --- load_digits -------------------------------------------------------------------------------------------

def test_digits_shapes_types_and_scale():
    (x_train, y_train), (x_test, y_test) = load_digits()
    assert x_train.shape == (1437, 64) and x_test.shape == (360, 64)
    assert x_train.dtype == np.float32 and y_train.dtype == np.int64 and y_test.dtype == np.int64
    assert x_train.min() == 0.0 and x_train.max() == 1.0
    assert set(np.unique(y_test)) == set(range(10))


def test_digits_split_is_the_whole_data_set_scaled_by_16():
    from sklearn.datasets import load_digits as sklearn_digits
    raw = sklearn_digits()
    (x_train, y_train), (x_test, y_test) = load_digits(seed=3)
    x = np.concatenate([x_train, x_test]) * 16
    y = np.concatenate([y_train, y_test])
    order, raw_order = np.lexsort(np.c_[x, y].T), np.lexsort(np.c_[raw.data, raw.target].T)
    np.testing.assert_array_equal(x[order], raw.data[raw_order])
    np.testing.assert_array_equal(y[order], raw.target[raw_order])


def test_digits_split_is_stratified_and_seeded():
    (_, y_train), (x_test, y_test) = load_digits(seed=1, test_fraction=0.25)
    overall = np.bincount(np.concatenate([y_train, y_test]), minlength=10)
    assert np.all(np.abs(np.bincount(y_test, minlength=10) - overall * 0.25) <= 1)
    (_, same_train), (same_x_test, _) = load_digits(seed=1, test_fraction=0.25)
    np.testing.assert_array_equal(same_train, y_train)
    np.testing.assert_array_equal(same_x_test, x_test)
    (_, _), (other_x_test, _) = load_digits(seed=2, test_fraction=0.25)
    assert not np.array_equal(other_x_test, x_test)


def test_digits_rejects_a_bad_fraction():
    with pytest.raises(ValueError, match="test_fraction must be in"):
        load_digits(test_fraction=1.0)


# --- load_idx ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_mnist_style_files_round_trip(tmp_path, suffix):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=7, dtype=np.uint8)
    images_path = write(tmp_path / f"train-images-idx3-ubyte{suffix}", idx_bytes(images))
    labels_path = write(tmp_path / f"train-labels-idx1-ubyte{suffix}", idx_bytes(labels))
    with open(images_path, "rb") as file:
        head = file.read(4)
    assert head[:2 if suffix else 4] == (b"\x1f\x8b" if suffix else b"\x00\x00\x08\x03")
    got_images, got_labels = load_idx(images_path, labels_path)
    assert got_images.dtype == np.uint8 and got_images.shape == (7, 28, 28)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.float32, np.float64])
def test_every_idx_type_code_reads_in_native_order(tmp_path, dtype):
    values = (np.arange(24).reshape(2, 3, 4) * 37 - 300).astype(dtype) if dtype != np.int8 else \
        (np.arange(24).reshape(2, 3, 4) - 12).astype(dtype)
    path = write(tmp_path / "data.idx", idx_bytes(values))
    got = read_idx(path)
    assert got.dtype == np.dtype(dtype) and got.dtype.isnative and got.flags.writeable
    np.testing.assert_array_equal(got, values)


def test_bad_magic_is_named(tmp_path):
    path = write(tmp_path / "images.idx", b"\x01\x00\x08\x01" + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(ValueError, match=r"images\.idx: bad magic number 0x01000801"):
        read_idx(path)


def test_unknown_type_code_is_named(tmp_path):
    path = write(tmp_path / "labels.idx", b"\x00\x00\x0a\x01" + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(ValueError, match=r"labels\.idx: unknown IDX data type code 0x0A"):
        read_idx(path)


@pytest.mark.parametrize("cut, problem", [(-1, "truncated data"), (-500, "truncated data"),
                                          (+3, "trailing bytes"), (-806, "truncated header")])
def test_sizes_that_disagree_with_the_header_are_named(tmp_path, cut, problem):
    data = idx_bytes(np.zeros((2, 20, 20), dtype=np.uint8))
    data = data[:cut] if cut < 0 else data + b"\x00" * cut
    path = write(tmp_path / "cut-images.idx.gz", data)
    with pytest.raises(ValueError, match=rf"cut-images\.idx\.gz: {problem}"):
        read_idx(path)


def test_wider_types_check_bytes_not_items(tmp_path):
    data = idx_bytes(np.zeros((3, 2), dtype=np.float64))
    path = write(tmp_path / "wide.idx", data[:-8])
    with pytest.raises(ValueError, match=r"need 48 bytes, the file has 40"):
        read_idx(path)


def test_empty_and_corrupt_gzip_files_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match=r"empty\.idx: 0 bytes is too short"):
        read_idx(write(tmp_path / "empty.idx", b""))
    (tmp_path / "broken.idx.gz").write_bytes(gzip.compress(idx_bytes(np.zeros(100, np.uint8)))[:30])
    with pytest.raises(ValueError, match=r"broken\.idx\.gz: not a valid gzip file"):
        read_idx(tmp_path / "broken.idx.gz")


def test_counts_and_ranks_of_the_pair_are_checked(tmp_path):
    images = write(tmp_path / "images.idx", idx_bytes(np.zeros((4, 2, 2), dtype=np.uint8)))
    five_labels = write(tmp_path / "labels.idx", idx_bytes(np.zeros(5, dtype=np.uint8)))
    with pytest.raises(ValueError, match=r"images\.idx has 4 images but .*labels\.idx has 5 labels"):
        load_idx(images, five_labels)
    square_labels = write(tmp_path / "labels2.idx", idx_bytes(np.zeros((4, 1), dtype=np.uint8)))
    with pytest.raises(ValueError, match=r"labels2\.idx: a labels file must be 1-dimensional"):
        load_idx(images, square_labels)
    with pytest.raises(ValueError, match=r"labels\.idx: an images file needs at least 2 dimensions"):
        load_idx(five_labels, five_labels)
