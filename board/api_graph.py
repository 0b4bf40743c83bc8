"""JSON API of the graphs (`/api/graph`), a route on the API blueprint of `board.api`.

Run and graph names are looked up in the run's listing, never joined onto a path: `../x` is an unknown graph.
"""
from __future__ import annotations

from dataclasses import asdict

from flask import Response, jsonify, request

from board.api import _checked, api, json_error
from board.context import board_context
from board.data.graph import GraphCache, GraphListing, list_graphs, runs_with_graphs
from instrumentation.format.graph_file import GraphFileError

_graphs = GraphCache()


def _listing(listing: GraphListing) -> dict:
    return {"graphs": [{"name": entry.name, "source": entry.source, "size_bytes": entry.size_bytes}
                       for entry in listing.entries], "problems": list(listing.problems)}


@api.get("/graph")
def graph() -> Response:
    """`/api/graph`: run → its graphs; `?run=R`: one run's; `?run=R&graph=G`: one graph's nodes, outputs and
    passes (422 when the file is unreadable, with the reason)."""
    store = board_context().store
    run = request.args.get("run")
    if run is None:
        return jsonify({"runs": {name: _listing(listing) for name, listing in runs_with_graphs(store).items()}})
    run = _checked("run", run)
    name = request.args.get("graph")
    if name is None:
        return jsonify({"run": run, **_listing(list_graphs(store, run))})
    try:
        view = _graphs.open(store, run, _checked("graph", name))
    except (GraphFileError, OSError) as error:
        return json_error(422, str(error))
    body = asdict(view)
    body["passes"] = [{"name": entry.name, "removed": list(entry.removed),
                       "merged": [{"into": into, "from": list(sources)} for into, sources in entry.merged],
                       "nodes_before": entry.nodes_before, "nodes_after": entry.nodes_after} for entry in view.passes]
    return jsonify(body)
