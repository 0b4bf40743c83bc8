"""Alerts of every run (``<run>/plugins/alerts/alerts.jsonl``), read incrementally with the format's AlertReader."""
from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

from board.data.store import LogdirStore
from instrumentation.format.alerts import ALERTS_RELPATH, SEVERITIES, Alert, AlertReader


@dataclass(frozen=True, slots=True)
class RunAlert:
    """One alert and the run that raised it."""

    run: str
    alert: Alert


@dataclass(frozen=True, slots=True)
class AlertFilter:
    """Which alerts to list: empty tuples mean every kind / severity / run."""

    kinds: tuple[str, ...] = ()
    severities: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()

    def accepts(self, item: RunAlert) -> bool:
        return ((not self.kinds or item.alert.kind in self.kinds)
                and (not self.severities or item.alert.severity in self.severities)
                and (not self.runs or item.run in self.runs))


class AlertIndex:
    """The alerts of the store's runs, tailed on each call (each file is read from where the last read stopped)."""

    def __init__(self, store: LogdirStore) -> None:
        self.store = store
        self._readers: dict[str, AlertReader] = {}
        self._alerts: dict[str, list[Alert]] = {}
        self._lock = threading.Lock()

    def refresh(self) -> None:
        runs = [summary.name for summary in self.store.runs()]
        with self._lock:
            for gone in set(self._readers) - set(runs):
                del self._readers[gone], self._alerts[gone]
            for run in runs:
                reader = self._readers.get(run)
                if reader is None:
                    reader = self._readers[run] = AlertReader(self.store.logdir / run / ALERTS_RELPATH,
                                                              root=self.store.logdir)
                    self._alerts[run] = []
                self._alerts[run].extend(reader.read())

    def alerts(self, selection: AlertFilter = AlertFilter()) -> list[RunAlert]:
        """Matching alerts of every run, by step then run (what happened first comes first)."""
        self.refresh()
        with self._lock:
            items = [RunAlert(run, alert) for run, alerts in self._alerts.items() for alert in alerts]
        items = [item for item in items if selection.accepts(item)]
        return sorted(items, key=lambda item: (item.alert.step, item.run, item.alert.wall_time))

    def problems(self) -> dict[str, str]:
        """Run → why its alerts file was not read (a link leading outside the log directory, not a regular file,
        unreadable), for the runs whose file could not be read at the last refresh."""
        with self._lock:
            return {run: reader.problem for run, reader in sorted(self._readers.items()) if reader.problem}

    def kinds(self) -> list[str]:
        with self._lock:
            return sorted({alert.kind for alerts in self._alerts.values() for alert in alerts})


SEVERITY_RANK = {severity: index for index, severity in enumerate(SEVERITIES)}  # info < warning < error


@dataclass(frozen=True, slots=True)
class KindSummary:
    """One kind of alert in one run: how many, the worst severity and the first one (where to look)."""

    kind: str
    count: int
    severity: str
    first: RunAlert


def summarize(items: list[RunAlert], runs: list[str]) -> dict[str, list[KindSummary]]:
    """Run → its alert kinds in the order first raised (``items`` oldest step first, as ``AlertIndex.alerts``
    gives them); every run of ``runs`` is a key, a run without alerts maps to []."""
    by_run: dict[str, dict[str, list[RunAlert]]] = {run: {} for run in runs}
    for item in items:
        by_run.setdefault(item.run, {}).setdefault(item.alert.kind, []).append(item)
    return {run: [KindSummary(kind, len(found), _worst(item.alert.severity for item in found), found[0])
                  for kind, found in kinds.items()] for run, kinds in by_run.items()}


def _worst(severities: Iterable[str]) -> str:
    return max(severities, key=lambda severity: SEVERITY_RANK.get(severity, -1))


_indexes: weakref.WeakKeyDictionary[LogdirStore, AlertIndex] = weakref.WeakKeyDictionary()
_indexes_lock = threading.Lock()


def alert_index(store: LogdirStore) -> AlertIndex:
    """The one index of ``store`` (created on first use; it lives as long as the store)."""
    with _indexes_lock:
        index = _indexes.get(store)
        if index is None:
            index = _indexes[store] = AlertIndex(store)
        return index


__all__ = ["SEVERITIES", "AlertFilter", "AlertIndex", "SEVERITY_RANK", "KindSummary", "RunAlert", "alert_index",
           "summarize"]
