"""Pipeline buffers in the allocator: elements held by prefetch queues, caches, shuffle buffers and parallel maps.

Each holding stage registers the arrays of the elements it holds with ``engine.memory`` under the ``input``
category, with the stage's description and the user line that built it as the op (``cache() at train.py:12
main``) and the user frames as the site, and releases them when the element leaves the stage.

Threads: stages hold and release elements on worker threads (the prefetch producer, map pools) while the
allocator belongs to the thread that trains. So ``hold`` and ``leave`` on other threads only queue the change here
(under this module's lock), and the allocator is changed on the *owner* thread only: the thread that last fetched
from a pipeline (``iter(dataset)``'s ``__next__`` makes its thread the owner and ``settle()``s the queue before each
fetch), the main thread until then. A change made on the owner thread itself (a cache recording in the training
thread, the prefetch consumer taking an element) is applied at once, after the queue. An element that leaves
before its hold was applied is never registered. So the allocator shows what the stages hold as of the last fetch.
"""
from __future__ import annotations

import os
import sys
import threading
from collections import deque
from typing import Any

from engine import memory
from engine.data.sources import TensorSlices
from engine.data.structure import Element, flatten

SITE_DEPTH = 4  # user frames kept as the site of a stage's buffers
HOLDING_STAGES = ("prefetch", "cache", "map", "shuffle")  # the transformations whose elements are registered
_ENGINE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_NEW, _LIVE, _GONE = 0, 1, 2  # Held.state: waiting for settle(), registered, released (or never registered)

_lock = threading.RLock()  # NOTE: reentrant: a cache's finalizer may run (garbage collection) while it is held
_pending: deque[Held] = deque()  # holds to register and leaves to release, in order
_owner = threading.main_thread().ident  # the thread allowed to touch the allocator
_settling = False
_failures: set[str] = set()


class Stage:
    """What the allocator is told about a holding stage: its op (description and the user line that built it),
    its site (the user frames) and the source arrays whose views it holds without owning (rows of
    ``from_tensor_slices``: the source's bytes are not the stage's)."""

    __slots__ = ("op", "site", "source_owners")

    def __init__(self, description: str, input: Any) -> None:
        self.site = user_frames()
        self.op = f"{description} at {self.site[0]}" if self.site else description
        # NOTE: NumPy points a view's base straight at the object owning the memory, so a row's base is its source's
        self.source_owners = frozenset(id(leaf if leaf.base is None else leaf.base) for leaf in _source_leaves(input))

    def open(self) -> Holding:
        """The buffers of one pass (or of one stored cache)."""
        return Holding(self)


class Held:
    """One element's arrays held by a stage."""

    __slots__ = ("stage", "arrays", "keys", "state", "left")

    def __init__(self, stage: Stage, arrays: list[Any]) -> None:
        self.stage, self.arrays, self.keys, self.state, self.left = stage, arrays, (), _NEW, False


class Holding:
    """The elements one pass of a stage holds now; ``close()`` lets go of all of them (the pass ended)."""

    __slots__ = ("stage", "live")

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.live: set[Held] = set()

    def hold(self, element: Element) -> Held | None:
        """The stage now holds ``element`` (any thread); None when it has no bytes of its own to count."""
        owners = self.stage.source_owners
        arrays = [leaf for leaf in flatten(element)
                  if leaf.nbytes and id(leaf if leaf.base is None else leaf.base) not in owners]
        if not arrays:
            return None
        held = Held(self.stage, arrays)
        if _direct():  # NOTE: no lock: nobody else sees `held` yet, and only the owner thread changes a live one
            held.state, held.keys = _LIVE, _register(self.stage, arrays)
            self.live.add(held)
            return held
        with _lock:
            self.live.add(held)
            _pending.append(held)
        _settle_if_owner()
        return held

    def leave(self, held: Held | None) -> None:
        """``held``'s element left the stage (any thread; one thread per pass, the one that closes it)."""
        if held is None:
            return
        if _direct():  # NOTE: no lock: `held` is registered (its hold was applied) and only this thread changes it
            _release(self._leave(held, True))
            return
        with _lock:
            self._leave(held, False)
        _settle_if_owner()

    def close(self) -> None:
        """Every element still held leaves (the pass ended or was abandoned, the cache was dropped)."""
        direct = _direct()
        with _lock:
            released = [self._leave(held, direct) for held in list(self.live)]
        for keys in released:
            _release(keys)
        _settle_if_owner()

    def _leave(self, held: Held, direct: bool) -> tuple[int, ...]:
        """Mark ``held`` left (under the lock); the keys to release now when ``direct``, else queue the release."""
        self.live.discard(held)
        if held.left:
            return ()
        held.left = True
        if held.state == _NEW:  # never registered: nothing to release (settle() skips its hold)
            held.state, held.arrays = _GONE, None
        elif held.state == _LIVE:
            if direct:  # no registration is in flight: its keys are set
                keys, held.state, held.keys, held.arrays = held.keys, _GONE, (), None
                return keys
            _pending.append(held)
        return ()


