"""Each run's place in the colour order: groups in the order they were created, ranks by their number (no Dash here).

A run keeps its slot while the board runs (a run that appears later takes the lowest free one) and gets the same one
from a new board on the same log directory: groups are ordered by when their first event file was created, which
its name says (`events.out.tfevents.<unix_ts>.<host>.<pid>.<n>`, `<n>` counting the writer process's files), then
by name."""
from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from board.data.discovery import RunLocation, run_group
from instrumentation.format.metadata import EVENT_FILE_PREFIX

_CREATED = re.compile(re.escape(EVENT_FILE_PREFIX) + r"(\d+)\.(.*)\.(\d+)\.(\d+)")
_RANK = re.compile(r"rank(\d+)")
UNKNOWN_CREATION = (float("inf"), "", 0, 0)  # a file named otherwise sorts after every named one

CreationKey = tuple[float, str, int, int]


@dataclass(frozen=True, slots=True)
class RunSlot:
    """`group`: the slot of the run's group (`exp` for `exp/rank3`); `rank`: N of `<group>/rank<N>`, else None."""

    group: int
    rank: int | None


def creation_key(location: RunLocation) -> CreationKey:
    """(unix time, host, pid, file number) of the run's first event file, from its name."""
    keys = [(float(m[1]), m[2], int(m[3]), int(m[4])) for name in location.event_files
            if (m := _CREATED.match(name)) is not None]
    return min(keys, default=UNKNOWN_CREATION)


def rank_of(run: str) -> int | None:
    """N for `<group>/rank<N>` (a rank of a job), None for any other run."""
    found = _RANK.fullmatch(run.rpartition("/")[2])
    return int(found[1]) if found is not None and run_group(run) != run else None


class RunSlots:
    """Group → slot, thread-safe. `assign` after each pass over the log directory; `slot` from any thread."""

    def __init__(self) -> None:
        self._groups: dict[str, int] = {}
        self._lock = threading.Lock()

    def assign(self, created: Mapping[str, CreationKey]) -> None:
        """Give the groups of the runs in `created` (run → creation key) that hold no slot the lowest free slots,
        oldest first; the slots of groups with no run left are freed."""
        first: dict[str, tuple[CreationKey, str]] = {}
        for run, key in created.items():
            group = run_group(run)
            first[group] = min(first.get(group, (key, group)), (key, group))
        with self._lock:
            for gone in set(self._groups) - set(first):
                del self._groups[gone]
            self._take(sorted((key, group) for group, key in ((g, k[0]) for g, k in first.items())
                              if group not in self._groups))

    def _take(self, ordered: Iterable[tuple[CreationKey, str]]) -> None:
        used = set(self._groups.values())
        free = 0
        for _, group in ordered:
            while free in used:
                free += 1
            self._groups[group] = free
            used.add(free)

    def slot(self, run: str) -> RunSlot:
        """The run's slot; a run not seen by `assign` yet takes the next free one now."""
        group = run_group(run)
        with self._lock:
            if group not in self._groups:
                self._take([(UNKNOWN_CREATION, group)])
            return RunSlot(self._groups[group], rank_of(run))
