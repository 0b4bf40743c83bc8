"""JSON API of the multi-rank view (`/api/ranks`), a route on the API blueprint of `board.api`.

A group name is only looked up among the groups the store holds, never joined onto a path: `../x` is a 404.
"""
from __future__ import annotations

from dataclasses import asdict

from flask import Response, jsonify, request

from board.api import _checked, _required, api
from board.context import board_context
from board.data.ranks import RanksView, rank_groups, ranks_view


def ranks_json(view: RanksView) -> dict:
    """Every number of the view (every point of the skew; each rank's own series are at `/api/scalars`)."""
    skew = view.skew
    return {
        "group": view.group,
        "ranks": [{"rank": rank.rank, "run": rank.run, "warnings": list(view.warnings.get(rank.run, ()))}
                  for rank in view.ranks],
        "skew": {"ranks": list(skew.ranks), "steps": skew.steps.tolist(), "skew": skew.skew.tolist(),
                 "slowest": skew.slowest.tolist(), "min_ms": skew.min_ms.tolist(),
                 "median_ms": skew.median_ms.tolist(), "max_ms": skew.max_ms.tolist()},
        "breakdown": [asdict(item) for item in view.breakdown],
        "replicas": {"ranks": list(view.replicas.ranks), "first_divergent_step": view.replicas.first_divergent_step,
                     "pending_steps": view.replicas.pending_steps,
                     "checks": [asdict(check) for check in view.replicas.checks]},
        "alerts": [{"run": item.run, **asdict(item.alert)} for item in view.alerts],
        "notes": list(view.notes),
    }


@api.get("/ranks")
def ranks() -> Response:
    """`/api/ranks`: every group with rank sub-runs and its ranks; `?group=G`: that group's view (404 if unknown)."""
    store = board_context().store
    if "group" not in request.args:
        return jsonify({"groups": {group: [{"rank": rank.rank, "run": rank.run} for rank in members]
                                   for group, members in rank_groups(store).items()}})
    group = _checked("group", _required("group"))
    return jsonify(ranks_json(ranks_view(store, group)))
