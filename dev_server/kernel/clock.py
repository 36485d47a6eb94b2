"""The one clock, and timestamps as stored and sent.

Every read of the time that decides behaviour or is stored goes through a ``Clock`` handed
down from ``dev_server.factory.create_app(..., clock=...)`` (``SystemClock`` unless a test
gives a ``ManualClock``): message ``createdAt``, thread timestamps (``updated_at`` too,
written by the insert that adds a message: migration 0012), OM record timestamps, OM cursors,
flags and their staleness, cycle parts and their durations, idle TTLs, leases, rate
windows, stream-log heartbeats, the semantic index's retry times. A test can then run a
conversation at fixed times, minutes or days apart, and replay it exactly.

Reads left on other clocks, and why:

* ``time.monotonic`` / ``perf_counter`` where a wait is paced or bounded by real
  ``asyncio.sleep``s (a manual clock would never let them end): turn lease waits and
  renewals, reply checkpoints, the stream recorder's flushes and heartbeat pacing (the
  heartbeat *values* it stores are the clock's), tool timeouts, ``om.flags.settled``,
  SQLite busy retries, connection limits, export queue flushes, worker stops, the recall
  indexer's progress reports, model warm-up and start-up timings.
* Observability about the process, not the conversation: OTLP ``receivedAt``, the
  telemetry exporter's ingest time, trace retention and metric query windows.
* Migration ``applied_at``, the host's time zone OM records (a place, not a moment), and
  ``recall.format``'s stand-in for a ``createdAt`` it cannot parse.
* Scripts under ``bench/`` and test fixtures, through ``now_iso()``'s default.

Timestamps are ISO-8601 UTC with milliseconds and a trailing ``Z``: fixed width, so text
order is time order (SQLite compares them as strings).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
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
        return datetime.now(UTC)

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock for tests: it stands still at ``start`` until ``set`` or ``advance`` moves it.
    Its monotonic reading moves with every forward step (a ``set`` into the past leaves it).
    With a ``tick``, every wall-time read moves it that much (not its monotonic reading): two
    things made one after the other are then never stamped the same moment, as in
    production, where time passes between them."""

    def __init__(self, start: datetime | str, *, tick: timedelta = timedelta(0)) -> None:
        self._now = _aware(start)
        self._tick = tick
        self._monotonic = 0.0
        self._lock = threading.Lock()  # a gateway under test reads it from its server thread

    def now(self) -> datetime:
        with self._lock:
            moment = self._now
            self._now += self._tick
            return moment

    def time(self) -> float:
        return self.now().timestamp()

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def set(self, moment: datetime | str) -> None:
        moment = _aware(moment)
        with self._lock:
            self._monotonic += max(0.0, (moment - self._now).total_seconds())
            self._now = moment

    def advance(self, step: timedelta | None = None, **units: float) -> datetime:
        """Move forward by ``step`` or by ``timedelta(**units)`` (``advance(days=3)``); the new time."""
        delta = step if step is not None else timedelta(**units)
        if delta < timedelta(0):
            raise ValueError("a clock only advances; use set() to go back")
        with self._lock:
            self._now += delta
            self._monotonic += delta.total_seconds()
            return self._now


class ShiftedClock(SystemClock):
    """The system clock moved forward by ``advance`` (for a test that lets time run but
    must skip minutes without waiting for them)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return super().now() + self.offset

    def time(self) -> float:
        return super().time() + self.offset.total_seconds()

    def monotonic(self) -> float:
        return super().monotonic() + self.offset.total_seconds()

    def advance(self, step: timedelta | None = None, **units: float) -> None:
        self.offset += step if step is not None else timedelta(**units)


def _aware(moment: datetime | str) -> datetime:
    moment = parse_iso(moment) if isinstance(moment, str) else moment
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_ms(clock: Clock) -> int:
    """Milliseconds since the epoch, in whole-number arithmetic (a float would turn
    ``5000.999`` s into 5000998 ms now and then)."""
    return (clock.now() - _EPOCH) // timedelta(milliseconds=1)


def to_iso(moment: datetime) -> str:
    return _iso(moment.astimezone(UTC).replace(tzinfo=None))


def _iso(utc: datetime) -> str:
    """A naive UTC datetime as stored (``isoformat`` truncates to the millisecond: C speed,
    five times ``strftime``'s, which a 500-message batch pays 500 times)."""
    return utc.isoformat(timespec="milliseconds") + "Z"


def now_iso(clock: Clock = SYSTEM_CLOCK) -> str:
    """The clock's time as stored. The default is for scripts and test fixtures; the
    server's code always passes the clock it was given."""
    return to_iso(clock.now())


def spaced_iso(count: int, clock: Clock = SYSTEM_CLOCK) -> list[str]:
    """``count`` timestamps ending now, one millisecond apart, oldest first: a batch of
    messages saved together keeps its order by time, not only by insertion."""
    base = clock.now().astimezone(UTC).replace(tzinfo=None) - timedelta(milliseconds=count)
    return [_iso(base + timedelta(milliseconds=i)) for i in range(1, count + 1)]


def parse_iso(text: str) -> datetime:
    """Parse an ISO-8601 string (``Z`` or an offset); naive values are taken as UTC.
    ``ValueError`` also for a moment that UTC cannot hold (``9999-12-31T23:59:59-14:00`` is
    past year 9999 there), so that every caller may convert the result with ``to_iso``."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if not moment.tzinfo:
        return moment.replace(tzinfo=UTC)
    if moment.year in (1, 9999):  # an offset (under a day) can only carry these out of range
        try:
            moment.astimezone(UTC)
        except OverflowError:
            raise ValueError(f"{text!r} is outside the range of UTC date-times (years 1 to 9999)") from None
    return moment
