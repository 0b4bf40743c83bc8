"""What request handlers and page callbacks share: the store, the smoothing cache and the configuration."""
from __future__ import annotations

from dataclasses import dataclass

from flask import current_app

from board.config import BoardConfig
from board.data.store import LogdirStore
from board.data.views import SmoothingCache

EXTENSION = "flowscope"


@dataclass(frozen=True, slots=True)
class BoardContext:
    config: BoardConfig
    store: LogdirStore
    smoothing: SmoothingCache


def board_context() -> BoardContext:
    return current_app.extensions[EXTENSION]
