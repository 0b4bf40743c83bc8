"""The tracker's view of the allocator read at step boundaries (stacks off): blocks and groups from engine.memory."""
from __future__ import annotations

from typing import Iterable

from engine import memory

NO_STACK: tuple[str, ...] = ()


def block_of(b: memory.LiveBlock) -> tuple:
    """An engine ``LiveBlock`` as the tracker's block tuple (leak.BYTES … leak.STACK), without a stack."""
    return (b.bytes, b.device, b.category, b.op, b.module, b.step, b.shape, b.dtype, NO_STACK)


def live_table(blocks: Iterable[memory.LiveBlock] | None = None) -> dict[int, tuple]:
    """buffer id → block tuple of ``blocks`` (default: everything live now)."""
    return {b.buffer_id: block_of(b) for b in (memory.live_blocks() if blocks is None else blocks)}


def live_groups(live: tuple | None = None) -> dict[tuple, tuple[int, int]]:
    """leak.group_key → (live bytes, live blocks) of everything live now (or in a ``memory.live_set()`` record), as
    the event path keeps them."""
    return {(device, NO_STACK, op, module, shape, dtype, category): counts
            for (device, op, module, shape, dtype, category), counts in memory.live_groups(live).items()}
