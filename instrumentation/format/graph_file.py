"""Traced graphs in a run: `<run>/plugins/graph/<function>.<signature>.<stage>.json` (docs/logformat.md).

The contract between engine.function's tracer (which writes) and the board's Graph page (which reads): names,
the validation of a graph dict, the atomic writer and a reader that refuses partial or corrupt files with a
`GraphFileError` naming the file and the bad field.
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from instrumentation.format.confined import open_regular, write_atomic

GRAPH_RELDIR = os.path.join("plugins", "graph")
GRAPH_SUFFIX = ".json"
FORMAT_VERSION = 1
STAGES = ("unoptimised", "optimised")
NODE_PHASES = ("forward", "backward", "optimizer", "loss")
PARAMETER_PREFIX = "p:"  # graph inputs that are parameters: "p:<parameter name>"
# The op-record `args` key holding the graph node id of a replayed op (profile traces).
ARG_NODE = "node"
MAX_GRAPH_BYTES = 64 << 20  # a bigger file is refused by the reader, not parsed
_NAME = re.compile(r"[A-Za-z0-9_.<>\-]+")  # one path component: no separator, no "..", no control characters


class GraphFileError(ValueError):
    """A graph dict or file that does not follow the format; the message names the file and the bad field."""


def fused_op_name(fused_from: list[str] | tuple[str, ...]) -> str:
    """The op name that profile records of a fused node carry: ``Fused[Add+ReLU]``."""
    return f"Fused[{'+'.join(fused_from)}]"


def graph_name(function: str, signature_index: int, stage: str) -> str:
    """``<function qualname>.<signature index>.<stage>`` (the file name without ``.json``)."""
    if stage not in STAGES:
        raise GraphFileError(f"stage must be one of {STAGES}, not {stage!r}")
    name = f"{function}.{int(signature_index)}.{stage}"
    if not _NAME.fullmatch(name) or ".." in name:
        raise GraphFileError(f"function {function!r} gives the file name {name!r}, which is not a safe file name")
    return name


def is_graph_file(name: str) -> bool:
    stem = name[: -len(GRAPH_SUFFIX)] if name.endswith(GRAPH_SUFFIX) else ""
    return bool(stem) and _NAME.fullmatch(stem) is not None and ".." not in stem and stem.rsplit(".", 1)[-1] in STAGES


# ---- validation ---------------------------------------------------------------------------------------------
def _fail(where: str, message: str) -> GraphFileError:
    return GraphFileError(f"{where}: {message}")


def _string(value: Any, where: str, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise _fail(where, f"must be a {'' if empty else 'non-empty '}string, not {type(value).__name__} {value!r:.60}")
    return value


def _shape(value: Any, where: str) -> None:
    if not isinstance(value, list) or not all(type(size) is int and size >= 0 for size in value):
        raise _fail(where, f"must be a list of non-negative integers, not {value!r:.60}")


def _number(value: Any, where: str) -> None:
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise _fail(where, f"must be a finite non-negative number, not {value!r:.60}")


def _string_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise _fail(where, f"must be a list of strings, not {type(value).__name__}")
    for index, item in enumerate(value):
        _string(item, f"{where}[{index}]")
    return value


def _node(node: Any, where: str, known: set[str]) -> str:
    if not isinstance(node, dict):
        raise _fail(where, f"must be an object, not {type(node).__name__}")
    node_id = _string(node.get("id"), f"{where}.id")
    _string(node.get("op"), f"{where}.op")
    for index, source in enumerate(_string_list(node.get("inputs"), f"{where}.inputs")):
        if source not in known:
            raise _fail(f"{where}.inputs[{index}]", f"{source!r} is neither a graph input nor an earlier node")
    _shape(node.get("shape"), f"{where}.shape")
    _string(node.get("dtype"), f"{where}.dtype")
    _string(node.get("module"), f"{where}.module", empty=True)
    if node.get("phase") not in NODE_PHASES:
        raise _fail(f"{where}.phase", f"must be one of {NODE_PHASES}, not {node.get('phase')!r:.60}")
    if "fused_from" in node and not _string_list(node["fused_from"], f"{where}.fused_from"):
        raise _fail(f"{where}.fused_from", "must name at least one op")
    if "bytes" in node and (type(node["bytes"]) is not int or node["bytes"] < 0):
        raise _fail(f"{where}.bytes", f"must be a non-negative integer, not {node['bytes']!r:.60}")
    return node_id


def _passes(passes: Any, ids: set[str]) -> None:
    if not isinstance(passes, list):
        raise _fail("passes", f"must be a list, not {type(passes).__name__}")
    for index, entry in enumerate(passes):
        where = f"passes[{index}]"
        if not isinstance(entry, dict):
            raise _fail(where, f"must be an object, not {type(entry).__name__}")
        _string(entry.get("name"), f"{where}.name")
        _string_list(entry.get("removed"), f"{where}.removed")
        merged = entry.get("merged")
        if not isinstance(merged, list):
            raise _fail(f"{where}.merged", f"must be a list, not {type(merged).__name__}")
        for position, item in enumerate(merged):
            if not isinstance(item, dict):
                raise _fail(f"{where}.merged[{position}]", "must be an object {\"into\": id, \"from\": [ids]}")
            _string(item.get("into"), f"{where}.merged[{position}].into")
            _string_list(item.get("from"), f"{where}.merged[{position}].from")
        for key in ("nodes_before", "nodes_after"):
            if type(entry.get(key)) is not int or entry[key] < 0:
                raise _fail(f"{where}.{key}", f"must be a non-negative integer, not {entry.get(key)!r:.60}")


def validate_graph(graph: Any) -> dict[str, Any]:
    """`graph` itself when it follows the format; GraphFileError naming the first bad field otherwise."""
    if not isinstance(graph, dict):
        raise GraphFileError(f"a graph must be a JSON object, not {type(graph).__name__}")
    if graph.get("version") != FORMAT_VERSION:
        raise _fail("version", f"must be {FORMAT_VERSION}, not {graph.get('version')!r:.60}")
    _string(graph.get("function"), "function")
    _string(graph.get("signature"), "signature", empty=True)
    if graph.get("stage") not in STAGES:
        raise _fail("stage", f"must be one of {STAGES}, not {graph.get('stage')!r:.60}")
    _number(graph.get("trace_ms"), "trace_ms")
    inputs = graph.get("inputs")
    if not isinstance(inputs, list):
        raise _fail("inputs", f"must be a list, not {type(inputs).__name__}")
    known: set[str] = set()
    for index, entry in enumerate(inputs):
        if not isinstance(entry, dict):
            raise _fail(f"inputs[{index}]", f"must be an object, not {type(entry).__name__}")
        known.add(_string(entry.get("id"), f"inputs[{index}].id"))
        _shape(entry.get("shape"), f"inputs[{index}].shape")
        _string(entry.get("dtype"), f"inputs[{index}].dtype")
    nodes = graph.get("nodes")
    if not isinstance(nodes, list):
        raise _fail("nodes", f"must be a list, not {type(nodes).__name__}")
    ids: set[str] = set()
    for index, node in enumerate(nodes):
        # NOTE: nodes come in execution order, so every input names a graph input or an earlier node (a DAG)
        node_id = _node(node, f"nodes[{index}]", known | ids)
        if node_id in ids or node_id in known:
            raise _fail(f"nodes[{index}].id", f"{node_id!r} is used twice")
        ids.add(node_id)
    for index, output in enumerate(_string_list(graph.get("outputs"), "outputs")):
        if output not in ids and output not in known:
            raise _fail(f"outputs[{index}]", f"{output!r} is not a node of the graph")
    if "passes" in graph:
        _passes(graph["passes"], ids)
    elif graph["stage"] == "optimised":
        raise _fail("passes", "the optimised stage must list the passes that ran (an empty list if none)")
    return graph


# ---- files --------------------------------------------------------------------------------------------------
def graph_dir(run_dir: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(run_dir), GRAPH_RELDIR)


def write_graph(target: Any, graph: dict[str, Any], signature_index: int = 0) -> str:
    """Validate `graph` and write it to `<run>/plugins/graph/<function>.<signature_index>.<stage>.json` atomically
    (a reader never sees half a file); `target` is a run directory or a SummaryWriter (its log_dir). Returns the
    path written."""
    run_dir = getattr(target, "log_dir", target)
    if not isinstance(run_dir, (str, os.PathLike)):
        raise TypeError(f"write_graph: target must be a run directory or a SummaryWriter, not {type(target).__name__}")
    validate_graph(graph)
    name = graph_name(graph["function"], signature_index, graph["stage"])
    data = json.dumps(graph, separators=(",", ":"), allow_nan=False).encode()
    path = os.path.join(graph_dir(run_dir), name + GRAPH_SUFFIX)
    os.makedirs(os.fspath(run_dir), exist_ok=True)
    write_atomic(path, data, run_dir)
    return path


def read_graph(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The validated graph of one file: opened as a regular file only (below `root` when given), at most
    MAX_GRAPH_BYTES; GraphFileError naming the file when it is truncated, not JSON or not in the format."""
    path = os.fspath(path)
    try:
        with open_regular(path, root) as handle:
            data = handle.read(MAX_GRAPH_BYTES + 1)
    except OSError as error:
        raise GraphFileError(f"{path}: cannot be read ({error})") from error
    if len(data) > MAX_GRAPH_BYTES:
        raise GraphFileError(f"{path}: larger than {MAX_GRAPH_BYTES} bytes, not read")
    try:
        graph = json.loads(data, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as error:
        raise GraphFileError(f"{path}: not a complete JSON document ({str(error)[:120]})") from error
    try:
        return validate_graph(graph)
    except GraphFileError as error:
        raise GraphFileError(f"{path}: {error}") from error


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


__all__ = ["ARG_NODE", "FORMAT_VERSION", "GRAPH_RELDIR", "GraphFileError", "NODE_PHASES", "STAGES", "fused_op_name",
           "graph_dir", "graph_name", "is_graph_file", "read_graph", "validate_graph", "write_graph"]
