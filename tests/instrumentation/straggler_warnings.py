"""What a healthy rank may raise on a loaded machine: a straggler warning is measured wall time, and a rank
descheduled for a whole window is truly slower (CI once saw a healthy rank 1.3x slower on 20 of 20 steps). Tests
of "nobody else is named" therefore accept such a warning only when it meets the detector's own rule."""
from __future__ import annotations

from instrumentation.format import alert_names as keys


def assert_only_true_straggler_warnings(raised: list, rank: int) -> None:
    """``raised`` (rank ``rank``'s alerts) holds no other kind, and each straggler warning names that rank and was
    over the margin on enough steps."""
    assert [a for a in raised if a.kind != keys.STRAGGLER] == [], raised
    for alert in raised:
        evidence = alert.evidence
        assert alert.subject == f"rank{rank}" and evidence[keys.RANK] == rank
        assert evidence[keys.RATIO] >= 1 + evidence[keys.MARGIN]
        assert evidence[keys.STEPS_OVER] >= evidence[keys.MIN_STEPS]
