"""Without chromium the browser tests skip, and `make test` says so on its very last line (after pytest's summary)."""
from __future__ import annotations

import os
import subprocess
import sys

from board_helpers import REPO


def test_the_browser_skip_banner_is_the_last_line_printed() -> None:
    env = {**os.environ, "FLOWSCOPE_CHROMIUM": "/nonexistent/chromium"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--color=no",
                             "tests/board/test_board_csp_browser.py"], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300)
    lines = result.stdout.rstrip().splitlines()
    assert result.returncode == 0, result.stdout[-3000:]
    assert "BROWSER TESTS SKIPPED" in lines[-1] and lines[-1].startswith("!!!"), lines[-6:]
    skipped = int(lines[-1].strip("! ").split()[0])
    assert skipped >= 2 and f"{skipped} skipped" in lines[-3]  # pytest's own summary line is above it
    assert "apt-get install -y chromium" in lines[-2]
    assert "short test summary info" in result.stdout
