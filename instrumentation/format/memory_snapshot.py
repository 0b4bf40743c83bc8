"""Memory snapshots: ``<run>/plugins/memory/<capture_id>.snapshot.json.gz`` (gzip JSON, never pickle) — schema,
writer and reader shared by the memory tracker and the board."""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from instrumentation.format.confined import open_regular

from instrumentation.format.alert_names import LEAK, OOM

SNAPSHOT_RELDIR = os.path.join("plugins", "memory")
SNAPSHOT_SUFFIX = ".snapshot.json.gz"
MANUAL, PEAK = "manual", "peak"
# ``phase``: what the process was doing when the snapshot was taken (gradients on: training; off: an evaluation,
# e.g. under ``engine.no_grad()``); "" when the writer did not say
TRAINING, EVALUATION = "training", "evaluation"
PHASES = (TRAINING, EVALUATION)
REASONS = (MANUAL, PEAK, OOM, LEAK)  # the last two: the snapshot written with that alert
_CAPTURE_ID = re.compile(r"^\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}(_\d+)?$")


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """One live buffer: where it was allocated (``stack``: user frames "file:line function", innermost first)."""

    bytes: int
    shape: tuple[int, ...]
    dtype: str
    op: str
    module: str
    step: int
    stack: tuple[str, ...] = ()
    category: str = ""  # parameter | gradient | optimizer_state | activation | temporary | input (an extension)


@dataclass(frozen=True, slots=True)
class AllocatorState:
    """Allocator figures when the snapshot was taken. On the CPU there is no pool: ``reserved`` = ``allocated``
    and ``largest_free_block`` = ``limit - allocated`` (None without a limit); ``fragmentation`` = 1 -
    largest_free_block / free bytes (0 on the CPU)."""

    allocated: int
    reserved: int
    peak: int
    limit: int | None
    largest_free_block: int | None
    fragmentation: float = 0.0


