"""Users' regular expressions (page filters) compiled by RE2: linear time in the text, whatever the pattern."""
from __future__ import annotations

from functools import lru_cache

import re2

MAX_PATTERN_CHARS = 1000  # a filter is typed by hand; a longer one is refused before compiling


class InvalidPattern(ValueError):
    """A pattern that RE2 cannot compile (syntax error, or a feature it lacks: backreferences, lookaround)."""


@lru_cache(maxsize=256)
def compile_filter(pattern: str) -> re2._Regexp:
    """`pattern` compiled by RE2 (no backtracking: matching costs O(len(text)) for a fixed pattern)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidPattern(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    options = re2.Options()
    options.log_errors = False  # RE2 would print every failed compile on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else "invalid"
        raise InvalidPattern(reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)) from None


def pattern_error(pattern: str) -> str | None:
    """Why `pattern` cannot be used as a filter, or None when it can (an empty pattern matches everything)."""
    if not pattern:
        return None
    try:
        compile_filter(pattern)
    except InvalidPattern as error:
        return str(error)
    return None


def matching(names: list[str], pattern: str) -> list[str]:
    """Names in which `pattern` matches (searched anywhere). An invalid pattern matches nothing: pages show
    `pattern_error(pattern)` instead of results."""
    if not pattern:
        return list(names)
    try:
        compiled = compile_filter(pattern)
    except InvalidPattern:
        return []
    return [name for name in names if compiled.search(name)]
