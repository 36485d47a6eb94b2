"""Per-thread leases: the row that serialises turns on a thread across processes.

The gateway and the studio (and any replica on the same database) share nothing but the
database, so "one turn at a time on a thread" is a row in ``thread_leases`` (migration
0004): ``(thread_id, holder, acquired_at, expires_at)``. Each operation is one statement in
a short ``BEGIN IMMEDIATE`` transaction (the store's ``run_write``), so two processes racing
for the same thread are ordered by SQLite's write lock and exactly one wins.

- ``try_acquire`` inserts the row, or takes it over only when the current one has expired
  (its holder died without releasing it) or is already the caller's; it never waits.
- ``renew`` pushes ``expires_at`` forward while the holder still owns the row; False means
  the lease was lost (it expired and someone else took it).
- ``release`` deletes the row if the caller still holds it.

Waiting, backoff and renewal timing belong to the caller (``dev_server.agents.turns``). The clock
is injectable so tests can expire a lease without sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass

from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, epoch_ms
from dev_server.storage.libsql import LibSQLStore


@dataclass(frozen=True)
class Lease:
    thread_id: str
    holder: str
    acquired_at: int
    expires_at: int


class ThreadLeases:
    def __init__(self, db: LibSQLStore, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.clock = clock

    def clock_ms(self) -> int:
        return epoch_ms(self.clock)

    async def try_acquire(self, thread_id: str, holder: str, ttl_s: float) -> bool:
        now = self.clock_ms()
        params = (thread_id, holder, now, now + _ms(ttl_s), now)
        return await self.db.run_write(lambda conn: conn.execute(
            "INSERT INTO thread_leases (thread_id, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (thread_id) DO UPDATE SET holder = excluded.holder,"
            " acquired_at = excluded.acquired_at, expires_at = excluded.expires_at"
            " WHERE thread_leases.expires_at <= ? OR thread_leases.holder = excluded.holder"
            " RETURNING holder", params).fetchall() != [])

    async def renew(self, thread_id: str, holder: str, ttl_s: float) -> bool:
        params = (self.clock_ms() + _ms(ttl_s), thread_id, holder)
        return await self.db.run_write(lambda conn: conn.execute(
            "UPDATE thread_leases SET expires_at = ? WHERE thread_id = ? AND holder = ?", params).rowcount > 0)

    async def release(self, thread_id: str, holder: str) -> None:
        await self.db.run_write(lambda conn: conn.execute(
            "DELETE FROM thread_leases WHERE thread_id = ? AND holder = ?", (thread_id, holder)))

    async def current(self, thread_id: str) -> Lease | None:
        row = await self.db.fetch_one(
            "SELECT thread_id, holder, acquired_at, expires_at FROM thread_leases WHERE thread_id = ?", (thread_id,))
        return Lease(*row) if row else None


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
