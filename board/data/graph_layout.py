"""A graph grouped by module (collapsible groups) and laid out in layers: longest-path layering, barycentre order.

Groups are (phase, module path prefix): a module's forward and backward ops are apart in the graph, so one box
around both would span it. A collapsed group is drawn as one item standing for all its nodes.
"""
from __future__ import annotations

from dataclasses import dataclass

from board.data.graph import KIND_OP, GraphNode, GraphView

EXPAND_LIMIT = 150  # graphs with more op nodes start with every group collapsed
ORDER_SWEEPS = 4  # barycentre sweeps (down and up) over the layers
BOX_PAD = 0.3
NEST_PAD = 0.15  # more per level of boxes inside a box


@dataclass(frozen=True, slots=True)
class Group:
    key: str  # "<phase>|<module prefix>"
    label: str  # "0.fc · forward"
    depth: int
    size: int  # nodes inside (at any depth)


@dataclass(frozen=True, slots=True)
class DrawnItem:
    key: str  # a node id, or a group key for a collapsed group
    label: str
    kind: str  # a node kind (graph.KIND_*) or "group"
    node_ids: tuple[str, ...]  # the nodes it stands for
    box: str  # the innermost expanded group it sits in ("" none)
    layer: int
    x: float
    y: float


@dataclass(frozen=True, slots=True)
class GroupBox:
    key: str
    label: str
    x0: float
    x1: float
    y0: float
    y1: float


@dataclass(frozen=True)
class DrawnGraph:
    items: tuple[DrawnItem, ...]
    edges: tuple[tuple[int, int], ...]  # (from item, to item) indices
    back_edges: int  # edges that point backwards in the order (only between groups: a cycle made by collapsing)
    boxes: tuple[GroupBox, ...]


def group_key(phase: str, prefix: str) -> str:
    return f"{phase}|{prefix}"


def group_label(key: str) -> str:
    phase, prefix = key.split("|", 1)
    return f"{prefix} · {phase}" if phase else prefix


def _phases(view: GraphView) -> dict[str, str]:
    """Each node's phase; inputs and parameters take their first user's (so they sit in its group)."""
    phases = {node.id: node.phase for node in view.nodes}
    for node in view.nodes:
        for source in node.inputs:
            if not phases.get(source):
                phases[source] = node.phase
    return phases


def group_paths(view: GraphView) -> dict[str, tuple[str, ...]]:
    """Node id → its group keys, outermost first (empty for a node outside every module)."""
    phases = _phases(view)
    paths = {}
    for node in view.nodes:
        parts = node.module.split(view.separator) if node.module else []
        paths[node.id] = tuple(group_key(phases[node.id], view.separator.join(parts[:depth]))
                               for depth in range(1, len(parts) + 1))
    return paths


def groups_of(view: GraphView) -> tuple[Group, ...]:
    sizes: dict[str, int] = {}
    for path in group_paths(view).values():
        for key in path:
            sizes[key] = sizes.get(key, 0) + 1
    return tuple(Group(key, group_label(key), key.count(view.separator) + 1 if key.split("|", 1)[1] else 0, size)
                 for key, size in sizes.items())


def default_expanded(view: GraphView) -> tuple[str, ...]:
    """Every group of a small graph; none of a large one (collapsed modules keep ~1000 nodes readable)."""
    return tuple(group.key for group in groups_of(view)) if view.op_count <= EXPAND_LIMIT else ()


def _node_label(node: GraphNode) -> str:
    return node.record_name if node.kind == KIND_OP else node.id.rsplit("/", 1)[-1]  # GraphDef: the last scope part


def layout_graph(view: GraphView, expanded: set[str] | frozenset[str] | tuple[str, ...]) -> DrawnGraph:
    expanded = set(expanded)
    paths = group_paths(view)
    item_of: dict[str, str] = {}
    members: dict[str, list[GraphNode]] = {}
    boxes_of: dict[str, str] = {}
    collapsed_groups: set[str] = set()
    for node in view.nodes:  # a node stands for itself inside expanded groups, else for its outermost collapsed one
        path = paths[node.id]
        collapsed = next((key for key in path if key not in expanded), None)
        key = collapsed if collapsed is not None else node.id
        item_of[node.id] = key
        if collapsed is not None:
            collapsed_groups.add(key)
        if key not in members:
            members[key] = []
            position = path.index(collapsed) if collapsed is not None else len(path)
            boxes_of[key] = path[position - 1] if position > 0 else ""
        members[key].append(node)
    rank = _ranks(view)
    keys = sorted(members, key=lambda key: min(rank[node.id] for node in members[key]))
    index = {key: i for i, key in enumerate(keys)}
    edges: set[tuple[int, int]] = set()
    for node in view.nodes:
        target = index[item_of[node.id]]
        for source in node.inputs:
            if source in item_of and index[item_of[source]] != target:
                edges.add((index[item_of[source]], target))
    forward = [(a, b) for a, b in edges if a < b]
    layers = _layers(len(keys), forward)
    y_of = _order(layers, forward, [boxes_of[key] for key in keys])
    items = []
    for i, key in enumerate(keys):
        nodes = members[key]
        is_group = key in collapsed_groups
        label = f"{group_label(key)} ({len(nodes)})" if is_group else _node_label(nodes[0])
        items.append(DrawnItem(key, label, "group" if is_group else nodes[0].kind,
                               tuple(node.id for node in nodes), boxes_of[key], layers[i], float(layers[i]), y_of[i]))
    return DrawnGraph(tuple(items), tuple(sorted(edges)), len(edges) - len(forward),
                      _boxes(items, paths, expanded))


