"""hparams sub-runs: torch's `add_hparams` writes `<run>/<unix time>/`; the board shows it as part of `<run>`."""
from __future__ import annotations

import re
from collections.abc import Mapping

from board.data.discovery import ROOT_RUN
from instrumentation.format import metadata

_UNIX_TIME = re.compile(r"\d{9,11}(\.\d+)?")  # str(time.time()), torch's default run_name


def parent_run(name: str) -> str:
    head, _, _ = name.rpartition("/")
    return head or ROOT_RUN


def folded_subruns(plugins_by_run: Mapping[str, set[str]]) -> dict[str, str]:
    """Sub-run → parent, for each run named like a Unix time that holds hparams records and whose parent directory
    is a run itself (torch's layout); any other run stays a run of its own."""
    folded = {}
    for name, plugins in plugins_by_run.items():
        last = name.rpartition("/")[2]
        parent = parent_run(name)
        if name != ROOT_RUN and _UNIX_TIME.fullmatch(last) and metadata.HPARAMS_PLUGIN in plugins \
                and parent in plugins_by_run:
            folded[name] = parent
    return folded
