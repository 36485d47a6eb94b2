"""Timestamps as stored and sent: ISO-8601 UTC with milliseconds and a trailing ``Z``.

Fixed width, so text order is time order (SQLite compares them as strings).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Protocol


class Clock(Protocol):
    """Wall time (``now``, ``time``) and a monotonic reading for measured durations."""

    def now(self) -> datetime:
        """The current moment, an aware UTC datetime."""
        ...

    def time(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for durations that are stored or decide."""
        ...


class SystemClock:
    """The machine's clocks."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()


def to_iso(moment: datetime) -> str:
    return _iso(moment.astimezone(timezone.utc).replace(tzinfo=None))


def _iso(utc: datetime) -> str:
    """A naive UTC datetime as stored (``isoformat`` truncates to the millisecond: C speed,
    five times ``strftime``'s, which a 500-message batch pays 500 times)."""
    return utc.isoformat(timespec="milliseconds") + "Z"


def now_iso() -> str:
    return to_iso(datetime.now(timezone.utc))


def spaced_iso(count: int) -> list[str]:
    """``count`` timestamps ending now, one millisecond apart, oldest first: a batch of
    messages saved together keeps its order by time, not only by insertion."""
    base = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(milliseconds=count)
    return [_iso(base + timedelta(milliseconds=i)) for i in range(1, count + 1)]


def parse_iso(text: str) -> datetime:
    """Parse an ISO-8601 string (``Z`` or an offset); naive values are taken as UTC.
    ``ValueError`` also for a moment that UTC cannot hold (``9999-12-31T23:59:59-14:00`` is
    past year 9999 there), so that every caller may convert the result with ``to_iso``."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if not moment.tzinfo:
        return moment.replace(tzinfo=timezone.utc)
    if moment.year in (1, 9999):  # an offset (under a day) can only carry these out of range
        try:
            moment.astimezone(timezone.utc)
        except OverflowError:
            raise ValueError(f"{text!r} is outside the range of UTC date-times (years 1 to 9999)") from None
    return moment
