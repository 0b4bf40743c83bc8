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
    (code, last instruction) the formatted tuple is cached, so steady-state training reads no line numbers (a
    frame's ``f_lineno`` decodes the line table) and formats no strings. NOTE: code objects are looked up by id:
    ``hash(code)`` is not cached and hashes the constants of the code (costly for a module's or a long function's);
    the table keeps every code object it has seen alive, so an id is never reused while it is in the table."""

    __slots__ = ("depth", "_codes", "_interned")

    def __init__(self, depth: int = 4) -> None:
        if depth < 1:
            raise ValueError(f"stack depth must be at least 1, got {depth}")
        self.depth = depth
        self._codes: dict[int, tuple[CodeType, bool]] = {}  # id(code) -> (code, internal?)
        self._interned: dict[tuple, tuple[str, ...]] = {}  # (id(code), lasti, ...) of the user frames -> the stack

    def capture(self, skip: int = 2) -> tuple[str, ...]:
        """The stack of the caller ``skip`` frames up (2: the caller of the hook method that calls this)."""
        try:
            frame = _getframe(skip)
        except ValueError:
            return ()
        codes = self._codes
        key: list = []
        left = self.depth
        while frame is not None:
            code = frame.f_code
            known = codes.get(id(code))
            if known is None:
                known = codes[id(code)] = (code, is_internal(code.co_filename))
            if not known[1]:
                key.append(id(code))
                key.append(frame.f_lasti)
                left -= 1
                if not left:
                    break
            frame = frame.f_back
        key_tuple = tuple(key)
        stack = self._interned.get(key_tuple)
        if stack is None:
            stack = self._interned[key_tuple] = self._format(skip + 1)
        return stack

    def _format(self, skip: int) -> tuple[str, ...]:
        """The same walk, formatting the user frames (once per distinct stack)."""
        frame, lines = _getframe(skip), []
        while frame is not None and len(lines) < self.depth:
            code = frame.f_code
            if not self._codes[id(code)][1]:
                lines.append(f"{_short_path(code.co_filename)}:{frame.f_lineno} {code.co_name}")
            frame = frame.f_back
        return tuple(lines)


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
