"""A run's graphs as frozen value objects: flowscope's traced graphs (plugins/graph/) and TensorBoard GraphDefs."""
from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from board.data.store import LogdirStore, UnknownSeries
from instrumentation.format import graph_file, metadata
from instrumentation.format.graph_def import GraphDef

log = logging.getLogger(__name__)
GRAPHDEF_NAME = "GraphDef"  # the name of a run's (last) TensorBoard GraphDef; earlier ones get "GraphDef.<n>"
KIND_OP, KIND_INPUT, KIND_PARAMETER = "op", "graph_input", "graph_parameter"  # node kinds
CACHED_GRAPHS = 16
_GRAPHDEF_INPUT_OPS = {"IO Node", "Placeholder"}
_GRAPHDEF_PARAMETER_OPS = {"Parameter", "prim::GetAttr", "Const", "VariableV2", "VarHandleOp"}


@dataclass(frozen=True, slots=True)
class GraphNode:
    id: str
    op: str
    kind: str  # KIND_OP, KIND_INPUT (a graph input) or KIND_PARAMETER
    inputs: tuple[str, ...]
    module: str  # "" for none; parts joined by `GraphView.separator`
    shape: tuple[int, ...]
    dtype: str
    phase: str  # "" when unknown (GraphDefs)
    fused_from: tuple[str, ...] = ()
    bytes: int | None = None

    @property
    def record_name(self) -> str:
        """The op name the profiler records for this node (a fused node: ``Fused[Add+ReLU]``)."""
        return graph_file.fused_op_name(self.fused_from) if self.fused_from and not self.op.startswith("Fused[") \
            else self.op


@dataclass(frozen=True, slots=True)
class GraphPass:
    name: str
    removed: tuple[str, ...]
    merged: tuple[tuple[str, tuple[str, ...]], ...]  # (into, from ids)
    nodes_before: int
    nodes_after: int


@dataclass(frozen=True)
class GraphView:
    run: str
    name: str  # the file stem (`train_step.0.optimised`) or GRAPHDEF_NAME
    source: str  # "flowscope" or "graphdef"
    function: str
    signature: str
    stage: str  # "unoptimised", "optimised" or "" (GraphDef)
    trace_ms: float | None
    separator: str  # between module path parts: "." (flowscope) or "/" (GraphDef scopes)
    nodes: tuple[GraphNode, ...]  # graph inputs and parameters first, then ops in execution order
    outputs: tuple[str, ...]
    passes: tuple[GraphPass, ...] = ()

    @property
    def op_count(self) -> int:
        return sum(node.kind == KIND_OP for node in self.nodes)


@dataclass(frozen=True, slots=True)
class GraphEntry:
    """One graph a run holds, before it is opened."""

    run: str
    name: str
    source: str
    path: Path | None  # flowscope files; None for a GraphDef (kept by the store)
    size_bytes: int


@dataclass(frozen=True)
class GraphListing:
    entries: tuple[GraphEntry, ...]
    problems: tuple[str, ...]  # files that are not listed: unreadable directory, links, odd names


# ---- flowscope files ------------------------------------------------------------------------------------------
def _parameter_module(parameter_id: str) -> str:
    name = parameter_id[len(graph_file.PARAMETER_PREFIX):]
    return name.rsplit(".", 1)[0] if "." in name else ""


def from_graph_file(run: str, name: str, graph: dict[str, Any]) -> GraphView:
    """A validated graph dict (`graph_file.read_graph`) as a view."""
    nodes = []
    used_parameters = dict.fromkeys(source for node in graph["nodes"] for source in node["inputs"]
                                    if source.startswith(graph_file.PARAMETER_PREFIX))
    declared = {entry["id"]: entry for entry in graph["inputs"]}
    for entry in graph["inputs"]:
        is_parameter = entry["id"].startswith(graph_file.PARAMETER_PREFIX)
        nodes.append(GraphNode(entry["id"], "Parameter" if is_parameter else "Input",
                               KIND_PARAMETER if is_parameter else KIND_INPUT, (),
                               _parameter_module(entry["id"]) if is_parameter else "", tuple(entry["shape"]),
                               entry["dtype"], ""))
    for parameter in used_parameters:
        if parameter not in declared:
            nodes.append(GraphNode(parameter, "Parameter", KIND_PARAMETER, (), _parameter_module(parameter), (), "",
                                   ""))
    for node in graph["nodes"]:
        nodes.append(GraphNode(node["id"], node["op"], KIND_OP, tuple(node["inputs"]), node["module"],
                               tuple(node["shape"]), node["dtype"], node["phase"], tuple(node.get("fused_from", ())),
                               node.get("bytes")))
    passes = tuple(GraphPass(entry["name"], tuple(entry["removed"]),
                             tuple((item["into"], tuple(item["from"])) for item in entry["merged"]),
                             entry["nodes_before"], entry["nodes_after"]) for entry in graph.get("passes", ()))
    return GraphView(run, name, "flowscope", graph["function"], graph["signature"], graph["stage"],
                     float(graph["trace_ms"]), ".", tuple(nodes), tuple(graph["outputs"]), passes)


