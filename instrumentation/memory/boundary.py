"""The tracker's view of the allocator read at step boundaries: blocks and groups from engine.memory."""
from __future__ import annotations

from typing import Iterable

from engine import memory

NO_STACK: tuple[str, ...] = ()


def block_of(b: memory.LiveBlock, stacks: bool = False) -> tuple:
    """An engine ``LiveBlock`` as the tracker's block tuple (leak.BYTES … leak.STACK); its stack is the site the
    tracker's recorder gave it (``stacks``), else none."""
    return (b.bytes, b.device, b.category, b.op, b.module, b.step, b.shape, b.dtype,
            (b.site or NO_STACK) if stacks else NO_STACK)


def live_table(blocks: Iterable[memory.LiveBlock] | None = None, stacks: bool = False) -> dict[int, tuple]:
    """buffer id → block tuple of ``blocks`` (default: everything live now)."""
    return {b.buffer_id: block_of(b, stacks) for b in (memory.live_blocks() if blocks is None else blocks)}


def live_groups(live: tuple | None = None, stacks: bool = False) -> dict[tuple, tuple[int, int]]:
    """leak.group_key → (live bytes, live blocks) of everything live now (or in a ``memory.live_set()`` record)."""
    if stacks:
        return {(device, site or NO_STACK, op, module, shape, dtype, category): counts
                for (device, site, op, module, shape, dtype, category), counts in
                memory.live_groups(live, sites=True).items()}
    return {(device, NO_STACK, op, module, shape, dtype, category): counts
            for (device, op, module, shape, dtype, category), counts in memory.live_groups(live).items()}
