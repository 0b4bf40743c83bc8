"""Allocation stacks: the user's frames ("file:line function") above the engine, cached per code location."""
from __future__ import annotations

import os
import sys
from types import CodeType
from typing import Callable

import engine
from engine.data import frame_site

_ENGINE_DIR = os.path.dirname(os.path.abspath(engine.__file__)) + os.sep
_INSTRUMENTATION_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_INTERNAL_PREFIXES = (_ENGINE_DIR, _INSTRUMENTATION_DIR)
_DEMO_DIR = os.path.join(_INSTRUMENTATION_DIR, "demo") + os.sep  # the demo's training code plays the user's part
_getframe = sys._getframe


class StackRecorder:
    """``capture()`` returns an interned tuple of up to ``depth`` user frames, innermost first.

    Frames whose file lies under ``engine/`` or ``instrumentation/`` (but not ``instrumentation/demo/``) are skipped
    (so a leak points at the user's line, not at ``Linear.forward``). Per file name the internal/user decision is
    cached; per sequence of (code, last instruction) the formatted tuple is cached, so steady-state training reads
    no line numbers (a frame's ``f_lineno`` decodes the line table) and formats no strings. Internal frames are
    recognised by their code's file name (a string: its hash is cached). NOTE: user frames' code objects are keyed
    by id: ``hash(code)`` is not cached and hashes the constants of the code (costly for a module's or a long
    function's); the table keeps every user code object it has seen alive, so an id is never reused while it is in
    the table."""

    __slots__ = ("depth", "_codes", "_internal_files", "_user_files", "_interned", "capture")

    def __init__(self, depth: int = 4) -> None:
        if depth < 1:
            raise ValueError(f"stack depth must be at least 1, got {depth}")
        self.depth = depth
        self._codes: dict[int, CodeType] = {}  # id(code) -> code of user frames (kept alive: their ids stay unique)
        self._internal_files: set[str] = set()  # co_filename of frames under engine/ or instrumentation/
        self._user_files: set[str] = set()
        self._interned: dict[tuple, tuple[str, ...]] = {}  # (id(code), lasti, ...) of the user frames -> the stack
        self.capture = _capturer(self)

    def classify(self, filename: str) -> bool:
        """Remember whether frames of ``filename`` are internal; returns True if they are."""
        internal = is_internal(filename)
        (self._internal_files if internal else self._user_files).add(filename)
        return internal

    def _format(self, skip: int) -> tuple[str, ...]:
        """The same walk, formatting the user frames (once per distinct stack)."""
        frame, lines = _getframe(skip), []
        while frame is not None and len(lines) < self.depth:
            code = frame.f_code
            if code.co_filename in self._user_files:
                lines.append(frame_site(code.co_filename, frame.f_lineno, code.co_name))
            frame = frame.f_back
        return tuple(lines)


def _capturer(recorder: StackRecorder) -> Callable[[int], tuple[str, ...]]:
    """``recorder.capture(skip=2)``: the stack of the caller ``skip`` frames up (2: the caller of the function that
    calls it). A closure over the recorder's tables, built once: it runs for every allocation, and a closure reads
    its variables faster than a method reads attributes. An internal frame costs its code's file name (a string
    with a cached hash) looked up in a set; a user frame also its code's id."""
    codes, internal, user, interned, depth, classify = (recorder._codes, recorder._internal_files,
                                                        recorder._user_files, recorder._interned, recorder.depth,
                                                        recorder.classify)

    def capture(skip: int = 2) -> tuple[str, ...]:
        try:
            frame = _getframe(skip)
        except ValueError:
            return ()
        key: list = []
        left = depth
        while frame is not None:
            code = frame.f_code
            filename = code.co_filename
            if filename in internal or (filename not in user and classify(filename)):
                frame = frame.f_back
                continue
            code_id = id(code)
            if code_id not in codes:
                codes[code_id] = code
            key.append(code_id)
            key.append(frame.f_lasti)
            left -= 1
            if not left:
                break
            frame = frame.f_back
        key_tuple = tuple(key)
        stack = interned.get(key_tuple)
        if stack is None:
            stack = interned[key_tuple] = recorder._format(skip + 1)
        return stack

    return capture


def is_internal(filename: str) -> bool:
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    return (path.startswith(_INTERNAL_PREFIXES) and not path.startswith(_DEMO_DIR)) or filename.startswith("<frozen ")