@dataclass(frozen=True, slots=True)
class Requested:
    """The allocation that failed (OOM snapshots only)."""

    bytes: int
    op: str
    module: str


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    t: float  # seconds since the tracker started
    action: str  # "alloc" | "free"
    bytes: int
    op: str
    step: int


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    device: str
    reason: str
    step: int
    wall_time: float
    allocator: AllocatorState
    blocks: tuple[MemoryBlock, ...]
    history: tuple[HistoryEntry, ...] = ()
    requested: Requested | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the leak groups of a "leak" snapshot
    phase: str = ""  # TRAINING | EVALUATION | "" (unknown)

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        if self.requested is None:
            del record["requested"]
        # NOTE: the header fields (phase included) before the blocks: read_snapshot_header reads only them
        phase = record.pop("phase")
        return {**{key: record.pop(key) for key in ("device", "reason", "step", "wall_time", "allocator")},
                "phase": phase, **record}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> MemorySnapshot:
        try:
            allocator = record["allocator"]
            requested = record.get("requested")
            return cls(
                device=str(record["device"]), reason=str(record["reason"]), step=int(record["step"]),
                wall_time=float(record["wall_time"]),
                allocator=AllocatorState(int(allocator["allocated"]),
                                         int(allocator.get("reserved", allocator["allocated"])),
                                         int(allocator.get("peak", allocator["allocated"])),
                                         _int_or_none(allocator.get("limit")),
                                         _int_or_none(allocator.get("largest_free_block")),
                                         float(allocator.get("fragmentation", 0.0))),
                blocks=tuple(MemoryBlock(int(b["bytes"]), tuple(int(d) for d in b.get("shape", ())),
                                         str(b.get("dtype", "")), str(b.get("op", "")), str(b.get("module", "")),
                                         int(b.get("step", 0)),
                                         tuple(str(s) for s in b.get("stack", ())), str(b.get("category", "")))
                             for b in record.get("blocks", ())),
                history=tuple(HistoryEntry(float(h["t"]), str(h["action"]), int(h["bytes"]), str(h.get("op", "")),
                                           int(h.get("step", 0))) for h in record.get("history", ())),
                requested=None if requested is None else Requested(int(requested["bytes"]),
                                                                   str(requested.get("op", "")),
                                                                   str(requested.get("module", ""))),
                extra=dict(record.get("extra") or {}), phase=str(record.get("phase", "")),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a memory snapshot: {type(error).__name__}: {error}") from error


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    """A snapshot found on disk, before it is read: ``capture_id`` is its name without the suffix."""

    capture_id: str
    path: str
    size_bytes: int
    mtime: float


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    """What a snapshot list shows, read from the first kilobytes of the file (``read_snapshot_header``)."""

    device: str
    reason: str
    step: int
    wall_time: float
    allocated_bytes: int
    peak_bytes: int
    phase: str = ""  # TRAINING | EVALUATION | "" (unknown)


_HEADER_READ_BYTES = 4096
_BLOCKS_KEY = ',"blocks":'


def _open_text(path: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> TextIO:
    """The decompressed text of a snapshot file (a regular file; with ``root``, one that stays below it)."""
    return io.TextIOWrapper(gzip.GzipFile(fileobj=open_regular(path, root), mode="rb"), encoding="utf-8")


def read_snapshot_header(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
                         ) -> SnapshotHeader | None:
    """Device, reason, step, wall time and allocator figures without reading the blocks: ``write_snapshot`` puts
    them first. None when the file does not start that way (then read the whole snapshot) or cannot be read."""
    try:
        with _open_text(path, root) as handle:
            head = handle.read(_HEADER_READ_BYTES)
        end = head.find(_BLOCKS_KEY)
        if end < 0:
            return None
        record = json.loads(head[:end] + "}")
        allocator = record["allocator"]
        return SnapshotHeader(str(record["device"]), str(record["reason"]), int(record["step"]),
                              float(record["wall_time"]), int(allocator["allocated"]),
                              int(allocator.get("peak", allocator["allocated"])), str(record.get("phase", "")))
    except (OSError, EOFError, ValueError, KeyError, TypeError):
        return None


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def snapshot_dir(run_dir: str | os.PathLike[str]) -> str:
    return os.path.join(os.fspath(run_dir), SNAPSHOT_RELDIR)


def new_capture_id(run_dir: str | os.PathLike[str], wall_time: float | None = None) -> str:
    """A UTC ``YYYY_MM_DD_HH_MM_SS`` (``_<n>`` appended when that name is taken), as TensorBoard's profiler names."""
    base = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime(time.time() if wall_time is None else wall_time))
    directory, candidate, n = snapshot_dir(run_dir), base, 0
    while os.path.exists(os.path.join(directory, candidate + SNAPSHOT_SUFFIX)):
        n += 1
        candidate = f"{base}_{n}"
    return candidate


def write_snapshot(run_dir: str | os.PathLike[str], snapshot: MemorySnapshot, capture_id: str | None = None) -> str:
    """Write atomically (temporary file, then rename) so the board never reads half a snapshot; returns the path."""
    if snapshot.reason not in REASONS:
        raise ValueError(f"snapshot reason must be one of {REASONS}, got {snapshot.reason!r}")
    capture_id = capture_id or new_capture_id(run_dir, snapshot.wall_time)
    if not _CAPTURE_ID.match(capture_id):
        raise ValueError(f"capture id must look like YYYY_MM_DD_HH_MM_SS[_n], got {capture_id!r}")
    directory = snapshot_dir(run_dir)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, capture_id + SNAPSHOT_SUFFIX)
    partial = path + f".{os.getpid()}.partial"
    with gzip.open(partial, "wt", encoding="utf-8", compresslevel=3) as handle:
        json.dump(snapshot.to_dict(), handle, separators=(",", ":"), allow_nan=False)
    os.replace(partial, path)
    return path


def read_snapshot(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> MemorySnapshot:
    """Parse one snapshot file; ValueError naming the file when it cannot be read (not a regular file, or with
    ``root`` a link leading outside it) or is not gzip JSON of this schema."""
    try:
        with _open_text(path, root) as handle:
            record = json.load(handle)
    except (gzip.BadGzipFile, EOFError, ValueError) as error:
        raise ValueError(f"{os.fspath(path)}: not a gzip JSON memory snapshot ({error})") from error
    except OSError as error:
        raise ValueError(f"{os.fspath(path)}: unreadable memory snapshot ({error})") from error
    if not isinstance(record, dict):
        raise ValueError(f"{os.fspath(path)}: a memory snapshot is a JSON object, got {type(record).__name__}")
    try:
        return MemorySnapshot.from_dict(record)
    except ValueError as error:
        raise ValueError(f"{os.fspath(path)}: {error}") from error


def list_snapshots(run_dir: str | os.PathLike[str]) -> list[SnapshotFile]:
    """The run's snapshot files, oldest first (capture ids sort by time)."""
    directory = snapshot_dir(run_dir)
    found = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.endswith(SNAPSHOT_SUFFIX):
            continue
        capture_id = entry.name[: -len(SNAPSHOT_SUFFIX)]
        if not _CAPTURE_ID.match(capture_id):
            continue
        try:
            stat = entry.stat()
        except OSError:
            continue
        found.append(SnapshotFile(capture_id, entry.path, stat.st_size, stat.st_mtime))
    return sorted(found, key=lambda f: _sort_key(f.capture_id))


def _sort_key(capture_id: str) -> tuple[str, int]:
    suffix = capture_id[20:]  # "" or the "_<n>" counter
    return capture_id[:19], int(suffix) if suffix else 0
