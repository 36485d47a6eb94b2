"""The default store: the SQLite file format (what LibSQL speaks) through ``aiosqlite``.

Several processes (gateway and studio) write the same file, so every connection runs in
WAL mode with a ``busy_timeout``, and every write is a short ``BEGIN IMMEDIATE``
transaction: the write lock is taken up front, so a writer waits in SQLite's busy handler
instead of failing half-way with "database is locked" on lock upgrade.

Each process keeps one writer connection (writes are serialised in-process by a lock, so
they queue on the event loop rather than in SQLite) and a small pool of reader connections
handed out from a queue (datasette's pattern): a slow read (a search over 300k messages)
holds one reader while the others keep answering, and WAL lets every reader proceed while
another process writes. Each ``aiosqlite`` connection owns a thread, so no query blocks the
event loop, but every call is a thread hop (~0.1 ms measured here), which dominates a short
transaction. So the writer connection uses the sqlite3 module's ``isolation_level="IMMEDIATE"``:
its first write statement issues ``BEGIN IMMEDIATE`` in the same hop, and a turn's write is
two hops (insert, commit) instead of five.

Opening is retried: on a fresh file, ``PRAGMA journal_mode = WAL`` (and the first
migration transaction) can fail at once with "database is locked" while another process
does the same, because SQLite's busy handler does not cover a journal-mode change. Those
steps are retried with backoff for up to ``busy_timeout``.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from app.clock import now_iso
from app.paths import PathError, ensure_db_dir, file_path
from app.storage.errors import StorageBusy, StorageError
from app.storage.migrate import apply_libsql, load_migrations

_REMOTE_PREFIXES = ("http://", "https://", "libsql://", "ws://", "wss://")
DEFAULT_READERS = 4
T = TypeVar("T")


class LibSQLStore:
    engine = "libsql"

    def __init__(self, url: str, *, busy_timeout_ms: int = 5000, readers: int = DEFAULT_READERS) -> None:
        self.url = url
        self.busy_timeout_ms = busy_timeout_ms
        self.reader_count = max(1, readers)
        self._writer: aiosqlite.Connection | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._idle: deque[aiosqlite.Connection] = deque()
        self._waiting: deque[asyncio.Future[aiosqlite.Connection]] = deque()
        self._write_lock = asyncio.Lock()
        self.applied_migrations: list[int] = []

    @property
    def path(self) -> Path | None:
        return file_path(self.url)

    @property
    def is_open(self) -> bool:
        return self._writer is not None

    async def open(self) -> None:
        if self._writer is not None:
            return
        if self.url.startswith(_REMOTE_PREFIXES):
            raise StorageError(
                f"remote LibSQL URLs are not supported yet ({self.url}); use a file: URL"
            )
        try:
            target = ensure_db_dir(self.url) or self.url
        except PathError as exc:
            raise StorageError(str(exc)) from exc
        try:
            self._writer = await self._connect(target, isolation_level="IMMEDIATE")
            migrations = load_migrations("libsql")
            self.applied_migrations = await self._retry_locked(
                lambda: apply_libsql(self._writer, migrations, now_iso()))
            for _ in range(self.reader_count):
                reader = await self._connect(target, isolation_level=None)
                self._readers.append(reader)
                self._idle.append(reader)
        except sqlite3.Error as exc:
            await self.close()
            raise StorageError(f"cannot open database {target}: {exc}") from exc

    async def _retry_locked(self, step: Callable[[], Awaitable[T]]) -> T:
        """Run ``step``; while it fails with "locked"/"busy", retry with jittered backoff
        until ``busy_timeout`` has passed."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        delay = 0.005
        while True:
            try:
                return await step()
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc) or time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.25)

    async def _connect(self, target: Path | str, *, isolation_level: str | None) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(str(target), isolation_level=isolation_level)
        conn.row_factory = sqlite3.Row
        try:
            await conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            if target != ":memory:":
                await self._retry_locked(lambda: _fetch_pragma(conn, "PRAGMA journal_mode = WAL"))
            await conn.execute("PRAGMA synchronous = NORMAL")
            await conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def close(self) -> None:
        for conn in (*self._readers, self._writer):
            if conn is not None:
                await conn.close()
        self._readers, self._writer = [], None
        self._idle.clear()

    @asynccontextmanager
    async def reader(self) -> AsyncIterator[aiosqlite.Connection]:
        """A reader connection from the pool, returned when the block ends.

        First come, first served: a released connection goes straight to the longest
        waiter (``asyncio.Queue`` would let a task that releases and asks again jump the
        queue, and a stream of searches could starve a ``get_thread``)."""
        if not self._readers:
            raise StorageError(f"store {self.url} is not open")
        if self._idle and not self._waiting:
            conn = self._idle.popleft()
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                conn = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._release(waiter.result())
                else:
                    self._waiting.remove(waiter)
                raise
        try:
            yield conn
        finally:
            self._release(conn)

    def _release(self, conn: aiosqlite.Connection) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self._idle.append(conn)

    # One hop to the connection's thread per read (a cursor would take three: execute,
    # fetch, close); every ``fetch_one`` query selects a single row by key or an aggregate.
    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        async with self.reader() as conn:
            return list(await conn.execute_fetchall(sql, params))

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One short write transaction; commits on success, rolls back on any error.

        The first write statement inside opens it (``BEGIN IMMEDIATE``), waiting up to
        ``busy_timeout`` for another process's write lock; past that, ``StorageBusy``.
        Reads inside the block see the transaction's own writes.
        """
        if self._writer is None:
            raise StorageError(f"store {self.url} is not open")
        conn = self._writer
        async with self._write_lock:
            try:
                yield conn
                await conn.commit()
            except BaseException as exc:
                await conn.rollback()
                if isinstance(exc, sqlite3.OperationalError) and _is_locked(exc):
                    raise StorageBusy(f"database {self.url} is locked by another writer") from exc
                raise

    def health(self) -> dict[str, Any]:
        return {"engine": self.engine, "url": self.url, "path": str(self.path) if self.path else None,
                "open": self.is_open, "readers": len(self._readers)}


async def _fetch_pragma(conn: aiosqlite.Connection, sql: str) -> Any:
    async with conn.execute(sql) as cursor:
        return await cursor.fetchone()


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)
