"""The tracker's view of the allocator read at step boundaries: blocks and groups from engine.memory."""
from __future__ import annotations

from typing import Iterable

from engine import memory

NO_STACK: tuple[str, ...] = ()


def stack_of(block: memory.Block, stacks: bool) -> tuple[str, ...]:
    """A block's allocation stack as the tracker reports it: the site the tracker's recorder gave it (``stacks``),
    else none."""
    return (block.site or NO_STACK) if stacks else NO_STACK


def live_table(blocks: Iterable[memory.Block] | None = None) -> dict[int, memory.Block]:
    """buffer id → block of ``blocks`` (default: everything live now)."""
    return {b.buffer_id: b for b in (memory.live_blocks() if blocks is None else blocks)}


def live_groups(live: tuple | None = None, stacks: bool = False) -> dict[tuple, tuple[int, int]]:
    """(device, allocation stack, op, module, shape, dtype, category) → (live bytes, live blocks) of everything live
    now (or in a ``memory.live_set()`` record); the stack as ``stack_of``."""
    if stacks:
        return {(device, site or NO_STACK, op, module, shape, dtype, category): counts
                for (device, site, op, module, shape, dtype, category), counts in
                memory.live_groups(live, sites=True).items()}
    return {(device, NO_STACK, op, module, shape, dtype, category): counts
            for (device, op, module, shape, dtype, category), counts in memory.live_groups(live).items()}