# ---- TensorBoard GraphDef -------------------------------------------------------------------------------------
def _graphdef_shape(node: Any) -> tuple[int, ...]:
    if "_output_shapes" not in node.attr:
        return ()
    shapes = node.attr["_output_shapes"].list.shape
    return tuple(max(0, int(dim.size)) for dim in shapes[0].dim) if shapes else ()


def _graphdef_dtype(node: Any) -> str:
    if "dtype" in node.attr and node.attr["dtype"].s:
        return node.attr["dtype"].s.decode("utf-8", "replace")
    return ""


def from_graphdef(run: str, name: str, data: bytes) -> GraphView:
    """A serialized GraphDef (torch's or our add_graph). Scopes (`Net/Linear[fc1]/...`) are the module paths;
    inputs (`^ctrl`, `name:1`) are resolved to node names; the nodes are put in a topological order.
    ValueError when the bytes are not a GraphDef."""
    try:
        proto = GraphDef.FromString(data)
    except Exception as error:  # NOTE: protobuf raises its own DecodeError (a subclass of Exception only)
        raise ValueError(f"not a GraphDef ({type(error).__name__})") from error
    names = {node.name for node in proto.node}
    nodes: dict[str, GraphNode] = {}
    for node in proto.node:
        if not node.name or node.name in nodes:
            continue
        inputs = tuple(dict.fromkeys(source.lstrip("^").split(":")[0] for source in node.input))
        kind = KIND_INPUT if node.op in _GRAPHDEF_INPUT_OPS else \
            KIND_PARAMETER if node.op in _GRAPHDEF_PARAMETER_OPS else KIND_OP
        scope = node.name.rsplit("/", 1)[0] if "/" in node.name and kind != KIND_INPUT else ""
        if kind == KIND_PARAMETER and scope.rsplit("/", 1)[-1] == node.name.rsplit("/", 1)[-1].split(".")[0]:
            scope = scope.rsplit("/", 1)[0] if "/" in scope else ""  # torch: `<module>/bias/bias.1`
        nodes[node.name] = GraphNode(node.name, node.op or "?", kind, tuple(s for s in inputs if s in names), scope,
                                     _graphdef_shape(node), _graphdef_dtype(node), "")
    ordered = _topological(nodes)
    outputs = tuple(node.id for node in ordered if node.kind == KIND_INPUT and node.inputs)
    return GraphView(run, name, "graphdef", "", "", "", None, "/", tuple(ordered), outputs)


def _topological(nodes: dict[str, GraphNode]) -> list[GraphNode]:
    """Kahn's order, file order among ready nodes; nodes on a cycle (not a DAG) follow in file order."""
    waiting = {name: sum(source in nodes for source in node.inputs) for name, node in nodes.items()}
    users: dict[str, list[str]] = {}
    for name, node in nodes.items():
        for source in node.inputs:
            users.setdefault(source, []).append(name)
    ready = [name for name, count in waiting.items() if count == 0]
    order: list[str] = []
    position = 0
    while position < len(ready):
        name = ready[position]
        position += 1
        order.append(name)
        for user in users.get(name, ()):
            waiting[user] -= 1
            if waiting[user] == 0:
                ready.append(user)
    placed = set(order)
    order += [name for name in nodes if name not in placed]
    return [nodes[name] for name in order]


# ---- a run's graphs -------------------------------------------------------------------------------------------
def _graphdef_values(store: LogdirStore, run: str) -> list[bytes]:
    values = store.plugin_values(run, metadata.GRAPHS_PLUGIN).get(metadata.GRAPH_TAG, [])
    return [value.content for value in values if getattr(value, "content", None)]


def _graphdef_names(count: int) -> list[str]:
    return [GRAPHDEF_NAME if index == count - 1 else f"{GRAPHDEF_NAME}.{index}" for index in range(count)]


