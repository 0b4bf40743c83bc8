"""TensorProto <-> numpy: every dtype and both payload forms (tensor_content bytes or typed *_val fields)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from instrumentation.format import protos
from instrumentation.format.record_headers import MAX_RECORD_BYTES

DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 1, 2, 3, 4, 5, 6, 7
DT_INT64, DT_BOOL, DT_BFLOAT16, DT_UINT16, DT_HALF, DT_UINT32, DT_UINT64 = 9, 10, 14, 17, 19, 22, 23

# dtype enum -> (numpy dtype of tensor_content, name of the typed repeated field)
_LAYOUT: dict[int, tuple[Any, str]] = {
    DT_FLOAT: (np.float32, "float_val"), DT_DOUBLE: (np.float64, "double_val"),
    DT_INT32: (np.int32, "int_val"), DT_UINT8: (np.uint8, "int_val"), DT_INT16: (np.int16, "int_val"),
    DT_INT8: (np.int8, "int_val"), DT_INT64: (np.int64, "int64_val"), DT_BOOL: (np.bool_, "bool_val"),
    DT_UINT16: (np.uint16, "int_val"), DT_HALF: (np.float16, "half_val"), DT_BFLOAT16: (np.uint16, "half_val"),
    DT_UINT32: (np.uint32, "uint32_val"), DT_UINT64: (np.uint64, "uint64_val"),
}

_ITEM_BYTES = {dtype_enum: np.dtype(layout[0]).itemsize for dtype_enum, layout in _LAYOUT.items()}  # strings: 8


def _fill(values: np.ndarray, size: int) -> np.ndarray:
    """TensorFlow's rule: fewer typed values than elements means the last one repeats (a splat)."""
    if values.size == size:
        return values
    if values.size == 0:
        return np.zeros(size, values.dtype)
    return np.concatenate([values, np.full(size - values.size, values[-1], values.dtype)])


def tensor_to_numpy(tensor: Any) -> np.ndarray:
    """A decoded TensorProto. Strings become an object array of `bytes`; bfloat16 becomes float32."""
    shape = tuple(dim.size for dim in tensor.tensor_shape.dim)
    size = math.prod(shape)
    dtype_enum = tensor.dtype
    if size < 0 or size * _ITEM_BYTES.get(dtype_enum, 8) > MAX_RECORD_BYTES:  # a splat is never allocated unbounded
        raise ValueError(f"tensor shape {shape} is negative or larger than {MAX_RECORD_BYTES >> 20} MiB decoded")
    if dtype_enum == DT_STRING:
        strings = list(tensor.string_val)
        array = np.empty(len(strings), dtype=object)
        array[:] = strings
        return _fill(array, size).reshape(shape)
    if dtype_enum not in _LAYOUT:
        raise ValueError(f"unsupported tensor dtype enum {dtype_enum}")
    np_dtype, typed_field = _LAYOUT[dtype_enum]
    if tensor.tensor_content:
        flat = np.frombuffer(tensor.tensor_content, dtype=np.dtype(np_dtype).newbyteorder("<"))
    else:
        flat = np.asarray(getattr(tensor, typed_field))
        flat = flat.astype(np.uint16).view(np.float16) if dtype_enum == DT_HALF else flat.astype(np_dtype)
    if dtype_enum == DT_BFLOAT16:  # the upper half of a float32
        flat = (flat.astype(np.uint32) << 16).view(np.float32)
    return _fill(flat, size).reshape(shape)


def _shape_proto(shape: Sequence[int]) -> Any:
    return protos.TensorShapeProto(dim=[protos.TensorShapeProto.Dim(size=int(size)) for size in shape])


def string_tensor(texts: Sequence[str]) -> Any:
    """A 1-D DT_STRING TensorProto (the text plugin's form), UTF-8 encoded."""
    return protos.TensorProto(dtype=DT_STRING, tensor_shape=_shape_proto([len(texts)]),
                              string_val=[text.encode("utf-8") for text in texts])