def _direct() -> bool:
    """Whether the calling thread may change the allocator right now: it is the owner, no change waits before this
    one and none is being applied (a finalizer that runs inside ``register`` / ``release`` queues its change)."""
    return not _pending and not _settling and threading.get_ident() == _owner


def _settle_if_owner() -> None:
    if _pending and threading.get_ident() == _owner:
        settle()


def stage_of(op: str) -> str | None:
    """The holding stage ("prefetch", "cache", "map", "shuffle") whose buffers are registered with this op (its
    description, e.g. ``cache() at train.py:12 main``); None for any other op."""
    name, parenthesis, _ = op.partition("(")
    return name if parenthesis and name in HOLDING_STAGES else None


def settle_here() -> None:
    """Make the calling thread the owner (it iterates a pipeline, so it trains) and settle."""
    global _owner
    _owner = threading.get_ident()
    if _pending:
        settle()


def settle() -> None:
    """Register the arrays of elements held since the last call and release those of elements that left, in the
    order it happened. Call it on the owner thread only; a nested or concurrent call returns at once (the running
    one takes what is added meanwhile)."""
    global _settling
    if not _pending:
        return
    with _lock:
        if _settling:
            return
        _settling = True
    try:
        while True:
            with _lock:
                if not _pending:
                    return
                held = _pending.popleft()
                if held.state == _NEW:
                    held.state, arrays = _LIVE, held.arrays
                elif held.state == _LIVE and held.left:
                    held.state, keys, held.keys, held.arrays, arrays = _GONE, held.keys, (), None, None
                else:
                    continue
            if arrays is None:
                _release(keys)
                continue
            keys = _register(held.stage, arrays)
            with _lock:
                held.keys = keys
                if held.left:  # left while being registered: its leave queued it again, or queue it now
                    _pending.append(held)
    finally:
        with _lock:
            _settling = False


def _release(keys: tuple[int, ...]) -> None:
    for key in keys:
        memory.release(key)


def _register(stage: Stage, arrays: list[Any]) -> tuple[int, ...]:
    keys: list[int] = []
    try:
        for array in arrays:
            keys.append(memory.register(array, "input", stage.op, stage.site, check_limit=False))
    except Exception as error:  # noqa: BLE001 - accounting must never break the pipeline
        for key in keys:
            memory.release(key)
        _report_once(stage.op, f"cannot account the buffers of {stage.op} ({type(error).__name__}: {error}); "
                               "they are left out of the allocator's figures")
        return ()
    return tuple(keys)


def _report_once(what: str, message: str) -> None:
    if what not in _failures:
        _failures.add(what)
        print(f"engine.data: {message}; further failures are not reported", file=sys.stderr)


def _source_leaves(dataset: Any) -> list[Any]:
    """The arrays of every ``from_tensor_slices`` source upstream of ``dataset`` (its ``_input`` chain)."""
    leaves: list[Any] = []
    while dataset is not None:
        if isinstance(dataset, TensorSlices):
            leaves += dataset._leaves
        dataset = dataset._input
    return leaves


def user_frames(depth: int = SITE_DEPTH) -> tuple[str, ...]:
    """Up to ``depth`` frames of the caller outside ``engine/``, innermost first, as ``frame_site`` formats them:
    where the user built a stage."""
    frame, lines = sys._getframe(1), []
    while frame is not None and len(lines) < depth:
        code = frame.f_code
        if not os.path.abspath(code.co_filename).startswith(_ENGINE_DIR):
            lines.append(frame_site(code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return tuple(lines)


def frame_site(filename: str, line: int, function: str) -> str:
    """``"file:line function"``, the file relative to the working directory when it is below it (otherwise as Python
    reports it): how allocation sites and stacks name a frame (the memory tracker's stacks too)."""
    if not filename.startswith("<"):
        try:
            relative = os.path.relpath(filename)
        except ValueError:  # another drive on Windows
            relative = ".."
        if not relative.startswith(".."):
            filename = relative
    return f"{filename}:{line} {function}"
