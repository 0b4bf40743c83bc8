"""`board --logdir DIR [--host] [--port] [--reload-interval] [--token] [--read-only]`: a thin CLI over `BoardConfig`."""
from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from board.config import BoardConfig
from board.port_check import busy_port_message, port_in_use

LISTEN_BACKLOG = 4096  # connections waiting to be accepted (the kernel caps it at net.core.somaxconn)
_TYPES = {"logdir": Path, "host": str, "port": int, "reload_interval": float, "token": str, "cache_dir": Path,
          "no_cache": bool, "read_only": bool}


def build_parser() -> argparse.ArgumentParser:
    """One option per `BoardConfig` field, its help text from the field and its default appended to it."""
    parser = argparse.ArgumentParser(prog="board", description="flowscope board: training logs in the browser")
    for option in dataclasses.fields(BoardConfig):
        flag = "--" + option.name.replace("_", "-")
        if _TYPES[option.name] is bool:
            parser.add_argument(flag, dest=option.name, action="store_true", help=option.metadata["help"])
            continue
        required = option.default is dataclasses.MISSING
        parser.add_argument(flag, dest=option.name, type=_TYPES[option.name], required=required,
                            default=None if required else option.default, help=_help_with_default(option))
    return parser


def _help_with_default(option: dataclasses.Field) -> str:
    """The field's help, then "(default: X)" when it has a value to show (a flag is off and None is said in words)."""
    text = option.metadata["help"]
    if option.default is dataclasses.MISSING or option.default is None:
        return text
    return f"{text} (default: {option.default})"


def parse_args(argv: Sequence[str] | None = None) -> BoardConfig:
    parser = build_parser()
    try:
        return BoardConfig(**vars(parser.parse_args(argv)))
    except ValueError as error:
        parser.error(str(error))
        raise  # unreachable: parser.error exits


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
    if config.port != 0 and port_in_use(config.host, config.port):
        print(busy_port_message(config.host, config.port), file=sys.stderr)
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
    if not config.logdir.exists():
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
