"""Fixed-window hit counters in the database (``rate_windows``, migration 0011), so a rate
limit holds across the gateway's workers, its replicas and the studio alike.

``hit(key, limit, window_ms)`` counts one hit of ``key`` and answers whether it is within
``limit`` and when the key's window ends: one upsert in a short write transaction, like a
turn's lease. A key's window opens at its first hit (not on a shared clock boundary, so
keys do not all reset at once) and lasts ``window_ms``; the first hit after it ended opens
the next. Refused hits count too, which changes nothing: the count starts again with the
next window. At most once per window a process also deletes the rows of ended windows.
"""

from __future__ import annotations

from dataclasses import dataclass

from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, epoch_ms
from dev_server.storage.libsql import LibSQLStore


@dataclass(frozen=True)
class Hit:
    allowed: bool
    count: int  # hits in this window, this one included
    window_end_ms: int


_COUNT = ("INSERT INTO rate_windows (key, window_end, hits) VALUES (:key, :now + :window, 1)"
          " ON CONFLICT (key) DO UPDATE SET"
          " hits = CASE WHEN :now < rate_windows.window_end THEN rate_windows.hits + 1 ELSE 1 END,"
          " window_end = CASE WHEN :now < rate_windows.window_end THEN rate_windows.window_end"
          " ELSE :now + :window END"
          " RETURNING hits, window_end")


class RateWindows:
    def __init__(self, db: LibSQLStore, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.clock = clock
        self._next_sweep_ms = 0

    def clock_ms(self) -> int:
        return epoch_ms(self.clock)

    async def hit(self, key: str, limit: int, window_ms: int) -> Hit:
        now = self.clock_ms()
        sweep = now >= self._next_sweep_ms

        def count(conn) -> tuple[int, int]:
            if sweep:
                conn.execute("DELETE FROM rate_windows WHERE window_end <= ?", (now,))
            hits, window_end = conn.execute(_COUNT, {"key": key, "now": now, "window": window_ms}).fetchone()
            return hits, window_end

        hits, window_end = await self.db.run_write(count)
        if sweep:
            self._next_sweep_ms = now + window_ms
        return Hit(hits <= limit, hits, window_end)