def list_graphs(store: LogdirStore, run: str) -> GraphListing:
    """The graphs of one run (UnknownSeries for an unknown run). Graph files reached through links, other
    entries and odd names are not listed; each is named in `problems`."""
    path = store.run_path(run)
    entries: list[GraphEntry] = []
    problems: list[str] = []
    directory = Path(graph_file.graph_dir(path))
    if directory.is_symlink():
        problems.append(f"{directory}: a link, not followed")
    elif directory.is_dir():
        try:
            found = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as error:
            found = []
            problems.append(f"{directory}: cannot be listed ({error.strerror})")
        for entry in found:
            if ".tmp-" in entry.name:
                continue  # a file being written (graph_file.write_graph renames it into place)
            if not graph_file.is_graph_file(entry.name):
                problems.append(f"{entry.name}: not a graph file name (<function>.<n>.<stage>.json)")
            elif not entry.is_file(follow_symlinks=False):
                problems.append(f"{entry.name}: not a regular file")
            else:
                size = entry.stat(follow_symlinks=False).st_size
                entries.append(GraphEntry(run, entry.name[: -len(graph_file.GRAPH_SUFFIX)], "flowscope",
                                          Path(entry.path), size))
    values = _graphdef_values(store, run)
    for name, data in zip(_graphdef_names(len(values)), values):
        entries.append(GraphEntry(run, name, "graphdef", None, len(data)))
    return GraphListing(tuple(entries), tuple(problems))


def runs_with_graphs(store: LogdirStore) -> dict[str, GraphListing]:
    """Run → its listing, for every run that holds a graph or a graph problem."""
    found = {}
    for summary in store.runs():
        try:
            listing = list_graphs(store, summary.name)
        except UnknownSeries:
            continue
        if listing.entries or listing.problems:
            found[summary.name] = listing
    return found


class GraphCache:
    """Opened graphs by (run, name, size, mtime); files that fail are reported once each (log warning)."""

    def __init__(self, size: int = CACHED_GRAPHS) -> None:
        self.size = size
        self._entries: OrderedDict[tuple, GraphView] = OrderedDict()
        self._reported: set[tuple] = set()
        self._lock = threading.Lock()

    def open(self, store: LogdirStore, run: str, name: str) -> GraphView:
        """UnknownSeries for a graph the run does not list; graph_file.GraphFileError when it is unreadable."""
        entry = next((e for e in list_graphs(store, run).entries if e.name == name), None)
        if entry is None:
            raise UnknownSeries(f"run {run!r} has no graph {name!r}")
        mtime = entry.path.stat().st_mtime_ns if entry.path is not None else 0
        key = (run, name, entry.size_bytes, mtime)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        try:
            view = self._load(store, entry)
        except graph_file.GraphFileError as error:
            with self._lock:
                if key not in self._reported:
                    self._reported.add(key)
                    log.warning("run %s: graph %s not shown: %s", run, name, error)
            raise
        with self._lock:
            self._entries[key] = view
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return view

    @staticmethod
    def _load(store: LogdirStore, entry: GraphEntry) -> GraphView:
        if entry.path is not None:
            return from_graph_file(entry.run, entry.name, graph_file.read_graph(entry.path, store.logdir))
        values = _graphdef_values(store, entry.run)
        index = _graphdef_names(len(values)).index(entry.name)
        try:
            return from_graphdef(entry.run, entry.name, values[index])
        except ValueError as error:
            raise graph_file.GraphFileError(f"{entry.name}: {error}") from error


def sibling(store: LogdirStore, cache: GraphCache, view: GraphView, stage: str) -> GraphView | None:
    """The other stage of the same traced function and signature (None when absent or unreadable)."""
    if view.source != "flowscope" or view.stage == stage:
        return None
    name = view.name.rsplit(".", 1)[0] + "." + stage
    try:
        return cache.open(store, view.run, name)
    except (UnknownSeries, graph_file.GraphFileError, OSError):
        return None


def pass_marks(passes: tuple[GraphPass, ...]) -> dict[str, str]:
    """Node id → what a pass did to it ("removed by dead_code", "merged into f1 by elementwise_fusion"); the ids
    are of the graph the passes ran on (the unoptimised one) and, for merges, the node they became."""
    marks: dict[str, str] = {}
    for entry in passes:
        for node_id in entry.removed:
            marks.setdefault(node_id, f"removed by {entry.name}")
        for into, sources in entry.merged:
            for node_id in sources:
                marks.setdefault(node_id, f"merged into {into} by {entry.name}")
            marks.setdefault(into, f"made by {entry.name} from {', '.join(sources)}")
    return marks


def run_metadata_tags(store: LogdirStore, run: str) -> list[str]:
    """The tags of the run metadata logged beside a GraphDef (torch's add_graph writes `step1`)."""
    tags = store.plugin_values(run, metadata.GRAPHS_PLUGIN)
    return sorted(tag[len(metadata.RUN_METADATA_TAG_PREFIX):] for tag in tags
                  if tag.startswith(metadata.RUN_METADATA_TAG_PREFIX))
