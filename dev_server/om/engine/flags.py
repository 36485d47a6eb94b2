"""The in-progress flags of an OM record, as every process sees them (docs/architecture.md#decisions).

A flag (``is_observing``, ``is_reflecting``, ``is_buffering_observation``,
``is_buffering_reflection``) holds the time it was set or last renewed
(``OMRecordStore.claim_flag`` / ``renew_flag`` / ``release_flag``). A flag is *live* while
that time is younger than its staleness limit: ``STALE_FLAG_S`` for a cycle the turn itself
runs, ``BUFFER_STALE_S`` for background work, which renews its flag every ``HEARTBEAT_S``
(``holding``). An older flag was left by a process that died, and the next claim takes it
over. ``settled`` waits, by polling the database, until no given flag is live: it waits for
the work of any process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, parse_iso
from dev_server.storage.om_records import Flag, OMRecord, OMRecordStore

STALE_FLAG_S = 300.0
BUFFER_STALE_S = 30.0
HEARTBEAT_S = 5.0
WAIT_POLL_S = 0.05


def flag_live(value: str | None, stale_after_s: float = BUFFER_STALE_S, *, clock: Clock = SYSTEM_CLOCK) -> bool:
    """An in-progress flag that is set and was renewed within ``stale_after_s`` of ``clock``'s now
    (the clock of the record store that set it)."""
    if not value:
        return False
    return clock.time() - parse_iso(value).timestamp() < stale_after_s


@asynccontextmanager
async def holding(records: OMRecordStore, record_id: str, flag: Flag) -> AsyncIterator[None]:
    """Renew a claimed flag while the body runs; release it afterwards, whatever happens."""
    async def renew() -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            await records.renew_flag(record_id, flag)

    beat = asyncio.create_task(renew())
    try:
        yield
    finally:
        beat.cancel()
        await records.release_flag(record_id, flag)


async def settled(records: OMRecordStore, key: str, *,
                  flags: Sequence[Flag] = ("is_buffering_observation", "is_buffering_reflection"),
                  timeout_s: float = 30.0) -> OMRecord | None:
    """The key's active record once none of ``flags`` is live on it, or when ``timeout_s``
    has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        record = await records.active(key)
        live = record is not None and any(flag_live(getattr(record, f), clock=records.clock) for f in flags)
        if record is None or time.monotonic() >= deadline or not live:
            return record
        await asyncio.sleep(WAIT_POLL_S)


async def clear_stale(records: OMRecordStore, record: OMRecord) -> list[Flag]:
    """Release the background flags of ``record`` that a dead process left; the ones cleared."""
    cleared: list[Flag] = []
    for flag in ("is_buffering_observation", "is_buffering_reflection"):
        if getattr(record, flag) and not flag_live(getattr(record, flag), clock=records.clock):
            await records.release_flag(record.id, flag)
            setattr(record, flag, None)
            cleared.append(flag)
    return cleared
