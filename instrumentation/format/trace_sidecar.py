"""The columnar sidecar of a flowscope capture: ``<host>.<pid>.columns.npz``, the trace's columns, pickle-free."""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from typing import Any

import numpy as np

from instrumentation.format import trace as fmt
from instrumentation.format.confined import open_regular
from instrumentation.format.trace_columns import OpColumns, SpanColumns, TraceColumns

SIDECAR_SUFFIX = ".columns.npz"
SIDECAR_VERSION = 2  # 2: op_freed_bytes; torch phases through autograd links
HEADER = "header"  # uint8 array: UTF-8 JSON with the version, the trace's identity, string tables and metadata

# Array name -> (dtype, owner) for every array besides the header; "ops"/"spans"/"memory" arrays share a length.
_ARRAYS: dict[str, tuple[str, str]] = {
    "op_name": ("int32", "ops"), "op_category": ("int8", "ops"), "op_ts_us": ("float64", "ops"),
    "op_dur_us": ("float64", "ops"), "op_self_us": ("float64", "ops"), "op_tid": ("int64", "ops"),
    "op_step": ("int64", "ops"), "op_module": ("int32", "ops"), "op_phase": ("int8", "ops"),
    "op_shapes": ("int32", "ops"), "op_bytes": ("int64", "ops"), "op_flops": ("float64", "ops"),
    "op_freed_bytes": ("int64", "ops"),
    "span_category": ("int8", "spans"), "span_name": ("int32", "spans"), "span_ts_us": ("float64", "spans"),
    "span_dur_us": ("float64", "spans"), "span_step": ("int64", "spans"),
    "memory_ts_us": ("float64", "memory"), "memory_bytes": ("int64", "memory"),
}
# Code array -> the header's string table it indexes.
_CODES = {"op_name": "names", "op_module": "modules", "op_shapes": "shape_strings", "span_name": "span_names"}


class SidecarError(ValueError):
    """The sidecar is unreadable, of another version, or does not belong to the trace next to it."""


def sidecar_path(trace_path: str | os.PathLike[str]) -> str:
    """``<host>.<pid>.columns.npz`` beside ``<host>.<pid>.trace.json.gz``."""
    trace_path = os.fspath(trace_path)
    if not trace_path.endswith(fmt.TRACE_SUFFIX) or trace_path.endswith(fmt.TORCH_TRACE_SUFFIXES):
        raise ValueError(f"{trace_path} is not a flowscope capture trace (*{fmt.TRACE_SUFFIX}): it has no sidecar")
    return trace_path[: -len(fmt.TRACE_SUFFIX)] + SIDECAR_SUFFIX


