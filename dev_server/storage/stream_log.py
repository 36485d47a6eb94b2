"""The recorded chunks of chat streams, where every process can read them (migration 0009).

A gateway chat stream is written here by the process producing it (``dev_server.streaming.recorder``)
and read back by whichever process a resuming client reaches (``dev_server.api.resume``): the
gateway's workers, or N replicas on one database, share nothing else. A stream is one row of
``chat_streams`` (active, then finished) and its frames in ``stream_chunks`` keyed by their
SSE id. Each write is one short ``BEGIN IMMEDIATE`` transaction through ``run_write``; the
recorder batches frames so a long reply costs a write per batch, not per token.

The producer renews ``heartbeat_at`` while it runs; an active stream whose heartbeat is older
than ``dead_after_ms`` belongs to a process that died. ``sweep`` deletes finished streams
(and dead ones) once ``retention_ms`` has passed, their chunks with them (``ON DELETE
CASCADE``); the gateway's lifespan calls it periodically, off the chat path. The clock is injectable so tests can age a
stream without sleeping.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from dev_server.kernel import ids
from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, epoch_ms
from dev_server.storage.libsql import LibSQLStore

ACTIVE, FINISHED = "active", "finished"
DEFAULT_RETENTION_MS = 30_000
DEFAULT_DEAD_AFTER_MS = 10_000

Chunk = tuple[int, str]  # (SSE id, frame data)


@dataclass(frozen=True)
class StreamRow:
    stream_id: str
    chat_id: str | None
    thread_id: str | None
    agent_id: str
    resource_id: str
    message_id: str | None
    status: str
    heartbeat_at: int


_ROW = "stream_id, chat_id, thread_id, agent_id, resource_id, message_id, status, heartbeat_at"


@dataclass(frozen=True)
class StreamOwner:
    """Who a stream belongs to: what a resume checks before replaying anything; and the
    user message its turn answers (None for a turn that continues a reply)."""

    chat_id: str | None
    thread_id: str | None
    agent_id: str
    resource_id: str
    message_id: str | None = None


class StreamLog:
    def __init__(self, db: LibSQLStore, *, retention_ms: int = DEFAULT_RETENTION_MS,
                 dead_after_ms: int = DEFAULT_DEAD_AFTER_MS, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.retention_ms = retention_ms
        self.dead_after_ms = dead_after_ms
        self.clock = clock

    def clock_ms(self) -> int:
        return epoch_ms(self.clock)

    @staticmethod
    def new_id() -> str:
        return f"stream_{ids.uuid4().hex}"

    async def write(self, stream_id: str, owner: StreamOwner | None, chunks: Sequence[Chunk], *,
                    finished: bool = False) -> None:
        """Append ``chunks`` and renew the heartbeat, in one transaction. With ``owner`` (the
        stream's first write) the stream's row is created; ``finished`` marks the stream over."""
        now = self.clock_ms()

        def work(conn: sqlite3.Connection) -> None:
            if owner is not None:
                conn.execute(
                    "INSERT INTO chat_streams (stream_id, chat_id, thread_id, agent_id, resource_id, message_id,"
                    " status, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (stream_id, owner.chat_id, owner.thread_id, owner.agent_id, owner.resource_id, owner.message_id,
                     ACTIVE, now, now))
            if chunks:
                conn.executemany("INSERT OR IGNORE INTO stream_chunks (stream_id, seq, data) VALUES (?, ?, ?)",
                                 [(stream_id, seq, data) for seq, data in chunks])
            if finished:
                conn.execute("UPDATE chat_streams SET status = ?, heartbeat_at = ?, finished_at = ?"
                             " WHERE stream_id = ?", (FINISHED, now, now, stream_id))
            elif owner is None:
                conn.execute("UPDATE chat_streams SET heartbeat_at = ? WHERE stream_id = ?", (now, stream_id))

        await self.db.run_write(work)

    async def latest(self, chat_id: str, resource_id: str | None) -> StreamRow | None:
        """The newest stream of ``resource_id`` (any resource when None) recorded under
        ``chat_id`` (useChat's id or the thread id). Another resource's stream under the same
        id is not seen: it can neither shadow this one nor be told apart from none."""
        owner = "" if resource_id is None else " AND resource_id = ?2"
        rows = await self.db.fetch_all(
            f"SELECT {_ROW}, started_at FROM chat_streams WHERE chat_id = ?1{owner}"
            f" UNION SELECT {_ROW}, started_at FROM chat_streams WHERE thread_id = ?1{owner}"
            " ORDER BY started_at DESC LIMIT 1", (chat_id,) if resource_id is None else (chat_id, resource_id))
        return StreamRow(*tuple(rows[0])[:8]) if rows else None

    async def running_for(self, thread_id: str, message_id: str) -> StreamRow | None:
        """The live stream (if any) of the turn answering ``message_id`` in ``thread_id``."""
        row = await self.db.fetch_one(
            f"SELECT {_ROW} FROM chat_streams WHERE thread_id = ? AND message_id = ? AND status = ?"
            " ORDER BY started_at DESC LIMIT 1", (thread_id, message_id, ACTIVE))
        return None if row is None or self.is_dead(StreamRow(*row)) else StreamRow(*row)

    async def claim_dead(self, limit: int = 20) -> list[StreamRow]:
        """Dead streams (their producer stopped heartbeating) whose reply was not rebuilt yet,
        claimed for this caller: each is handed to one claimer, whichever process asks."""
        now = self.clock_ms()
        rows = await self.db.run_write(lambda conn: conn.execute(
            "UPDATE chat_streams SET salvaged_at = ? WHERE stream_id IN (SELECT stream_id FROM chat_streams"
            " WHERE status = ? AND salvaged_at IS NULL AND heartbeat_at < ? LIMIT ?)"
            f" RETURNING {_ROW}", (now, ACTIVE, now - self.dead_after_ms, limit)).fetchall())
        return [StreamRow(*row) for row in rows]

    async def state(self, stream_id: str) -> StreamRow | None:
        row = await self.db.fetch_one(f"SELECT {_ROW} FROM chat_streams WHERE stream_id = ?", (stream_id,))
        return StreamRow(*row) if row else None

    async def all_chunks(self, stream_id: str) -> list[Chunk]:
        rows = await self.db.fetch_all("SELECT seq, data FROM stream_chunks WHERE stream_id = ? ORDER BY seq",
                                       (stream_id,))
        return [(row[0], row[1]) for row in rows]

    async def chunks_after(self, stream_id: str, after: int, limit: int = 500) -> list[Chunk]:
        rows = await self.db.fetch_all("SELECT seq, data FROM stream_chunks WHERE stream_id = ? AND seq > ?"
                                       " ORDER BY seq LIMIT ?", (stream_id, after, limit))
        return [(row[0], row[1]) for row in rows]

    async def last_seq(self, stream_id: str) -> int:
        row = await self.db.fetch_one("SELECT max(seq) FROM stream_chunks WHERE stream_id = ?", (stream_id,))
        return row[0] if row and row[0] is not None else 0

    def is_dead(self, row: StreamRow) -> bool:
        return row.status == ACTIVE and self.clock_ms() - row.heartbeat_at > self.dead_after_ms

    async def sweep(self) -> int:
        """Delete expired streams (finished, or dead, past the retention); how many."""
        now = self.clock_ms()
        return await self.db.run_write(lambda conn: conn.execute(
            "DELETE FROM chat_streams WHERE (status = ? AND finished_at < ?) OR (status = ? AND heartbeat_at < ?)",
            (FINISHED, now - self.retention_ms, ACTIVE, now - self.dead_after_ms - self.retention_ms)).rowcount)
