"""`board --logdir DIR [--host] [--port] [--reload-interval] [--token] [--read-only]`: a thin CLI over `BoardConfig`."""
from __future__ import annotations

import argparse
import dataclasses
import errno
import logging
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from board.config import BoardConfig

LISTEN_BACKLOG = 4096  # connections waiting to be accepted (the kernel caps it at net.core.somaxconn)
_TYPES = {"logdir": Path, "host": str, "port": int, "reload_interval": float, "token": str, "cache_dir": Path,
          "no_cache": bool, "read_only": bool}


def parse_args(argv: Sequence[str] | None = None) -> BoardConfig:
    parser = argparse.ArgumentParser(prog="board", description="flowscope board: training logs in the browser")
    for option in dataclasses.fields(BoardConfig):
        flag = "--" + option.name.replace("_", "-")
        if _TYPES[option.name] is bool:
            parser.add_argument(flag, dest=option.name, action="store_true", help=option.metadata["help"])
            continue
        required = option.default is dataclasses.MISSING
        parser.add_argument(flag, dest=option.name, type=_TYPES[option.name], required=required,
                            default=None if required else option.default, help=option.metadata["help"])
    try:
        return BoardConfig(**vars(parser.parse_args(argv)))
    except ValueError as error:
        parser.error(str(error))
        raise  # unreachable: parser.error exits


def _port_in_use(host: str, port: int) -> bool:
    """Werkzeug prints its own multi-line message and exits on a busy port, so ask first (as it binds)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            return error.errno == errno.EADDRINUSE
    return False


def startup_warnings(config: BoardConfig) -> list[str]:
    if not config.is_loopback and config.token is None:
        return [f"serving on {config.host} without --token: anyone who can reach this address can read your logs. "
                "Add --token SECRET, or bind to 127.0.0.1."]
    return []


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="board: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    for warning in startup_warnings(config):
        print(f"board: WARNING: {warning}", file=sys.stderr)
    if config.port != 0 and _port_in_use(config.host, config.port):
        print(f"board: port {config.port} on {config.host} is in use; choose another with --port, "
              "or --port 0 to pick a free one.", file=sys.stderr)
        return 1
    # NOTE: reading starts before Dash and Plotly are imported (about a second), and those imports happen
    # only here, so that `board --help` and argument errors answer instantly.
    from board.data.store import LogdirStore

    store = LogdirStore(config.logdir, config.reload_interval, config.cache_root)
    store.start()
    from werkzeug.serving import make_server

    from board.app import create_app

    app = create_app(config, store)
    server = make_server(config.host, config.port, app.server, threaded=True)
    # NOTE: Werkzeug listens with a backlog of 128: with more clients connecting at once the kernel drops SYNs,
    # and each dropped one waits for TCP's 1 s, 3 s, 7 s retransmissions (bench/board_load.py: p99 3.6 s → see docs).
    server.socket.listen(LISTEN_BACKLOG)
    host = f"[{config.host}]" if ":" in config.host else config.host
    suffix = "/?token=<your token>" if config.token else "/"
    if not config.logdir.is_dir():
        print(f"board: {config.logdir} does not exist yet; waiting for it.", file=sys.stderr)
    print(f"board: serving {config.logdir} at http://{host}:{server.server_port}{suffix}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        store.stop()
        server.server_close()
    return 0
