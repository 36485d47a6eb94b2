"""The default store: the SQLite file format (what LibSQL speaks) through ``aiosqlite``.

Several processes (gateway and studio) write the same file, so every connection runs in
WAL mode with a ``busy_timeout``, and every write is a short ``BEGIN IMMEDIATE``
transaction: the write lock is taken up front, so a writer waits in SQLite's busy handler
instead of failing half-way with "database is locked" on lock upgrade.

Each process keeps one writer connection (writes are serialised in-process by a lock, so
they queue on the event loop rather than in SQLite) and one reader connection; WAL lets the
reader proceed while another process writes. Each ``aiosqlite`` connection owns a thread,
so no query blocks the event loop, but every call is a thread hop (~0.1 ms measured here),
which dominates a short transaction. So the writer connection uses the sqlite3 module's
``isolation_level="IMMEDIATE"``: its first write statement issues ``BEGIN IMMEDIATE`` in
the same hop, and a turn's write is two hops (insert, commit) instead of five.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from app.clock import now_iso
from app.paths import PathError, ensure_db_dir, file_path
from app.storage.errors import StorageBusy, StorageError
from app.storage.migrate import apply_libsql, load_migrations

_REMOTE_PREFIXES = ("http://", "https://", "libsql://", "ws://", "wss://")


class LibSQLStore:
    engine = "libsql"

    def __init__(self, url: str, *, busy_timeout_ms: int = 5000) -> None:
        self.url = url
        self.busy_timeout_ms = busy_timeout_ms
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
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
            self.applied_migrations = await apply_libsql(self._writer, load_migrations("libsql"), now_iso())
            self._reader = await self._connect(target, isolation_level=None)
        except sqlite3.Error as exc:
            await self.close()
            raise StorageError(f"cannot open database {target}: {exc}") from exc

    async def _connect(self, target: Path | str, *, isolation_level: str | None) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(str(target), isolation_level=isolation_level)
        conn.row_factory = sqlite3.Row
        try:
            await conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            if target != ":memory:":
                async with conn.execute("PRAGMA journal_mode = WAL") as cursor:
                    await cursor.fetchone()
            await conn.execute("PRAGMA synchronous = NORMAL")
            await conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            await conn.close()
            raise
        return conn

    async def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None

    def _require(self, conn: aiosqlite.Connection | None) -> aiosqlite.Connection:
        if conn is None:
            raise StorageError(f"store {self.url} is not open")
        return conn

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        async with self._require(self._reader).execute(sql, params) as cursor:
            return list(await cursor.fetchall())

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        async with self._require(self._reader).execute(sql, params) as cursor:
            return await cursor.fetchone()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One short write transaction; commits on success, rolls back on any error.

        The first write statement inside opens it (``BEGIN IMMEDIATE``), waiting up to
        ``busy_timeout`` for another process's write lock; past that, ``StorageBusy``.
        """
        conn = self._require(self._writer)
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
                "open": self.is_open}


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)
