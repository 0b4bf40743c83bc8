"""The ``fragmentation`` alert: a device pool holding much memory that the current requests cannot use."""
from __future__ import annotations

from typing import Any

from instrumentation.format import alert_names as names
from instrumentation.format.alerts import Alert
from instrumentation.format.units import format_bytes

# It fires when the free bytes in chunks too small for the current request size are at least this share of the
# reserved bytes and at least FRAGMENTATION_MIN_BYTES; it fires again for a device only after the share fell below
# half the threshold (a pool that stays fragmented is one alert, not one per batch).
FRAGMENTATION_THRESHOLD = 0.3
FRAGMENTATION_MIN_BYTES = 64 * 1024 * 1024


class FragmentationWatch:
    """Reads a pooled allocator's figures (``engine.memory.PoolStats``-like: ``device``, ``allocated_bytes``,
    ``reserved_bytes``, ``request_bytes``, ``fragmentation_bytes``, ``largest_free_block``) and returns the alert to
    write, if any."""

    def __init__(self, threshold: float = FRAGMENTATION_THRESHOLD, min_bytes: int = FRAGMENTATION_MIN_BYTES) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"fragmentation threshold must be a share in (0, 1), got {threshold!r}")
        if min_bytes < 0:
            raise ValueError(f"fragmentation min_bytes must be >= 0, got {min_bytes!r}")
        self.threshold, self.min_bytes = threshold, min_bytes
        self._fired: set[str] = set()

    def observe(self, stats: Any, step: int) -> Alert | None:
        fragmented, reserved = stats.fragmentation_bytes, stats.reserved_bytes
        if fragmented is None or reserved <= 0:
            return None  # the pool does not expose its free chunks
        share = fragmented / reserved
        device = stats.device
        if device in self._fired:
            if share < self.threshold / 2:
                self._fired.discard(device)
            return None
        if share < self.threshold or fragmented < self.min_bytes:
            return None
        self._fired.add(device)
        return Alert(
            kind=names.FRAGMENTATION, severity="warning", subject=device, step=step,
            message=(f"{format_bytes(fragmented)} of the {format_bytes(reserved)} reserved on {device} ({share:.0%}, "
                     f"threshold {self.threshold:.0%}) lie in free chunks smaller than the current request size "
                     f"({format_bytes(stats.request_bytes)}): the pool must reserve more for such requests. Allocate "
                     f"long-lived buffers first, keep batch shapes fixed, or turn memory growth off "
                     f"(engine.cuda.set_memory_growth(False)) to serve requests from one up-front reservation"),
            evidence={"device": device, names.FRAGMENTATION_BYTES: fragmented, names.FRAGMENTATION_SHARE: share,
                      names.RESERVED_BYTES: reserved, names.ALLOCATED_BYTES: stats.allocated_bytes,
                      names.REQUEST_BYTES: stats.request_bytes, names.LARGEST_FREE_BLOCK: stats.largest_free_block,
                      names.THRESHOLD: self.threshold})
