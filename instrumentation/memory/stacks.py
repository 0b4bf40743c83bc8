"""Allocation stacks: the user's frames ("file:line function") above the engine, cached per code location."""
from __future__ import annotations

import os
import sys
from types import CodeType

import engine

_ENGINE_DIR = os.path.dirname(os.path.abspath(engine.__file__)) + os.sep
_INSTRUMENTATION_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_INTERNAL_PREFIXES = (_ENGINE_DIR, _INSTRUMENTATION_DIR)
_getframe = sys._getframe


class StackRecorder:
    """``capture()`` returns an interned tuple of up to ``depth`` user frames, innermost first.

    Frames whose file lies under ``engine/`` or ``instrumentation/`` are skipped (so a leak points at the user's
    line, not at ``Linear.forward``). Per code object the internal/user decision is cached; per sequence of
    (code, line) the formatted tuple is cached, so steady-state training formats no strings."""

    __slots__ = ("depth", "_internal", "_interned", "_formatted_lines")

    def __init__(self, depth: int = 4) -> None:
        if depth < 1:
            raise ValueError(f"stack depth must be at least 1, got {depth}")
        self.depth = depth
        self._internal: dict[CodeType, bool] = {}
        self._interned: dict[tuple, tuple[str, ...]] = {}
        self._formatted_lines: dict[tuple[CodeType, int], str] = {}

    def capture(self, skip: int = 2) -> tuple[str, ...]:
        """The stack of the caller ``skip`` frames up (2: the caller of the hook method that calls this)."""
        try:
            frame = _getframe(skip)
        except ValueError:
            return ()
        internal = self._internal
        key: list = []
        while frame is not None and len(key) < self.depth:
            code = frame.f_code
            skip_frame = internal.get(code)
            if skip_frame is None:
                skip_frame = internal[code] = is_internal(code.co_filename)
            if not skip_frame:
                key.append(code)
                key.append(frame.f_lineno)
            frame = frame.f_back
        key_tuple = tuple(key)
        stack = self._interned.get(key_tuple)
        if stack is None:
            stack = self._interned[key_tuple] = tuple(self._format(key_tuple[i], key_tuple[i + 1])
                                                      for i in range(0, len(key_tuple), 2))
        return stack

    def _format(self, code: CodeType, line: int) -> str:
        text = self._formatted_lines.get((code, line))
        if text is None:
            text = self._formatted_lines[(code, line)] = f"{_short_path(code.co_filename)}:{line} {code.co_name}"
        return text


def is_internal(filename: str) -> bool:
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    return path.startswith(_INTERNAL_PREFIXES) or filename.startswith("<frozen ")


def _short_path(filename: str) -> str:
    """The path relative to the working directory when it is below it; otherwise as Python reports it."""
    if filename.startswith("<"):
        return filename
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    return filename if relative.startswith("..") else relative
