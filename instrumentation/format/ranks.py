"""Data-parallel runs: rank ``k`` of a run ``<run>`` writes the sub-run ``<run>/rank<k>``; alerts about a rank name it
as their subject the same way."""
from __future__ import annotations

import re

RANK_PREFIX = "rank"
_RANK_NAME = re.compile(RANK_PREFIX + r"(\d+)")


def rank_name(rank: int) -> str:
    """``rank<k>``: the sub-run directory of rank ``k`` and the subject of the alerts about it."""
    return f"{RANK_PREFIX}{int(rank)}"


def rank_of(name: str) -> int | None:
    """``k`` of a ``rank<k>`` name (a run's last path component or an alert's subject), else None."""
    match = _RANK_NAME.fullmatch(name)
    return int(match.group(1)) if match else None
