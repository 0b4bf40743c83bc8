"""Run warnings on the Runs page: one badge per reason with the reason as its tooltip, long reasons spelled out,
in the component and in a real browser; an alerts file not read is said so on the Alerts page."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from board.components.runs_table import runs_table
from board.data.run import RunSummary
from board_helpers import scalar_record, version_record

EVENTS = "events.out.tfevents.1700000000.host.1.0"
LONG = "events.out.tfevents.1700000000.host.1.0: not readable (Permission denied)"
BASE = RunSummary(name="run", group="run", last_step=4, last_update=1.7e9, scalar_tags=1, histogram_tags=0, points=5,
                  size_bytes=100, corrupt_records=0, superseded_points=0, files=1, warnings=())


def _texts(component) -> list[tuple[str, str, str]]:
    """(class, text, title) of every Span/Div below `component`."""
    found = []
    children = getattr(component, "children", None)
    if getattr(component, "className", None) and isinstance(children, str):
        found.append((component.className, children, getattr(component, "title", "") or ""))
    for child in children if isinstance(children, list) else [children] if children is not None else []:
        if not isinstance(child, str):
            found += _texts(child)
    return found


def test_each_warning_is_a_badge_with_its_reason_and_long_ones_are_spelled_out() -> None:
    rows = _texts(runs_table([replace(BASE, warnings=("2 corrupt record(s) skipped", LONG)), replace(BASE, name="ok")]))
    warnings = [row for row in rows if "fs-badge-warn" in row[0]]
    assert warnings == [("fs-badge fs-badge-warn", "⚠ 2 corrupt record(s) skipped", "2 corrupt record(s) skipped"),
                        ("fs-badge fs-badge-warn", "⚠ not readable (Permission denied)", LONG)]
    assert ("fs-muted fs-run-warnings", LONG, "") in rows
    assert [row[1] for row in rows if "fs-badge-ok" in row[0]] == ["ok"]  # the run without warnings


@pytest.mark.browser
def test_the_runs_page_shows_a_warning_badge_with_its_reason(page: Page, tmp_path: Path, serve_board) -> None:
    logdir = tmp_path / "logs"
    for run in ("healthy", "damaged"):
        (logdir / run).mkdir(parents=True)
        data = bytearray(version_record() + b"".join(scalar_record("x", s, float(s)) for s in range(5)))
        if run == "damaged":
            data[len(version_record()) + 20] ^= 0xFF  # a byte of the first scalar record's payload
        (logdir / run / EVENTS).write_bytes(bytes(data))
    outside = tmp_path / "outside" / "plugins" / "alerts"
    outside.mkdir(parents=True)
    (outside / "alerts.jsonl").write_text("")
    (logdir / "damaged" / "plugins").mkdir()
    (logdir / "damaged" / "plugins" / "alerts").symlink_to(outside, target_is_directory=True)
    board = serve_board(logdir)
    page.goto(board.url + "/")
    badges = page.locator("tr:has-text('damaged') .fs-badge-warn")
    expect(badges).to_have_count(2)  # the reader's line about the skipped bytes, and the count
    skipped = "bytes 40–77 (37 bytes) skipped: record of 21 bytes fails its data CRC"
    reason = f"{EVENTS}: {skipped}"
    expect(badges.nth(0)).to_have_text(f"⚠ {skipped[:59]}…")  # the file's name is in the tooltip and the line
    expect(badges.nth(0)).to_have_attribute("title", reason)
    expect(badges.nth(1)).to_have_text("⚠ 1 corrupt record(s) skipped")
    expect(badges.nth(1)).to_have_attribute("title", "1 corrupt record(s) skipped")
    expect(page.locator("tr:has-text('damaged') .fs-run-warnings")).to_have_text(reason)  # too long: said in full
    expect(page.locator("tr:has-text('healthy') .fs-badge-ok")).to_have_text("ok")
    page.screenshot(path=str(tmp_path / "runs.png"), full_page=True)
    page.goto(board.url + "/alerts")  # the run's alerts directory is a link leading outside: said, not followed
    expect(page.locator(".alerts-problem")).to_contain_text("damaged: alerts not read:")
    expect(page.locator(".alerts-problem")).to_contain_text("leads outside")
    page.screenshot(path=str(tmp_path / "alerts.png"), full_page=True)


def test_a_file_corrupt_from_some_offset_warns_with_the_readers_reason_also_after_a_restart_from_the_cache(
        tmp_path: Path) -> None:
    from board.data.store import LogdirStore

    logdir, cache_root = tmp_path / "logs", tmp_path / "cache"
    good = version_record() + b"".join(scalar_record("x", s, float(s)) for s in range(50))
    for run in ("damaged", "healthy"):
        (logdir / run).mkdir(parents=True)
        tail = bytes(1 << 20) if run == "damaged" else b""  # a zero-filled MiB after the records
        (logdir / run / EVENTS).write_bytes(good + tail + (scalar_record("x", 50, 50.0) if tail else b""))
    for _ in range(2):  # the first opening decodes, the second maps the cache and resumes from its offsets
        store = LogdirStore(logdir, cache_root=cache_root, workers=0)
        store.refresh()
        summaries = {summary.name: summary for summary in store.runs()}
        assert summaries["healthy"].warnings == ()
        [problem, *rest] = summaries["damaged"].warnings
        assert problem.startswith(f"{EVENTS}: bytes {len(good):,}–{len(good) + (1 << 20):,} (1.0 MiB) skipped")
        assert rest == ["1 corrupt record(s) skipped"]
        assert store.scalars("damaged", "x")[0].steps.tolist() == list(range(51))  # the record after the tail too
    assert len(list(cache_root.glob("*/*/manifest.json"))) == 2
