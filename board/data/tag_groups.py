"""Grouping tags by their prefix (the part before the first '/'): the user's own groups first, then the
instrumentation's namespaces (LOGFORMAT.md), which the Scalars page shows collapsed."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from instrumentation.format.tags import PREFIXES

NO_PREFIX = "(no prefix)"
_INSTRUMENTATION_ORDER = {prefix.rstrip("/"): rank for rank, prefix in enumerate(PREFIXES)}


@dataclass(frozen=True, slots=True)
class TagGroup:
    prefix: str
    tags: list[str]
    instrumentation: bool  # one of the namespaces the instrumentation writes


def tag_prefix(tag: str) -> str:
    head, sep, _ = tag.partition("/")
    return head if sep else NO_PREFIX


def is_instrumentation(tag: str) -> bool:
    return tag_prefix(tag) in _INSTRUMENTATION_ORDER


def _order(tag: str) -> tuple:
    prefix = tag_prefix(tag)
    rank = _INSTRUMENTATION_ORDER.get(prefix)
    if rank is None:  # the user's tags: unprefixed first, then their prefixes alphabetically
        return (0, prefix != NO_PREFIX, prefix, tag)
    return (1, rank, prefix, tag)


def group_tags(tags: list[str]) -> list[TagGroup]:
    """Groups in display order, tags sorted inside each: the user's (unprefixed first, then by prefix), then the
    instrumentation namespaces in LOGFORMAT.md's order."""
    ordered = sorted(tags, key=_order)
    return [TagGroup(prefix, list(group), prefix in _INSTRUMENTATION_ORDER)
            for prefix, group in groupby(ordered, key=tag_prefix)]
