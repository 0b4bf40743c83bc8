"""Find runs in a log directory: a run is any directory holding event files; its name is its relative path."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from board.data.reader import is_event_file

_RANK = re.compile(r"rank\d+")
ROOT_RUN = "."


@dataclass(frozen=True, slots=True)
class RunLocation:
    name: str  # relative path with "/" separators; "." for event files directly in the log directory
    path: Path
    event_files: tuple[str, ...]  # file names in read order (TensorBoard's names sort by creation time)
    problem: str | None = None  # why the directory could not be listed (it is then a run with no files)


def run_group(name: str) -> str:
    """`exp/rank3` belongs to group `exp`; any other run is its own group."""
    head, _, last = name.rpartition("/")
    return (head or ROOT_RUN) if _RANK.fullmatch(last) else name


def discover_runs(logdir: Path) -> dict[str, RunLocation]:
    """Every run under `logdir`, by name. Links that lead outside the log directory are not followed.

    A directory that cannot be listed (no permission) may hold event files: it is returned as a run whose `problem`
    says so, never left out silently."""
    root = logdir.resolve()
    runs: dict[str, RunLocation] = {}
    if not root.is_dir():
        return runs
    pending = [root]
    seen: set[Path] = set()
    while pending:
        directory = pending.pop()
        real = directory.resolve()
        if real in seen or not real.is_relative_to(root):
            continue
        seen.add(real)
        files: list[str] = []
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):  # deleted while we looked
            continue
        except OSError as error:
            name = _run_name(root, directory)
            runs[name] = RunLocation(name, directory, (), f"directory not readable: {error.strerror or error}")
            continue
        for entry in entries:
            try:
                if entry.is_dir():
                    pending.append(Path(entry.path))
                elif entry.is_file() and is_event_file(entry.name) and Path(entry.path).resolve().is_relative_to(root):
                    files.append(entry.name)
            except OSError:
                continue
        if files:
            name = _run_name(root, directory)
            runs[name] = RunLocation(name, directory, tuple(sorted(files)))
    return runs


def _run_name(root: Path, directory: Path) -> str:
    relative = directory.relative_to(root).as_posix()
    return ROOT_RUN if relative == "." else relative
