"""Is a port free to serve on: the board asks before it binds, and `make demo` asks before it trains (minutes).

`python -m board.port_check --port 6006 --choose-with "make demo PORT=<n>"` exits 0 when the port is free, else 1
with one line saying how to choose another the way the caller sets it (`<n>` stands for the port)."""
from __future__ import annotations

import argparse
import errno
import socket
import sys
from collections.abc import Sequence

from board.config import DEFAULT_HOST

BOARD_CHOICE = "--port <n>"  # how the `board` command sets its port


def port_in_use(host: str, port: int) -> bool:
    """Werkzeug prints its own multi-line message and exits on a busy port, so ask first (as it binds)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            return error.errno == errno.EADDRINUSE
    return False


def busy_port_message(host: str, port: int, choose_with: str = BOARD_CHOICE) -> str:
    """One line: the port is taken, and how to pick another or a free one (``choose_with`` with ``<n>`` in it)."""
    return (f"board: port {port} on {host} is in use; choose another with {choose_with}, "
            f"or {choose_with.replace('<n>', '0')} to pick a free one.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m board.port_check",
                                     description="exit 1 with one line on stderr when the board's port is taken")
    parser.add_argument("--host", default=DEFAULT_HOST, help="address the board will bind (default: %(default)s)")
    parser.add_argument("--port", type=int, required=True, help="port the board will bind; 0 is always free")
    parser.add_argument("--choose-with", default=BOARD_CHOICE,
                        help="how the caller sets the port, <n> standing for it (default: %(default)s)")
    args = parser.parse_args(argv)
    if "<n>" not in args.choose_with:
        parser.error(f"--choose-with must contain <n> where the port goes, got {args.choose_with!r}")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    if args.port != 0 and port_in_use(args.host, args.port):
        print(busy_port_message(args.host, args.port, args.choose_with), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
