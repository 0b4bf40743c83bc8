"""Grouping tags by their prefix (the part before the first '/')."""
from __future__ import annotations

from itertools import groupby

NO_PREFIX = "(no prefix)"


def tag_prefix(tag: str) -> str:
    head, sep, _ = tag.partition("/")
    return head if sep else NO_PREFIX


def group_tags(tags: list[str]) -> list[tuple[str, list[str]]]:
    """(prefix, tags) in prefix order, tags sorted inside each group; unprefixed tags come first."""
    ordered = sorted(tags, key=lambda t: (tag_prefix(t) != NO_PREFIX, tag_prefix(t), t))
    return [(prefix, list(members)) for prefix, members in groupby(ordered, key=tag_prefix)]