def _ranks(view: GraphView) -> dict[str, float]:
    """A topological rank per node: ops by their place in the graph, inputs and parameters just before their first
    user (so a group holding a parameter is not placed before the ops it follows)."""
    rank = {node.id: float(position) for position, node in enumerate(view.nodes) if node.kind == KIND_OP}
    for position, node in enumerate(view.nodes):
        for source in node.inputs:
            if source not in rank:
                rank[source] = position - 0.5
    for position, node in enumerate(view.nodes):
        rank.setdefault(node.id, position - 0.5)
    return rank


def _layers(count: int, forward: list[tuple[int, int]]) -> list[int]:
    """Longest path from a source, then each source moved up to just before its first user; item indices are
    already a topological order of the forward edges."""
    predecessors: list[list[int]] = [[] for _ in range(count)]
    for a, b in forward:
        predecessors[b].append(a)
    layer = [0] * count
    for i in range(count):
        if predecessors[i]:
            layer[i] = max(layer[a] for a in predecessors[i]) + 1
    successors: list[list[int]] = [[] for _ in range(count)]
    for a, b in forward:
        successors[a].append(b)
    for i in range(count):  # a source (input, parameter) just before its first user, not all in the first layer
        if not predecessors[i] and successors[i]:
            layer[i] = min(layer[b] for b in successors[i]) - 1
    return layer


def _order(layers: list[int], forward: list[tuple[int, int]], boxes: list[str]) -> list[float]:
    """Position in its layer (as y, centred on 0) after barycentre sweeps; items of one box kept together."""
    by_layer: dict[int, list[int]] = {}
    for i, layer in enumerate(layers):
        by_layer.setdefault(layer, []).append(i)
    neighbours_down: list[list[int]] = [[] for _ in layers]  # predecessors
    neighbours_up: list[list[int]] = [[] for _ in layers]  # successors
    for a, b in forward:
        neighbours_down[b].append(a)
        neighbours_up[a].append(b)
    position = {i: float(rank) for members in by_layer.values() for rank, i in enumerate(members)}
    ordered_layers = sorted(by_layer)
    for sweep in range(ORDER_SWEEPS):
        sequence, neighbours = (ordered_layers, neighbours_down) if sweep % 2 == 0 else \
            (ordered_layers[::-1], neighbours_up)
        for layer in sequence:
            members = by_layer[layer]
            centre = {i: (sum(position[j] for j in neighbours[i]) / len(neighbours[i]) if neighbours[i]
                          else position[i]) for i in members}
            box_centre: dict[str, list[float]] = {}
            for i in members:
                box_centre.setdefault(boxes[i], []).append(centre[i])
            mean = {box: sum(values) / len(values) for box, values in box_centre.items()}
            members.sort(key=lambda i: (mean[boxes[i]], boxes[i], centre[i]))
            for rank, i in enumerate(members):
                position[i] = float(rank)
    y = [0.0] * len(layers)
    for members in by_layer.values():
        middle = (len(members) - 1) / 2
        for rank, i in enumerate(members):
            y[i] = middle - rank
    return y


def _boxes(items: list[DrawnItem], paths: dict[str, tuple[str, ...]], expanded: set[str]) -> tuple[GroupBox, ...]:
    """The bounding box of each expanded group's ops (and collapsed sub-groups); a box holding nested boxes is
    padded more, so that its label sits above theirs."""
    extent: dict[str, list[float]] = {}
    depth: dict[str, int] = {}
    nested: dict[str, int] = {}  # expanded levels inside the box
    for item in items:
        if item.kind not in (KIND_OP, "group"):
            continue  # NOTE: parameters collapse with their module but sit outside its box: they are drawn just
            # before their first user, often a layer where other modules' ops are, and a box around them would
            # cover those
        path = paths[item.node_ids[0]]
        open_path = path[:next((i for i, key in enumerate(path) if key not in expanded), len(path))]
        for level, key in enumerate(open_path):
            x0, x1, y0, y1 = extent.get(key, [item.x, item.x, item.y, item.y])
            extent[key] = [min(x0, item.x), max(x1, item.x), min(y0, item.y), max(y1, item.y)]
            depth[key] = level
            nested[key] = max(nested.get(key, 0), len(open_path) - 1 - level)
    boxes = []
    for key, (x0, x1, y0, y1) in extent.items():
        pad = BOX_PAD + NEST_PAD * min(nested[key], 4)
        boxes.append(GroupBox(key, group_label(key), x0 - pad, x1 + pad, y0 - pad, y1 + pad))
    return tuple(sorted(boxes, key=lambda box: depth[box.key]))
