"""The README's usage example runs as written and leaves a run the reader can open."""
from __future__ import annotations

import re
from pathlib import Path

from instrumentation.format import EventFileReader, is_event_file

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_trains_and_logs(tmp_path, monkeypatch):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {"__name__": "readme_example"})
    files = [p for p in (tmp_path / "logs" / "digits").iterdir() if is_event_file(p.name)]
    assert len(files) == 1
    tags = {value.tag for event in EventFileReader(str(files[0])).read() for value in event.values}
    assert {"train/loss", "grad_norm/0.weight", "update_ratio/2.weight"} <= tags
