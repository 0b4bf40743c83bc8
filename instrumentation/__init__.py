"""Everything that observes training and writes files; `SummaryWriter` is loaded on first use."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from instrumentation.summary import SummaryWriter

__all__ = ["SummaryWriter"]


def __getattr__(name: str) -> Any:
    # NOTE: lazy, so that `import instrumentation.format` (all the board needs) never loads the writer.
    if name == "SummaryWriter":
        from instrumentation.summary import SummaryWriter

        return SummaryWriter
    raise AttributeError(f"module 'instrumentation' has no attribute {name!r}")
