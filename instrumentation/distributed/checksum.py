"""Replica agreement: a crc32 of each parameter's bytes, their 24-bit combination, and which parameters of a rank
differ from the reference rank's (``replica_divergence``)."""
from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from instrumentation.format import alert_names as keys
from instrumentation.format.alerts import Alert
from instrumentation.format.ranks import rank_name

CHECKSUM_BITS = 24  # a float32 holds every integer below 2**24 exactly: the scalar is the checksum itself
CHECKSUM_MASK = (1 << CHECKSUM_BITS) - 1
REFERENCE_RANK = 0
MAX_NAMED_PARAMETERS = 32  # named in an alert's evidence (the message gives the count)
_FAILED = -1  # a rank whose checksums could not be computed sends this header: no rank compares that time


def parameter_checksums(parameters: Sequence[Any]) -> np.ndarray:
    """The crc32 of each parameter's bytes (C order, as stored), as int64."""
    return np.array([zlib.crc32(np.ascontiguousarray(param.numpy())) for param in parameters], dtype=np.int64)


def combined_checksum(checksums: np.ndarray) -> int:
    """The low ``CHECKSUM_BITS`` bits of the crc32 of the parameters' crc32s (little-endian uint32, in order)."""
    return zlib.crc32(np.asarray(checksums, dtype="<u4").tobytes()) & CHECKSUM_MASK


class ReplicaCheck:
    """Compares this rank's parameters with the reference rank's. ``run(step)`` makes the same collective calls on
    every rank: one ``all_gather`` of ``[parameter count, combined checksum]``, and only when the counts agree and a
    combined checksum differs from the reference's, one of the per-parameter crc32s. It returns this rank's combined
    checksum (None if it could not be computed) and an alert when this rank differs and did not at the last check (an
    episode is reported once)."""

    def __init__(self, named_parameters: Sequence[tuple[str, Any]], rank: int,
                 all_gather: Callable[[np.ndarray], np.ndarray]) -> None:
        self.names = [name for name, _ in named_parameters]
        self.parameters = [param for _, param in named_parameters]
        self.rank, self.all_gather = rank, all_gather
        self.diverged = False
        self.failure: Exception | None = None  # the last local failure (reported by the caller), None when it worked

    def run(self, step: int) -> tuple[int | None, Alert | None]:
        try:
            checksums = parameter_checksums(self.parameters)
            header = np.array([len(checksums), combined_checksum(checksums)], dtype=np.int64)
            self.failure = None
        except Exception as error:  # noqa: BLE001 - the collective calls must still happen, with a header saying so
            checksums, header, self.failure = None, np.array([_FAILED, _FAILED], dtype=np.int64), error
        headers = np.asarray(self.all_gather(header)).reshape(-1, 2)
        counts, combined = headers[:, 0], headers[:, 1]
        if (counts == _FAILED).any() or checksums is None:
            return (None if checksums is None else int(header[1])), None
        reference = combined[REFERENCE_RANK]
        if (counts != counts[REFERENCE_RANK]).any():
            return int(header[1]), self._count_alert(step, int(counts[REFERENCE_RANK]), int(header[0]), headers)
        if (combined == reference).all():
            self.diverged = False
            return int(header[1]), None
        every = np.asarray(self.all_gather(checksums)).reshape(len(headers), -1)
        if combined[self.rank] == reference:
            self.diverged = False
            return int(header[1]), None
        return int(header[1]), self._divergence(step, checksums, every[REFERENCE_RANK], int(reference))

    def _divergence(self, step: int, own: np.ndarray, reference: np.ndarray, reference_checksum: int) -> Alert | None:
        if self.diverged:
            return None
        self.diverged = True
        differing = np.flatnonzero(own != reference).tolist()
        named = differing[:MAX_NAMED_PARAMETERS]
        shown = ", ".join(self.names[i] for i in named[:3]) + (", ..." if len(differing) > 3 else "")
        own_checksum = combined_checksum(own)
        return Alert(keys.REPLICA_DIVERGENCE, "error", rank_name(self.rank),
                     f"{rank_name(self.rank)}'s parameters differ from {rank_name(REFERENCE_RANK)}'s at step {step}: "
                     f"{len(differing)} of {len(own)} ({shown}); checksum {own_checksum:06x} vs "
                     f"{reference_checksum:06x}",
                     step, evidence={keys.PARAMETERS: [self.names[i] for i in named],
                                     keys.CHECKSUM: own_checksum, keys.REFERENCE_CHECKSUM: reference_checksum,
                                     keys.REFERENCE_RANK: REFERENCE_RANK, keys.RANK: self.rank,
                                     keys.PARAMETER_CHECKSUMS: {self.names[i]: [int(own[i]), int(reference[i])]
                                                                for i in named}})

    def _count_alert(self, step: int, reference_count: int, own_count: int, headers: np.ndarray) -> Alert | None:
        if own_count == reference_count or self.diverged:
            return None
        self.diverged = True
        return Alert(keys.REPLICA_DIVERGENCE, "error", rank_name(self.rank),
                     f"{rank_name(self.rank)} has {own_count} parameters, {rank_name(REFERENCE_RANK)} has "
                     f"{reference_count}", step,
                     evidence={keys.PARAMETERS: [], keys.CHECKSUM: int(headers[self.rank, 1]),
                               keys.REFERENCE_CHECKSUM: int(headers[REFERENCE_RANK, 1]),
                               keys.REFERENCE_RANK: REFERENCE_RANK, keys.RANK: self.rank, keys.PARAMETER_CHECKSUMS: {}})
