"""A run's decoded points saved as plain .npy columns, so that re-opening a log directory skips decoding.

Layout: `<cache_root>/<hash of the log directory>/<hash of the run name>/` holding `manifest.json` and one
`.npy` file per column. Nothing is pickled (`np.load(..., allow_pickle=False)`), columns are memory-mapped, and
an entry is used only if every event file it describes is at least as long as the offset it was read to and
those first `offset` bytes still have the CRC-32C recorded (every byte that was decoded is checked, so an edit
anywhere in them is caught); the reader then resumes from that offset.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from google_crc32c import extend as crc32c_extend

from board.data.histograms import HistogramColumns, HistogramSeries
from board.data.plugin_data import PluginData
from board.data.series import ScalarColumns, ScalarSeries
from instrumentation.format.confined import open_regular

FORMAT_VERSION = 4  # 2: histograms as columns (sum and sum_squares kept); 3: CRC of every byte read, not 4 KiB;
# 4: other plugins' values (text, images, ...) in plugin_values.json
PREFIX_CHUNK_BYTES = 16 << 20
_SCALAR_COLUMNS = ("steps", "wall_times", "values")
_HISTOGRAM_COLUMNS = ("hist_steps", "hist_stats", "hist_edges", "hist_counts", "hist_offsets")
_HIST_STATS = ("wall_times", "mins", "maxs", "nums", "sums", "sum_squares")  # hist_stats' columns


def default_cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flowscope" / "board"


def run_cache_dir(cache_root: Path, logdir: Path, run: str) -> Path:
    logdir_key = hashlib.sha256(str(Path(logdir).resolve()).encode()).hexdigest()[:16]
    run_key = hashlib.sha256(run.encode()).hexdigest()[:16]
    return cache_root / logdir_key / run_key


def prefix_crc32c(path: Path, length: int) -> int:
    """CRC-32C of the first `length` bytes of `path` (a regular file; OSError if shorter), read in 16 MiB chunks
    into one buffer (a new bytes object per chunk made reading 3x slower: fresh pages to fault in each time)."""
    crc = 0
    buffer = np.empty(min(length, PREFIX_CHUNK_BYTES), np.uint8)
    with open_regular(path) as file:
        while length > 0:
            chunk = buffer[:min(length, len(buffer))]
            read = file.readinto(chunk)
            if not read:
                raise OSError(f"{path} is shorter than the {length} bytes expected")
            crc = crc32c_extend(crc, chunk[:read])
            length -= read
    return crc


@dataclass(frozen=True, slots=True)
class FileMark:
    """How far one event file was read."""

    name: str
    offset: int
    corrupt_records: int
    prefix_crc32c: int  # of the file's first `offset` bytes
    problem: str | None = None  # the reader's line about the bytes it skipped (EventFileReader.problem)


@dataclass(frozen=True, slots=True)
class CachedRun:
    files: tuple[FileMark, ...]
    scalars: dict[str, ScalarSeries]
    histograms: dict[str, HistogramSeries]
    last_update: float | None
    points: int
    plugin_data: PluginData


def save(directory: Path, files: list[FileMark], scalars: dict[str, ScalarSeries],
         histograms: dict[str, HistogramSeries], last_update: float | None,
         plugin_data: PluginData | None = None) -> None:
    """Write the entry next to the old one and swap the manifest in last, so a reader never sees a torn entry."""
    directory.mkdir(parents=True, exist_ok=True)
    tags = sorted(scalars)
    columns = [scalars[tag].columns() for tag in tags]
    arrays: dict[str, np.ndarray] = {
        "steps": np.concatenate([c.steps for c in columns]) if columns else np.empty(0, np.int64),
        "wall_times": np.concatenate([c.wall_times for c in columns]) if columns else np.empty(0),
        "values": np.concatenate([c.values for c in columns]) if columns else np.empty(0),
    }
    hist_tags = sorted(histograms)
    hist = HistogramColumns.concatenate([histograms[tag].columns() for tag in hist_tags]) if hist_tags \
        else HistogramColumns.empty()
    arrays["hist_steps"] = np.asarray(hist.steps, np.int64)
    arrays["hist_stats"] = np.stack([getattr(hist, name) for name in _HIST_STATS], axis=1).astype(np.float64)
    arrays["hist_edges"] = np.asarray(hist.edges, np.float64)
    arrays["hist_counts"] = np.asarray(hist.counts, np.float64)
    arrays["hist_offsets"] = np.asarray(hist.offsets, np.int64)
    generation = f"{os.getpid()}-{time.time_ns()}"
    for name, array in arrays.items():
        np.save(directory / f"{name}.{generation}.npy", array, allow_pickle=False)
    (directory / f"plugin_values.{generation}.json").write_text(json.dumps((plugin_data or PluginData()).to_json()))
    manifest = {
        "version": FORMAT_VERSION,
        "generation": generation,
        "files": [asdict(mark) for mark in files],
        "scalars": [[tag, len(c), scalars[tag].superseded] for tag, c in zip(tags, columns)],
        "histograms": [[tag, len(histograms[tag]), histograms[tag].superseded] for tag in hist_tags],
        "last_update": last_update,
    }
    temporary = directory / f"manifest.{generation}.json"
    temporary.write_text(json.dumps(manifest))
    old = _read_manifest(directory)
    os.replace(temporary, directory / "manifest.json")
    if old is not None:
        for name in (*_SCALAR_COLUMNS, *_HISTOGRAM_COLUMNS):
            (directory / f"{name}.{old['generation']}.npy").unlink(missing_ok=True)
        (directory / f"plugin_values.{old['generation']}.json").unlink(missing_ok=True)


def valid_manifest(directory: Path, run_path: Path, check_content: bool = True) -> dict | None:
    """The entry's manifest if every event file it describes still matches it; None otherwise.

    `check_content=False` checks only the lengths (no hashing): enough to guess whether a run needs decoding."""
    manifest = _read_manifest(directory)
    if manifest is None or manifest.get("version") != FORMAT_VERSION:
        return None
    try:
        for entry in manifest["files"]:
            path = run_path / entry["name"]
            if path.stat().st_size < entry["offset"] or \
                    check_content and prefix_crc32c(path, entry["offset"]) != entry["prefix_crc32c"]:
                return None
    except (OSError, KeyError, TypeError, ValueError):  # a file gone or unreadable, or a damaged manifest
        return None
    return manifest


def load(directory: Path, run_path: Path) -> CachedRun | None:
    """The cached points of a run, or None if there is no entry or the files no longer match it.

    Every column is memory-mapped: pages are read when first touched, and stay reclaimable page cache.
    """
    manifest = valid_manifest(directory, run_path)
    if manifest is None:
        return None
    generation = manifest["generation"]
    try:
        arrays = {name: np.load(directory / f"{name}.{generation}.npy", allow_pickle=False,
                                mmap_mode="r")
                  for name in (*_SCALAR_COLUMNS, *_HISTOGRAM_COLUMNS)}
        plugin_data = PluginData.from_json(json.loads((directory / f"plugin_values.{generation}.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    scalars: dict[str, ScalarSeries] = {}
    start = 0
    for tag, rows, superseded in manifest["scalars"]:
        stop = start + rows
        series = ScalarSeries(ScalarColumns(*(np.asarray(arrays[name][start:stop]) for name in _SCALAR_COLUMNS)))
        series.superseded = superseded
        scalars[tag] = series
        start = stop
    if start != len(arrays["steps"]):
        return None
    histograms = _histograms(manifest["histograms"], arrays)
    if histograms is None:
        return None
    marks = tuple(FileMark(**entry) for entry in manifest["files"])
    return CachedRun(marks, scalars, histograms, manifest["last_update"],
                     start + len(arrays["hist_steps"]) + len(plugin_data), plugin_data)


def _histograms(entries: list, arrays: dict[str, np.ndarray]) -> dict[str, HistogramSeries] | None:
    offsets = np.asarray(arrays["hist_offsets"])
    stats = np.asarray(arrays["hist_stats"])
    total = len(arrays["hist_steps"])
    if stats.shape != (total, len(_HIST_STATS)) or len(offsets) != total + 1 or \
            len(arrays["hist_counts"]) != offsets[-1] or len(arrays["hist_edges"]) != offsets[-1] + total:
        return None
    whole = HistogramColumns(np.asarray(arrays["hist_steps"]), *(stats[:, k] for k in range(len(_HIST_STATS))), offsets,
                             np.asarray(arrays["hist_counts"]), np.asarray(arrays["hist_edges"]))
    result: dict[str, HistogramSeries] = {}
    index = 0
    for tag, count, superseded in entries:
        series = HistogramSeries(whole.slice(index, index + count))
        series.superseded = superseded
        result[tag] = series
        index += count
    return result if index == total else None


def _read_manifest(directory: Path) -> dict | None:
    try:
        return json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
