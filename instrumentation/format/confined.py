"""Files under a root directory, opened without leaving it: no link out of the root, regular files only."""
from __future__ import annotations

import os
import stat
from typing import BinaryIO

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


class RefusedFile(OSError):
    """A file that is not opened: it is reached through a link leading outside the root, or is not a regular file
    (a FIFO would block the reader, a device could have effects when opened)."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _inside(path: str, root: str | os.PathLike[str]) -> tuple[str, list[str]]:
    """The resolved root and the components of the resolved `path` below it (RefusedFile if it leads outside)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise RefusedFile(f"{path}: not opened, it leads outside {real_root} (through a link)")
    parts = [] if real == real_root else os.path.relpath(real, real_root).split(os.sep)
    return real_root, parts


def _open_parent(real_root: str, parts: list[str], create: bool = False) -> int:
    """A descriptor of the directory holding `parts[-1]`, walked from the root one component at a time without
    following links: a component replaced by a link after `_inside` resolved it fails (ELOOP) instead."""
    fd = os.open(real_root, _DIRECTORY_FLAGS)
    try:
        for part in parts[:-1]:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            child = os.open(part, _DIRECTORY_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> BinaryIO:
    """`path` opened for binary reading if it is a regular file (and, with `root`, if neither it nor any directory
    on its way leads outside `root`); RefusedFile otherwise, FileNotFoundError if it does not exist.

    The checks hold for the descriptor itself (fstat after an O_NONBLOCK, O_NOFOLLOW open), so a file swapped
    for a FIFO or a link between a check and the open is still refused, and a FIFO never blocks the caller."""
    path = os.fspath(path)
    if root is None:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    else:
        real_root, parts = _inside(path, root)
        if not parts:
            raise RefusedFile(f"{path}: not opened, it is the directory {real_root} itself")
        parent = _open_parent(real_root, parts)
        try:
            mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
            if not stat.S_ISREG(mode):  # NOTE: devices are refused before they are opened at all
                raise RefusedFile(f"{path}: not opened, it is {_kind(mode)}, not a regular file")
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        finally:
            os.close(parent)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RefusedFile(f"{path}: not opened, it is {_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> bytes:
    """The whole content of `path`, opened with `open_regular`."""
    with open_regular(path, root) as handle:
        return handle.read()


def write_atomic(path: str | os.PathLike[str], data: bytes, root: str | os.PathLike[str]) -> None:
    """Replace `path` (below `root`) with `data`: written to a temporary file beside it, then renamed into place.

    Missing directories are created; no directory on the way may be or become a link leading outside `root`,
    the temporary file is created exclusively (never through a link) and the rename replaces a link at `path`
    instead of writing where it points."""
    path = os.fspath(path)
    real_root, parts = _inside(os.path.dirname(path), root)  # NOTE: a link at `path` itself is replaced: not resolved
    parts.append(os.path.basename(path))
    parent = _open_parent(real_root, parts, create=True)
    temporary = f"{parts[-1]}.tmp-{os.getpid()}"
    try:
        try:
            os.unlink(temporary, dir_fd=parent)  # left by an earlier process of the same pid
        except FileNotFoundError:
            pass
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            try:
                os.unlink(temporary, dir_fd=parent)
            except OSError:
                pass
            raise
    finally:
        os.close(parent)
