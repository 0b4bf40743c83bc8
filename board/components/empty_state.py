"""The message a page shows when there is nothing (yet) to show."""
from __future__ import annotations

from dash import html

from board.data.store import LogdirStore


def empty_state(store: LogdirStore, what: str) -> html.Div | None:
    """None when `what` can be shown; otherwise a note saying why not (no log directory, still loading, no runs)."""
    if not store.logdir_exists:
        text = f"Waiting for the log directory {store.logdir} to appear…"
    elif store.refreshes == 0:
        text = f"Reading {store.logdir}…"
    elif not store.run_names():
        text = f"No runs yet in {store.logdir}: a run is any directory holding event files."
    else:
        return None
    return html.Div(text, className="fs-empty", id=f"empty-{what}")
