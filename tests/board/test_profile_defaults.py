"""The Profile page's defaults: the capture shown and the run Capture asks agree; a link's run and step are honoured."""
from __future__ import annotations

from pathlib import Path

from board.app import create_app
from board.config import BoardConfig
from profile_fixtures import profiled_engine_run


def _components(tree, found: dict) -> dict:
    if isinstance(tree, (list, tuple)):
        for child in tree:
            _components(child, found)
    elif hasattr(tree, "to_plotly_json"):
        if isinstance(getattr(tree, "id", None), str):
            found[tree.id] = tree
        _components(getattr(tree, "children", None), found)
    return found


def test_default_capture_and_capture_run_name_the_same_run_and_links_pick_run_and_step(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    profiled_engine_run(logdir / "a_older", steps=3)
    profiled_engine_run(logdir / "z_newer", steps=3)  # newest capture, but "a_older" sorts first among runs
    app = create_app(BoardConfig(logdir=logdir, no_cache=True))
    from board.pages import profile

    with app.server.app_context():
        shown = _components(profile.layout(), {})
        capture_run = shown["profile-capture"].value.split("\x1f")[0]
        assert capture_run == "z_newer" == shown["profile-request-run"].value
        linked = _components(profile.layout(run="a_older", step="2"), {})
        assert linked["profile-capture"].value.split("\x1f")[0] == "a_older" == linked["profile-request-run"].value
        assert linked["profile-query-step"].data == 2
