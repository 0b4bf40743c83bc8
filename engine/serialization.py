"""Checkpoints: state dicts (nested dicts of tensors, arrays and plain values) saved as .npz, never pickled.

The file is an ordinary ``.npz`` archive: each array is a member named by its path in the saved object (a
model's ``state_dict`` keeps its names, e.g. ``fc1.weight``; nested entries join keys with ``/``), so
``numpy.load`` can read it too. One extra member, ``__flowscope_checkpoint__``, holds a JSON description of the
object's structure and its plain values (numbers, strings, booleans, None, lists, tuples). Arrays are written
and read with ``allow_pickle=False``: loading a checkpoint never runs code from the file.

GPU tensors are saved as host arrays with the device they came from (``"device": "cuda:0"`` beside the tensor's
node); ``load`` puts them back there unless ``map_location`` says otherwise, as ``torch.load``.
"""
from __future__ import annotations

import errno
import json
import os
import zipfile
from typing import Any

import numpy as np

from engine import backend as _backend
from engine.tensor import Tensor

FORMAT = "flowscope.checkpoint"
VERSION = 1
META_KEY = "__flowscope_checkpoint__"
_ARRAY_KINDS = "biufc"  # bool, integer, unsigned, float, complex: what can be stored without pickling


class CheckpointError(ValueError):
    """The file is not a readable flowscope checkpoint (not an .npz archive, corrupted, or a newer format)."""


def save(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` — a dict of name → Tensor/ndarray, nested dicts, lists and plain values — to ``path``.

    The file is written next to ``path`` first and then moved into place, so a crash never leaves half a
    checkpoint under the final name.
    """
    path = os.fspath(path)
    arrays: dict[str, np.ndarray] = {}
    tree = _encode(obj, (), arrays)
    arrays[META_KEY] = np.array(json.dumps({"format": FORMAT, "version": VERSION, "tree": tree}))
    partial = f"{path}.partial-{os.getpid()}"
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
            for key, array in arrays.items():
                with archive.open(key + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def load(path: str | os.PathLike[str], map_location: Any = None) -> Any:
    """Read a checkpoint written by :func:`save`: the same structure, every array as a Tensor.

    Tensors go back to the device they were saved from, or where ``map_location`` says (as ``torch.load``): a
    device ("cpu", "cuda", "cuda:1", a ``Device``), a dict from saved device to device (``{"cuda:0": "cpu"}``),
    or a callable ``(tensor_on_cpu, saved_device) -> tensor``. A tensor saved on a GPU with no ``map_location``
    on a machine without CUDA is a RuntimeError that says to pass ``map_location="cpu"``.
    A plain ``.npz`` (e.g. from ``numpy.savez``) loads as a dict of name → Tensor. Raises
    ``FileNotFoundError`` for a missing file and :class:`CheckpointError` (naming the path) for anything else
    that is not a readable checkpoint.
    """
    place = _placer(map_location)
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "no checkpoint file", path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            if not isinstance(archive, np.lib.npyio.NpzFile):
                raise CheckpointError(f"{path}: a single .npy array, not a checkpoint archive (.npz)")
            arrays = {key: archive[key] for key in archive.files}
        if META_KEY not in arrays:
            return {key: place(_tensor(array), "cpu") for key, array in arrays.items()}
        meta = json.loads(str(arrays.pop(META_KEY)))
        if meta.get("format") != FORMAT:
            raise CheckpointError(f"{path}: unknown checkpoint format {meta.get('format')!r}")
        if int(meta.get("version", 0)) > VERSION:
            raise CheckpointError(f"{path}: checkpoint version {meta['version']} is newer than this engine reads "
                                  f"(version {VERSION}); upgrade flowscope")
        tree = meta["tree"]
    except CheckpointError:
        raise
    except (ValueError, OSError, EOFError, KeyError, TypeError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"{path}: not a readable flowscope checkpoint (.npz archive): "
                              f"{type(error).__name__}: {error}") from error
    try:
        return _decode(tree, arrays, place)
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{path}: not a readable flowscope checkpoint (.npz archive): "
                              f"{type(error).__name__}: {error}") from error


def _placer(map_location: Any) -> Any:
    """A function (cpu tensor, saved device string) -> tensor on the device ``map_location`` picks."""
    if map_location is None:
        return lambda tensor, saved: tensor if saved == "cpu" else _to(tensor, saved, "its saved device")
    if callable(map_location):
        return map_location
    if isinstance(map_location, dict):
        table = {str(_backend.as_device(k)): v for k, v in map_location.items()}
        return lambda tensor, saved: _to(tensor, table.get(saved, saved), "map_location")
    _backend.as_device(map_location)  # a bad device string fails here, before the file is read
    return lambda tensor, saved: _to(tensor, map_location, "map_location")


def _to(tensor: Tensor, device: Any, why: str) -> Tensor:
    if _backend.as_device(device).type == "cpu":
        return tensor
    try:
        return tensor.to(device)
    except RuntimeError as error:
        raise RuntimeError(f"cannot load a tensor onto {device} ({why}): {error}; pass map_location='cpu' to load "
                           "it into host memory") from None


def _encode(value: Any, path: tuple[Any, ...], arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The JSON node for ``value``; its arrays go into ``arrays`` under a key made from ``path``."""
    if isinstance(value, Tensor):
        device = str(value.device)
        node = {"tensor": _store(value.numpy(), path, arrays)}
        return node if device == "cpu" else {**node, "device": device}
    if _backend.is_device_array(value):
        return {"tensor": _store(value.get(), path, arrays), "device": _backend.device_of(value)}
    if isinstance(value, (np.ndarray, np.generic)):
        return {"tensor": _store(np.asarray(value), path, arrays)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"cannot save a dict key of type {type(key).__name__} at {_where(path)}: "
                                "keys must be str or int")
            items.append([key, _encode(item, path + (key,), arrays)])
        return {"dict": items}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, path + (i,), arrays) for i, item in enumerate(value)]
        return {"tuple" if isinstance(value, tuple) else "list": items}
    raise TypeError(f"cannot save a value of type {type(value).__name__} at {_where(path)}: checkpoints hold "
                    "Tensors, arrays, dicts, lists, tuples, numbers, strings, booleans and None")


def _store(array: np.ndarray, path: tuple[Any, ...], arrays: dict[str, np.ndarray]) -> str:
    if array.dtype.kind not in _ARRAY_KINDS:
        raise TypeError(f"cannot save an array of dtype {array.dtype} at {_where(path)} without pickling")
    base = "/".join(str(part) for part in path) or "value"
    key, suffix = base, 1
    while key in arrays or key == META_KEY:
        suffix += 1
        key = f"{base}#{suffix}"
    arrays[key] = array
    return key


def _decode(node: dict[str, Any], arrays: dict[str, np.ndarray], place: Any) -> Any:
    if "tensor" in node:
        return place(_tensor(arrays[node["tensor"]]), node.get("device", "cpu"))
    if "value" in node:
        return node["value"]
    if "dict" in node:
        return {key: _decode(item, arrays, place) for key, item in node["dict"]}
    if "list" in node:
        return [_decode(item, arrays, place) for item in node["list"]]
    if "tuple" in node:
        return tuple(_decode(item, arrays, place) for item in node["tuple"])
    raise ValueError(f"unknown node {sorted(node)} in the checkpoint's structure")


def _tensor(array: np.ndarray) -> Tensor:
    return Tensor._wrap_array(array, "input", "load")


def _where(path: tuple[Any, ...]) -> str:
    return "/".join(str(part) for part in path) or "the top level"
