"""Page filters: users' regular expressions run on RE2 (linear time); an invalid pattern is reported, not ignored."""
from __future__ import annotations

import re

import pytest
import re2

from board.data.filters import MAX_PATTERN_CHARS, compile_filter, matching, pattern_error

NAMES = ["loss/train", "loss/val", "lr", "acc/top1", "grad/fc1.weight", "sys/gpu0/util", "événement/x", "a" * 30]


def test_an_exponential_backtracking_pattern_is_compiled_by_re2_and_answers() -> None:
    """`^([\\w/]+)+!` backtracks 2^n ways in Python's re (62 s for a 30-character tag): RE2 has no backtracking."""
    compiled = compile_filter(r"^([\w/]+)+!")
    assert isinstance(compiled, re2._Regexp)  # the engine, by structure; bench/board_filters.py measures the time
    assert matching(["loss/" + "a" * 25, "a" * 60, "loss/a!"], r"^([\w/]+)+!") == ["loss/a!"]


@pytest.mark.parametrize("pattern", ["loss", "^l", "train$", "(val|top1)", r"gpu\d", "^[a-z]+/[a-z]+$", "a{30}",
                                     "LOSS", "(?i)LOSS", r"\.weight", "é", ""])
def test_matches_what_python_re_matches_for_ordinary_patterns(pattern: str) -> None:
    expected = [name for name in NAMES if re.search(pattern, name)]
    assert matching(NAMES, pattern) == expected


@pytest.mark.parametrize("pattern, reason", [("(loss", "missing )"), (r"(a)\1", "invalid escape sequence"),
                                             ("(?<=a)b", "invalid perl operator"),
                                             ("[z-a]", "invalid character class range"),
                                             ("a" * (MAX_PATTERN_CHARS + 1), "longer than")])
def test_an_invalid_or_unsupported_pattern_matches_nothing_and_says_why(pattern: str, reason: str) -> None:
    assert matching(NAMES, pattern) == []  # not a silent plain-text match of the names containing "(loss"
    message = pattern_error(pattern)
    assert message is not None and reason in message


def test_valid_patterns_have_no_error() -> None:
    assert pattern_error("") is None and pattern_error("^loss/") is None
