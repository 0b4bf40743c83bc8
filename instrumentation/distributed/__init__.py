"""Data-parallel training: a run per rank, the rank monitor (communication figures, straggler, replica checksums)."""
from __future__ import annotations

from instrumentation.distributed.context import flush_at_abort, rank_and_world_size, rank_logdir
from instrumentation.distributed.monitor import DEFAULT_CHECKSUM_EVERY, RankMonitor

__all__ = ["DEFAULT_CHECKSUM_EVERY", "RankMonitor", "flush_at_abort", "rank_and_world_size", "rank_logdir"]
