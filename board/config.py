"""The board's options, declared once: the CLI builds its parser from these fields."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from board.data.cache import default_cache_root

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6006
DEFAULT_RELOAD_INTERVAL = 5.0


@dataclass(frozen=True, slots=True)
class BoardConfig:
    logdir: Path = field(metadata={"help": "log directory to serve (waited for if it does not exist yet)"})
    host: str = field(default=DEFAULT_HOST, metadata={"help": "address to bind; non-loopback needs --token to be safe"})
    port: int = field(default=DEFAULT_PORT, metadata={"help": "port to bind; 0 picks a free one"})
    reload_interval: float = field(
        default=DEFAULT_RELOAD_INTERVAL, metadata={"help": "seconds between reads of new data from the log directory"}
    )
    token: str | None = field(
        default=None, metadata={"help": "require this token on every request (?token=… once, then a cookie) "
                                        "(default: no token)"}
    )
    cache_dir: Path | None = field(
        default=None, metadata={"help": "where decoded runs are kept for fast re-opening "
                                        "(default: $XDG_CACHE_HOME/flowscope/board, else ~/.cache/flowscope/board)"}
    )
    no_cache: bool = field(default=False, metadata={"help": "do not read or write the cache"})
    read_only: bool = field(
        default=False,
        metadata={"help": "never write into the log directory (disables the Profile page's Capture button)"},
    )

    def __post_init__(self) -> None:
        try:
            self._check_logdir()
        except OSError as error:  # e.g. a parent directory this user may not enter
            raise ValueError(f"--logdir {self.logdir} cannot be read: {error.strerror or error}") from error
        if self.reload_interval <= 0:
            raise ValueError("--reload-interval must be positive")
        if not 0 <= self.port <= 65535:
            raise ValueError("--port must be in 0..65535")
        if self.token is not None and not self.token.strip():
            # NOTE: `--token "$TOKEN"` with $TOKEN unset passes "": refusing it keeps a 0.0.0.0 board from opening.
            raise ValueError(f"--token is {'empty' if not self.token else 'only whitespace'} (an unset $TOKEN "
                             "expands to \"\"); give a secret, e.g. --token \"$(openssl rand -hex 16)\", or leave "
                             "--token out")

    def _check_logdir(self) -> None:
        """A log directory may not exist yet (it is waited for), but it must be able to: not a file, nor under one."""
        if self.logdir.exists() and not self.logdir.is_dir():
            raise ValueError(f"--logdir {self.logdir} is a file, not a directory; give the directory that holds the "
                             f"runs (e.g. {self.logdir.parent})")
        blocking = next((parent for parent in self.logdir.parents if parent.exists() and not parent.is_dir()), None)
        if blocking is not None:  # NOTE: else "does not exist yet" and a wait for a directory that can never appear
            raise ValueError(f"--logdir {self.logdir} can never exist: {blocking} is a file, not a directory")

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def allows_capture_requests(self) -> bool:
        """The one write the board does into a log directory (a profile capture request file); off with
        --read-only, and off on a non-loopback host without --token (anyone reaching it could write)."""
        return not self.read_only and (self.is_loopback or self.token is not None)

    @property
    def cache_root(self) -> Path | None:
        if self.no_cache:
            return None
        return self.cache_dir if self.cache_dir is not None else default_cache_root()

    @property
    def browser_poll_ms(self) -> int:
        """How often pages ask for new points: often enough that a point shows within one reload interval."""
        return int(min(self.reload_interval, 5.0) * 1000)
