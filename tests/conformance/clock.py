"""The replay's clock: the recorder's (``recorder/determinism.mjs``) in Python.

Each turn starts at the moment the script sets; every read of the wall time moves it 1 ms,
so two things made in a turn are never stamped the same millisecond (in production time
passes between them; a clock that stands still makes ties neither engine meets there).
The monotonic reading moves only with ``set``, so waits measured on it behave as on a
``ManualClock``. Times are compared to the second (``tests.conformance.views.coarse``):
the engines read the clock a different number of times.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from dev_server.kernel.clock import parse_iso

_TICK = timedelta(milliseconds=1)


class TickingClock:
    def __init__(self, start: str) -> None:
        self._now = parse_iso(start)
        self._monotonic = 0.0
        self._lock = threading.Lock()  # the gateway reads it from its server and writer threads

    def now(self) -> datetime:
        with self._lock:
            moment = self._now
            self._now += _TICK
            return moment

    def time(self) -> float:
        return self.now().timestamp()

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def set(self, moment: str) -> None:
        at = parse_iso(moment)
        with self._lock:
            self._monotonic += max(0.0, (at - self._now).total_seconds())
            self._now = at
