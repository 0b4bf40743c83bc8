"""summarize(): per run, each alert kind once, in the order first raised, with its count, worst severity and first."""
from __future__ import annotations

from board.components.alert_summary import alert_summary
from board.data.alerts import RunAlert, summarize
from instrumentation.format.alerts import Alert


def _alert(run: str, kind: str, severity: str, step: int) -> RunAlert:
    return RunAlert(run, Alert(kind, severity, "s", f"{kind} at {step}", step, 0.0))


def test_summary_counts_kinds_in_first_raised_order_with_the_worst_severity() -> None:
    items = [_alert("a", "loss_spike", "warning", 3), _alert("a", "exploding_gradient", "error", 4),
             _alert("a", "loss_spike", "error", 9), _alert("b", "leak", "warning", 40)]
    summary = summarize(items, ["a", "b", "c"])
    assert list(summary) == ["a", "b", "c"]
    assert [(s.kind, s.count, s.severity, s.first.alert.step) for s in summary["a"]] == [
        ("loss_spike", 2, "error", 3), ("exploding_gradient", 1, "error", 4)]
    assert [(s.kind, s.count) for s in summary["b"]] == [("leak", 1)]
    assert summary["c"] == []
    assert summarize([_alert("gone", "oom", "error", 1)], [])["gone"][0].kind == "oom"  # never dropped


def test_summary_component_says_no_alerts_and_why_a_file_was_not_read() -> None:
    div = alert_summary(summarize([_alert("a", "nonfinite", "error", 5)], ["a", "b", "c"]), {"c": "not a regular file"})
    text = str(div)
    assert "1 of 3 runs raised alerts (1 with errors)" in text
    assert "nonfinite · step 5" in text and "/dynamics?run=a&step=5" in text
    assert "no alerts" in text and "alerts not read: not a regular file" in text
