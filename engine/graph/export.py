"""Writing a traced function's graphs to a run: ``<run>/plugins/graph/<function>.<index>.<stage>.json``
(docs/logformat.md). The engine must not import instrumentation, so the JSON is written here (tmp + rename), in the
format ``instrumentation.format.graph_file.write_graph`` validates; ``logdir`` is a run directory or any object
with a ``logdir``/``log_dir`` attribute (a writer)."""
from __future__ import annotations

import json
import os
from typing import Any

from engine.graph.ir import Graph, to_dict


def run_dir(target: Any) -> str:
    for attr in ("run_dir", "logdir", "log_dir"):
        value = getattr(target, attr, None)
        if isinstance(value, (str, os.PathLike)):
            return os.fspath(value)
    if isinstance(target, (str, os.PathLike)):
        return os.fspath(target)
    raise TypeError(f"engine.function(logdir=...) needs a run directory or a writer, got {type(target).__name__}")


def write_graphs(target: Any, function: str, index: int, unoptimised: Graph, optimised: Graph) -> list[str]:
    """Write both stages; returns the paths. Never raises into training: a failure is reported once on stderr."""
    paths = []
    try:
        folder = os.path.join(run_dir(target), "plugins", "graph")
        os.makedirs(folder, exist_ok=True)
        for graph, stage in ((unoptimised, "unoptimised"), (optimised, "optimised")):
            path = os.path.join(folder, f"{function}.{index}.{stage}.json")
            tmp = path + ".tmp"
            text = json.dumps(to_dict(graph, stage), separators=(",", ":"), allow_nan=False)
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
            paths.append(path)
    except Exception as error:  # noqa: BLE001 - writing the graph must never break training
        import sys
        print(f"engine.function: could not write the graph of '{function}': {error}", file=sys.stderr)
    return paths
