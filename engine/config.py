"""Engine flags, read once from the environment and overridable in a ``with config.override(...)`` block."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

# DEBUG levels: 0 silent, 1 check every op output for NaN/Inf, 2 also print each op as it runs (engine.debug's
# recorder, attached at import and by override(); assigning DEBUG directly does not attach it).
DEBUG: int = int(os.environ.get("FLOWSCOPE_DEBUG", "0") or 0)
DEFAULT_DTYPE: str = os.environ.get("FLOWSCOPE_DEFAULT_DTYPE", "float32")
DEVICE: str = os.environ.get("FLOWSCOPE_DEVICE", "cpu")

_FLAGS = ("DEBUG", "DEFAULT_DTYPE", "DEVICE")


@contextlib.contextmanager
def override(**flags: object) -> Iterator[None]:
    """Temporarily set flags, e.g. ``with config.override(DEBUG=1): ...``."""
    unknown = sorted(set(flags) - set(_FLAGS))
    if unknown:
        raise KeyError(f"unknown engine flag(s) {unknown}; known flags: {list(_FLAGS)}")
    saved = {name: globals()[name] for name in flags}
    globals().update(flags)
    _flags_changed()
    try:
        yield
    finally:
        globals().update(saved)
        _flags_changed()


def _flags_changed() -> None:
    from engine import debug  # NOTE: at call time: debug builds on hooks and the backend, which read these flags
    debug.sync()
