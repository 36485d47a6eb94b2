"""The default store: the SQLite file format (what LibSQL speaks) through ``sqlite3``.

Several processes (gateway and studio) write the same file, so every connection runs in
WAL mode with a ``busy_timeout``, and every write is a short ``BEGIN IMMEDIATE``
transaction: the write lock is taken up front, so a writer waits in SQLite's busy handler
instead of failing half-way with "database is locked" on lock upgrade.

Each process keeps one writer connection and a small pool of reader connections handed
out from a queue (datasette's pattern): a slow read (a search over 300k messages) holds one
reader while the others keep answering, and WAL lets every reader proceed while another
process writes. Each reader is an ``aiosqlite`` connection, which owns a thread, so no query
blocks the event loop; but every call is a thread hop (~0.1 ms measured here), which would
dominate a short write transaction. So the writer is a plain ``sqlite3`` connection owned by
one thread of its own (a one-worker ``ThreadPoolExecutor``), and a write is a whole
function, ``run_write(work)``: ``work(conn)`` runs there between ``BEGIN IMMEDIATE`` and
``COMMIT`` (``ROLLBACK`` if it raises), one hop however many statements it runs. Writes are
serialised by that one thread, in the order they were asked for; nothing awaits while a
transaction is open, so one transaction never waits on the event loop for another's next
statement. ``work`` is plain code: it must not touch the event loop or anything it owns,
nor have any effect outside the transaction (it may run again, see below).

The writes asked for while the writer is busy share its next transaction (group commit:
``dev_server.storage.group_commit``, ``run_group`` below): a work that raises gets its own
error and the others commit without it; every caller is answered after the ``COMMIT``.
A caller cancelled while its write waits in the queue skips it; once ``work`` has started
it runs to the end of its group whatever the caller does, so a write is still all or
nothing.

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
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from dev_server.kernel.clock import now_iso
from dev_server.paths import PathError, ensure_db_dir, file_path
from dev_server.storage.checkpoints import DEFAULT_DELAY_S, WAL_LIMIT_BYTES, Checkpointer
from dev_server.storage.errors import StorageBusy, StorageError
from dev_server.storage.group_commit import DEFAULT_MAX_GROUP, Write, WriteQueue
from dev_server.storage.migrate import apply_libsql, load_migrations

_REMOTE_PREFIXES = ("http://", "https://", "libsql://", "ws://", "wss://")
DEFAULT_READERS = 4
T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]


class LibSQLStore:
    engine = "libsql"

    def __init__(self, url: str, *, busy_timeout_ms: int = 5000, readers: int = DEFAULT_READERS,
                 max_group: int = DEFAULT_MAX_GROUP, checkpoint_after_s: float | None = DEFAULT_DELAY_S) -> None:
        """``checkpoint_after_s``: WAL checkpoints on a thread of their own, this long after a
        commit (dev_server.storage.checkpoints); None: SQLite's own, on the writer."""
        self.url = url
        self.checkpoint_after_s = checkpoint_after_s
        self.busy_timeout_ms = busy_timeout_ms
        self.reader_count = max(1, readers)
        self.max_group = max_group
        self._writer: sqlite3.Connection | None = None
        self._writer_thread: ThreadPoolExecutor | None = None
        self._writes: WriteQueue | None = None
        self._checkpoints: Checkpointer | None = None
        self._readers: list[aiosqlite.Connection] = []
        self._idle: deque[aiosqlite.Connection] = deque()
        self._waiting: deque[asyncio.Future[aiosqlite.Connection]] = deque()
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
                f"{self.url}: a libsql server is reached over HTTP (http://, https:// or libsql://), not WebSocket"
            )
        try:
            target = ensure_db_dir(self.url) or self.url
        except PathError as exc:
            raise StorageError(str(exc)) from exc
        try:
            self._writer_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
            writer = await self._on_writer(sqlite3.connect, str(target), isolation_level=None)
            self._writer = writer
            self._writes = WriteQueue(self._writer_thread, partial(run_group, writer), self.max_group)
            writer.row_factory = sqlite3.Row
            await self._set_pragmas(target, lambda sql: self._on_writer(_fetch_sync, writer, sql))
            migrations = load_migrations("libsql")
            self.applied_migrations = await self._retry_locked(lambda: self._on_writer(
                _transaction, writer, partial(apply_libsql, migrations=migrations, now=now_iso())))
            if target != ":memory:" and self.checkpoint_after_s is not None:
                self._checkpoints = Checkpointer(target, delay_s=self.checkpoint_after_s)
                await self._checkpoints.open()
                await self._on_writer(_fetch_sync, writer, "PRAGMA wal_autocheckpoint = 0")
            for _ in range(self.reader_count):
                reader = await self._connect(target)
                self._readers.append(reader)
                self._idle.append(reader)
        except sqlite3.Error as exc:
            await self.close()
            raise StorageError(f"cannot open database {target}: {exc}") from exc

    def _on_writer(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Awaitable[T]:
        """Run ``fn`` on the writer's thread (the only thread that touches the writer)."""
        return asyncio.get_running_loop().run_in_executor(self._writer_thread, partial(fn, *args, **kwargs))

    async def _retry_locked(self, step: Callable[[], Awaitable[T]]) -> T:
        return await retry_locked(step, self.busy_timeout_ms)

    async def _set_pragmas(self, target: Path | str, run: Callable[[str], Awaitable[Any]]) -> None:
        await run(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        if target != ":memory:":
            await self._retry_locked(lambda: run("PRAGMA journal_mode = WAL"))
        await run("PRAGMA synchronous = NORMAL")
        await run(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")  # the WAL file, when it starts again
        await run("PRAGMA foreign_keys = ON")

    async def _connect(self, target: Path | str) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(str(target), isolation_level=None)
        conn.row_factory = sqlite3.Row
        try:
            await self._set_pragmas(target, partial(_fetch_pragma, conn))
        except BaseException:
            await conn.close()
            raise
        return conn

    async def close(self) -> None:
        if self._checkpoints is not None:
            await self._checkpoints.close()
            self._checkpoints = None
        for conn in self._readers:
            await conn.close()
        if self._writer is not None:
            await self._on_writer(self._writer.close)
        if self._writer_thread is not None:
            self._writer_thread.shutdown(wait=True)  # idle by now: its last job closed the connection
        self._readers, self._writer, self._writer_thread, self._writes = [], None, None, None
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

    async def run_write(self, work: Work[T]) -> T:
        """Run ``work(conn)`` as one transaction on the writer thread and return its result;
        commits if it returns, rolls back (and re-raises) if it raises.

        ``BEGIN IMMEDIATE`` takes the write lock first, waiting up to ``busy_timeout`` for
        another process's; past that, ``StorageBusy``. Reads in ``work`` see its own writes.
        """
        if self._writes is None:
            raise StorageError(f"store {self.url} is not open")
        try:
            return await self._writes.submit(work)
        except sqlite3.OperationalError as exc:
            if is_locked(exc):
                raise StorageBusy(f"database {self.url} is locked by another writer") from exc
            raise
        finally:
            if self._checkpoints is not None:
                self._checkpoints.committed()

    def health(self) -> dict[str, Any]:
        writes = self._writes
        return {"engine": self.engine, "url": self.url, "path": str(self.path) if self.path else None,
                "open": self.is_open, "readers": len(self._readers),
                "writes": {"writes": writes.writes, "transactions": writes.groups, "queued": len(writes),
                           "checkpoints": self._checkpoints.runs if self._checkpoints else 0,
                           "walRestarts": self._checkpoints.restarts if self._checkpoints else 0}
                if writes is not None else None}


def _transaction(conn: sqlite3.Connection, work: Work[T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


_SAVEPOINT, _ROLLBACK_TO, _RELEASE = "SAVEPOINT grouped", "ROLLBACK TO grouped", "RELEASE grouped"


def run_group(conn: sqlite3.Connection, group: list[Write]) -> None:
    """Run a group of writes as one transaction (dev_server.storage.group_commit); settles
    every write's outcome.

    Optimistic first: the works one after another, one ``COMMIT`` (a savepoint per work
    would cost two more statements per write, each a trip out of the GIL and back). When one
    fails, the transaction is rolled back, that work keeps its error, and the others run
    again, each in a savepoint of its own, so that a second failure is rolled back alone."""
    if len(group) == 1:
        _alone(conn, group[0])
        return
    if not _begin(conn, group):
        return
    try:
        results = []
        for write in group:
            try:
                results.append(write.work(conn))
            except BaseException as exc:
                write.outcome.set_exception(exc)
                break
        else:
            conn.execute("COMMIT")
            for write, result in zip(group, results, strict=True):
                write.outcome.set_result(result)
            return
    except sqlite3.Error:
        pass  # the COMMIT failed: nothing was written
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise  # the queue fails every write not settled yet
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    _in_savepoints(conn, [write for write in group if not write.outcome.done()])


def _begin(conn: sqlite3.Connection, group: list[Write]) -> bool:
    try:
        conn.execute("BEGIN IMMEDIATE")
    except BaseException as exc:  # locked past busy_timeout: the group waited as one write would
        for write in group:
            write.outcome.set_exception(exc)
        return False
    return True


def _in_savepoints(conn: sqlite3.Connection, group: list[Write]) -> None:
    """The group again, each work in a savepoint of its own: a failed one is rolled back
    alone and gets its error. When SQLite ends the whole transaction inside a work (disk
    full, an I/O error) or the ``COMMIT`` fails, nothing was written: the writes not
    settled yet run one transaction each."""
    if len(group) <= 1:
        _one_by_one(conn, group)
        return
    if not _begin(conn, group):
        return
    done: list[tuple[Write, Any]] = []
    try:
        for write in group:
            conn.execute(_SAVEPOINT)
            try:
                result = write.work(conn)
            except BaseException as exc:
                write.outcome.set_exception(exc)
                if not conn.in_transaction:
                    break
                conn.execute(_ROLLBACK_TO)
                conn.execute(_RELEASE)
                continue
            conn.execute(_RELEASE)
            done.append((write, result))
        else:
            conn.execute("COMMIT")
            for write, result in done:
                write.outcome.set_result(result)
            return
    except sqlite3.Error:
        pass
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    _one_by_one(conn, [write for write in group if not write.outcome.done()])


def _one_by_one(conn: sqlite3.Connection, writes: list[Write]) -> None:
    for write in writes:
        _alone(conn, write)


def _alone(conn: sqlite3.Connection, write: Write) -> None:
    write.run_alone(partial(_transaction, conn))


def _fetch_sync(conn: sqlite3.Connection, sql: str) -> Any:
    return conn.execute(sql).fetchone()


async def _fetch_pragma(conn: aiosqlite.Connection, sql: str) -> Any:
    async with conn.execute(sql) as cursor:
        return await cursor.fetchone()


async def retry_locked(step: Callable[[], Awaitable[T]], busy_timeout_ms: int) -> T:
    """Run ``step``; while it fails with "locked"/"busy", retry with jittered backoff until
    ``busy_timeout_ms`` has passed, then let the last error through."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.005
    while True:
        try:
            return await step()
        except sqlite3.OperationalError as exc:
            if not is_locked(exc) or time.monotonic() + delay > deadline:
                raise
        await asyncio.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.25)


def is_locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)
