"""Report-once guard: instrumentation code that runs inside training reports its first failure and carries on."""
from __future__ import annotations

import sys
from typing import Any, Callable

from engine.hooks import PropagatingError


class FailureReporter:
    """Calls functions for a named place; the first exception per place is printed to stderr, all are swallowed
    (except ``engine.hooks.PropagatingError``, which stops training on purpose)."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.failed: dict[str, int] = {}

    def call(self, place: str, function: Callable[..., Any], *args: Any) -> Any:
        try:
            return function(*args)
        except PropagatingError:
            raise
        except Exception as error:  # noqa: BLE001 - observing must never break training
            self.failed_at(place, error)
            return None

    def failed_at(self, place: str, error: Exception) -> None:
        """Count a failure at ``place``; the first one is printed (for callers that catch it themselves)."""
        count = self.failed.get(place, 0)
        self.failed[place] = count + 1
        if count == 0:
            print(f"{self.owner}: {place} failed and is skipped ({type(error).__name__}: {error}); further "
                  "failures there are not reported", file=sys.stderr)
