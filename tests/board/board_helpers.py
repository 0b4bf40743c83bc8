"""Helpers shared by the board's tests: bounded polling and fixture writers."""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from flask.testing import FlaskClient
from playwright.sync_api import Page

from instrumentation import SummaryWriter

REPO = Path(__file__).resolve().parents[2]


def wait_for(condition: Callable[[], object], what: str, attempts: int = 600, pause_s: float = 0.05) -> object:
    """Poll `condition` until it returns something truthy; a bounded number of attempts, then fail."""
    for _ in range(attempts):
        result = condition()
        if result:
            return result
        time.sleep(pause_s)
    raise AssertionError(f"gave up waiting for {what}")


def write_scalars(run_dir: Path, tag: str, steps: np.ndarray, values: np.ndarray, *, wall_time0: float = 1.7e9) -> None:
    with SummaryWriter(run_dir) as writer:
        for step, value in zip(steps.tolist(), values.tolist()):
            writer.add_scalar(tag, value, step, walltime=wall_time0 + step)


def scalar_record(tag: str, step: int, value: float, wall_time: float | None = None) -> bytes:
    """One framed Event record holding one simple_value, built from the format module's messages."""
    from instrumentation.format import frame_record, protos

    event = protos.Event(wall_time=1.7e9 + step if wall_time is None else wall_time, step=step,
                         summary=protos.Summary(value=[protos.Summary.Value(tag=tag, simple_value=value)]))
    return frame_record(event.SerializeToString())


def version_record(wall_time: float = 1.7e9) -> bytes:
    from instrumentation.format import FILE_VERSION, frame_record, protos

    return frame_record(protos.Event(wall_time=wall_time, file_version=FILE_VERSION).SerializeToString())


def watch_console(page: Page) -> list[str]:
    """Console errors and uncaught exceptions of `page` (CSP violations are console errors), collected from now on."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def open_page_at(page: Page, url: str, timeout_ms: int = 60_000) -> list[str]:
    """Open `url` with every wait bounded by `timeout_ms`; returns its console errors, collected from before loading."""
    errors = watch_console(page)
    page.set_default_timeout(timeout_ms)
    page.goto(url)
    return errors


def pick_option(page: Page, dropdown_id: str, label: str) -> None:
    """Choose `label` in the dcc.Dropdown `dropdown_id` by clicking it, with either end of the dash range: dash 4's
    options have role=option, dash 2's (react-select) are `.VirtualizedSelectOption`s. Never Escape to close a
    menu: dash 2's dropdown clears its value on Escape."""
    page.locator(f"#{dropdown_id}").click()
    option = page.get_by_role("option", name=label, exact=True).or_(
        page.locator(f"#{dropdown_id} .VirtualizedSelectOption").filter(has_text=re.compile(f"^{re.escape(label)}$")))
    option.first.click()


def answered_nothing(response) -> bool:
    """A callback answered "nothing to change": dash 2 says 204 No Content, dash 4 200 with an empty response."""
    return response.status_code == 204 or (response.status_code == 200 and response.get_json()["response"] == {})


def client_for(logdir: Path, token: str | None = None) -> FlaskClient:
    """A test client of a board on `logdir` (no cache) whose store has read the directory once."""
    from board.app import create_app
    from board.config import BoardConfig

    app = create_app(BoardConfig(logdir=logdir, token=token, no_cache=True))
    app.server.extensions["flowscope"].store.refresh()
    return app.server.test_client()


def assert_refused(client: FlaskClient, url: str, status: int, message: str) -> None:
    """`url` answers `status` with an error body whose message contains `message`."""
    response = client.get(url)
    assert response.status_code == status and message in response.get_json()["error"]


# A child process's first lines: give up the capabilities that let root ignore file modes (CAP_DAC_OVERRIDE,
# CAP_DAC_READ_SEARCH), so that the kernel applies mode 000 to it as to any user (tests run as root in CI).
DROP_FILE_MODE_CAPABILITIES = r'''
import ctypes, json, sys
from pathlib import Path

libc = ctypes.CDLL(None, use_errno=True)


class Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
assert libc.capget(ctypes.byref(header), data) == 0, ctypes.get_errno()
dac = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
data[0].effective &= ~dac
data[0].permitted &= ~dac
data[0].inheritable &= ~dac
assert libc.capset(ctypes.byref(header), data) == 0, ctypes.get_errno()
'''
