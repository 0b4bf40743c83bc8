"""Alerts: diagnostics found while training, one JSON object a line in ``<run>/plugins/alerts/alerts.jsonl``."""
from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from instrumentation.format.confined import open_regular

ALERTS_RELPATH = os.path.join("plugins", "alerts", "alerts.jsonl")
SEVERITIES = ("info", "warning", "error")


@dataclass(frozen=True, slots=True)
class Alert:
    """One diagnostic: ``kind`` (see ``KINDS``; others allowed), what it is about (``subject``: a parameter,
    layer, op or tensor group), a human ``message`` and the numbers behind it (``evidence``)."""

    kind: str
    severity: str
    subject: str
    message: str
    step: int
    wall_time: float = field(default_factory=time.time)
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(_finite(asdict(self)), sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Alert:
        return cls(kind=str(record["kind"]), severity=str(record.get("severity", "warning")),
                   subject=str(record.get("subject", "")), message=str(record.get("message", "")),
                   step=int(record.get("step", 0)), wall_time=float(record.get("wall_time", 0.0)),
                   evidence=dict(record.get("evidence") or {}))


def _finite(value: Any) -> Any:
    """JSON has no NaN/Inf: write them as the strings "nan", "inf", "-inf" (evidence often holds them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:
        return _finite(value.item())  # numpy scalars
    if hasattr(value, "tolist"):
        return _finite(value.tolist())
    return value


class AlertWriter:
    """Appends alerts to a run's alerts file, one complete line per write (readers may be tailing it).

    Thread-safe. I/O errors are reported once on stderr and counted (``dropped``), never raised: alerts are
    instrumentation, and instrumentation must not crash training."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.path = os.path.join(os.fspath(run_dir), ALERTS_RELPATH)
        self.dropped = 0
        self._lock = threading.Lock()
        self._reported = False

    def write(self, alert: Alert) -> None:
        if alert.severity not in SEVERITIES:
            raise ValueError(f"alert severity must be one of {SEVERITIES}, got {alert.severity!r}")
        line = alert.to_json() + "\n"
        with self._lock:
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(line)
                    handle.flush()
            except OSError as error:
                self.dropped += 1
                if not self._reported:
                    self._reported = True
                    import sys
                    print(f"flowscope: cannot write alerts to {self.path}: {error}; further alerts to this file "
                          "are counted and dropped", file=sys.stderr)


class AlertReader:
    """Incremental reader of an alerts file: ``read()`` returns the alerts appended since the last call.

    A last line without its newline (a writer mid-write) is left for the next call; a malformed line is
    skipped and counted in ``malformed_lines``. Only a regular file is read (with ``root``: one not reached through
    a link leading outside ``root``); when the file cannot be read, ``problem`` says why and ``read()`` returns []."""

    def __init__(self, path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path)
        self.root = root
        self.offset = 0
        self.malformed_lines = 0
        self.problem: str | None = None

    def read(self) -> list[Alert]:
        try:
            with open_regular(self.path, self.root) as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            self.problem = None
            return []
        except OSError as error:
            self.problem = str(error)
            return []
        self.problem = None
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self.offset += end + 1
        alerts = []
        for line in data[:end].split(b"\n"):
            if not line.strip():
                continue
            try:
                alerts.append(Alert.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                self.malformed_lines += 1
        return alerts