def trace_digest(data: bytes) -> str:
    """The trace file's identity recorded in its sidecar: BLAKE2b-128 of the file's bytes (gzip as written)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def write_sidecar(path: str | os.PathLike[str], columns: TraceColumns, trace_bytes: bytes) -> int:
    """Write ``columns`` (of the trace whose file holds exactly ``trace_bytes``) atomically; returns its size."""
    ops, spans = columns.ops, columns.spans
    span_codes, span_names = _factorize(spans.name)
    header = {"version": SIDECAR_VERSION, "trace_bytes": len(trace_bytes), "trace_blake2b": trace_digest(trace_bytes),
              "source": columns.source, "metadata": columns.metadata, "names": list(ops.names),
              "modules": list(ops.modules), "shape_strings": list(ops.shape_strings), "span_names": span_names}
    arrays = {HEADER: np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
              "op_name": ops.name, "op_category": ops.category, "op_ts_us": ops.ts_us, "op_dur_us": ops.dur_us,
              "op_self_us": ops.self_us, "op_tid": ops.tid, "op_step": ops.step, "op_module": ops.module,
              "op_phase": ops.phase, "op_shapes": ops.shapes, "op_bytes": ops.bytes, "op_flops": ops.flops,
              "op_freed_bytes": ops.freed_bytes,
              "span_category": spans.category, "span_name": span_codes, "span_ts_us": spans.ts_us,
              "span_dur_us": spans.dur_us, "span_step": spans.step,
              "memory_ts_us": columns.memory_ts_us, "memory_bytes": columns.memory_bytes}
    for name, (dtype, _) in _ARRAYS.items():
        arrays[name] = np.ascontiguousarray(arrays[name], dtype=dtype)
    path = os.fspath(path)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "wb") as handle:
        np.savez(handle, **arrays)
    os.replace(temporary, path)
    return os.path.getsize(path)


def read_sidecar(trace_path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> TraceColumns:
    """The columns of ``trace_path`` from its sidecar; ``FileNotFoundError`` when there is none, ``SidecarError``
    when it is corrupt, of another version, or recorded for other trace bytes (stale or mismatched). Both files are
    opened as regular files only, and with ``root`` only when not reached through a link leading outside it."""
    path = sidecar_path(trace_path)
    try:
        with open_regular(path, root) as handle, np.load(handle, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as error:
        raise SidecarError(f"{path}: unreadable sidecar ({type(error).__name__}: {error})") from None
    header = _header(path, arrays)
    _check_identity(path, os.fspath(trace_path), header, root)
    _check_arrays(path, arrays, header)
    names = header["span_names"]
    span_names = tuple(np.array(names, dtype=object)[arrays["span_name"]].tolist()) if names else ()
    ops = OpColumns(arrays["op_name"], tuple(header["names"]), arrays["op_category"], arrays["op_ts_us"],
                    arrays["op_dur_us"], arrays["op_self_us"], arrays["op_tid"], arrays["op_step"], arrays["op_module"],
                    tuple(header["modules"]), arrays["op_phase"], arrays["op_shapes"], tuple(header["shape_strings"]),
                    arrays["op_bytes"], arrays["op_flops"], arrays["op_freed_bytes"])
    spans = SpanColumns(arrays["span_category"], span_names, arrays["span_ts_us"], arrays["span_dur_us"],
                        arrays["span_step"])
    return TraceColumns(ops, spans, arrays["memory_ts_us"], arrays["memory_bytes"], header["metadata"],
                        header["source"])


def _factorize(values: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    table = {value: i for i, value in enumerate(dict.fromkeys(values))}
    return np.fromiter(map(table.__getitem__, values), dtype=np.int32, count=len(values)), list(table)


def _header(path: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    raw = arrays.get(HEADER)
    if raw is None or raw.dtype != np.uint8 or raw.ndim != 1:
        raise SidecarError(f"{path}: no '{HEADER}' array")
    try:
        header = json.loads(raw.tobytes())
    except ValueError as error:
        raise SidecarError(f"{path}: header is not JSON ({error})") from None
    if not isinstance(header, dict) or header.get("version") != SIDECAR_VERSION:
        version = header.get("version") if isinstance(header, dict) else None
        raise SidecarError(f"{path}: sidecar version {version!r}, this reader reads {SIDECAR_VERSION}")
    for key in ("names", "modules", "shape_strings", "span_names"):
        if not isinstance(header.get(key), list) or not all(type(s) is str for s in header[key]):
            raise SidecarError(f"{path}: header '{key}' is not a list of strings")
    if not isinstance(header.get("metadata"), dict) or not isinstance(header.get("source"), str):
        raise SidecarError(f"{path}: header lacks 'metadata' (object) or 'source' (string)")
    return header


def _check_identity(path: str, trace_path: str, header: dict[str, Any], root: str | os.PathLike[str] | None) -> None:
    """Size first (a stat), then the digest of the trace's bytes: a rewritten or swapped trace is caught."""
    with open_regular(trace_path, root) as handle:
        size = os.fstat(handle.fileno()).st_size
        if header.get("trace_bytes") != size:
            raise SidecarError(f"{path}: stale, recorded for a {header.get('trace_bytes')}-byte trace, "
                               f"{trace_path} has {size} bytes")
        digest = trace_digest(handle.read())
    if header.get("trace_blake2b") != digest:
        raise SidecarError(f"{path}: stale, the digest of {trace_path} differs from the recorded one")


def _check_arrays(path: str, arrays: dict[str, np.ndarray], header: dict[str, Any]) -> None:
    lengths: dict[str, int] = {}
    for name, (dtype, owner) in _ARRAYS.items():
        array = arrays.get(name)
        if array is None:
            raise SidecarError(f"{path}: array '{name}' is missing")
        if array.dtype != np.dtype(dtype) or array.ndim != 1:
            raise SidecarError(f"{path}: array '{name}' is {array.dtype}{list(array.shape)}, expected 1-d {dtype}")
        if lengths.setdefault(owner, len(array)) != len(array):
            raise SidecarError(f"{path}: array '{name}' has {len(array)} rows, other {owner} arrays "
                               f"{lengths[owner]}")
    for name, table in _CODES.items():
        codes = arrays[name]
        if len(codes) and (codes.min() < 0 or codes.max() >= len(header[table])):
            raise SidecarError(f"{path}: codes of '{name}' fall outside its {len(header[table])}-string table")
    for name, limit in (("span_category", len(fmt.SPAN_CATEGORIES)), ("op_phase", len(fmt.PHASES))):
        values = arrays[name]
        if len(values) and (values.min() < 0 or values.max() >= limit):
            raise SidecarError(f"{path}: '{name}' values fall outside 0..{limit - 1}")
