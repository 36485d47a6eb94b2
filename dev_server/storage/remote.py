"""The default store on a libsql server (sqld): the way out of one machine (docs/architecture.md#decisions).

Same interface as ``LibSQLStore`` (``fetch_all``, ``fetch_one``, ``run_write``), so every
store above it runs its SQL unchanged. ``DEV_SERVER_DB_URL=http://host:port`` (or
``https://``; ``libsql://host`` means ``https://host``), ``DEV_SERVER_DB_AUTH_TOKEN`` for a
server that wants one (or ``?authToken=`` on the URL, as Turso prints it).

* Reads are one HTTP request each (execute + close on a fresh stream), sent by a small pool
  of reader threads, each over its own kept-alive connection (``hrana.PipelineClient``:
  the standard library's client, measured cheaper than httpx's; see its docstring).
* A write ``run_write(work)`` runs ``work`` on a worker thread against an
  ``dev_server.storage.hrana.Transaction``: ``BEGIN IMMEDIATE``, the work's statements and
  ``COMMIT`` go out in as few requests as the work's reads allow (one when it reads
  nothing). The server serialises write transactions itself: a second ``BEGIN IMMEDIATE``
  waits there for the first to end. This process still sends one transaction at a time,
  in order, like the embedded store: with 8 in flight (tried, bench/scale_out.py), a
  transaction that read first held the server's write lock while its thread waited for the
  GIL behind the others, sqld's transaction timeout took the lock from it ("Stream handle
  not found"), and turns failed with 503 under 32 clients.
* Writes asked for while one runs share the next transaction (group commit,
  ``dev_server.storage.group_commit``): their statements go out together, in the order asked,
  and ``COMMIT`` once. A statement's error surfaces at the next flush, which may be another
  work's, so a group is not split with savepoints here: when anything in it fails, the
  whole group is rolled back (nothing of it was committed) and its writes run again one
  transaction each, so every caller gets its own outcome. The server unreachable, or its
  lock held past the timeout, is not any one write's failure: every write of the group
  gets that error at once (and a locked one is retried by its caller), rather than each
  waiting for it again.
* Migrations run as one such transaction, so N replicas starting at once apply each once.
* The server unreachable (down, restarting, a partition longer than the timeout) is
  ``StorageUnavailable``: a 503 with a JSON error, never a hang; a failed write left nothing
  behind (its transaction dies with its stream).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from dev_server.kernel.clock import now_iso
from dev_server.storage.errors import StorageBusy, StorageError
from dev_server.storage.group_commit import DEFAULT_MAX_GROUP, Write, WriteQueue
from dev_server.storage.hrana import PipelineClient, Row, StorageUnavailable, Transaction, read_result, statement
from dev_server.storage.libsql import is_locked, retry_locked
from dev_server.storage.migrate import apply_libsql, load_migrations

T = TypeVar("T")
REMOTE_PREFIXES = ("http://", "https://", "libsql://")
DEFAULT_TIMEOUT_S = 10.0
WRITERS = 1  # write transactions in flight at once (see the module docstring)
READERS = 4  # reads in flight at once, each on its reader thread's kept-alive connection


def pipeline_url(url: str) -> str:
    base = "https://" + url.removeprefix("libsql://") if url.startswith("libsql://") else url
    return base.split("?", 1)[0].rstrip("/") + "/v2/pipeline"


class RemoteLibSQLStore:
    engine = "libsql"

    def __init__(self, url: str, *, auth_token: str | None = None, busy_timeout_ms: int = 5000,
                 timeout_s: float = DEFAULT_TIMEOUT_S, max_group: int = DEFAULT_MAX_GROUP) -> None:
        if not url.startswith(REMOTE_PREFIXES):
            raise StorageError(f"not a libsql server URL: {url} (http://, https:// or libsql://)")
        query = parse_qs(urlsplit(url).query)
        auth_token = auth_token or next(iter(query.get("authToken", [])), None)  # Turso's URL form
        self.url = url.split("?", 1)[0]  # what /health shows: never a token
        self.endpoint = pipeline_url(url)
        self.busy_timeout_ms = busy_timeout_ms
        headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
        self._timeout_s = timeout_s
        self._headers = headers
        self._reader_threads: ThreadPoolExecutor | None = None
        self._local = threading.local()  # each reader thread's connection
        self._read_clients: list[PipelineClient] = []
        self._writes: PipelineClient | None = None  # used by the writer thread only
        self._writer_thread: ThreadPoolExecutor | None = None
        self._queue: WriteQueue | None = None
        self.max_group = max_group
        self.applied_migrations: list[int] = []
        self.round_trips = 0  # write requests sent, and
        self.transactions = 0  # write transactions run
        self.reads = 0  # read requests sent (these three for /health and the benchmark)
        self._counting = threading.Lock()

    @property
    def path(self) -> Path | None:
        return None

    @property
    def is_open(self) -> bool:
        return self._reader_threads is not None

    async def open(self) -> None:
        if self._reader_threads is not None:
            return
        self._reader_threads = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="libsql-reader")
        self._writes = PipelineClient(self.endpoint, headers=self._headers, timeout_s=self._timeout_s)
        self._writer_thread = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="libsql-writer")
        self._queue = WriteQueue(self._writer_thread, self._run_group, self.max_group)
        try:
            migrations = load_migrations("libsql")
            self.applied_migrations = await self.run_write(partial(apply_libsql, migrations=migrations,
                                                                   now=now_iso()))
        except (StorageError, sqlite3.Error) as exc:
            await self.close()
            raise StorageError(f"cannot open database {self.url}: {exc}") from exc

    async def close(self) -> None:
        for pool in (self._reader_threads, self._writer_thread):
            if pool is not None:
                pool.shutdown(wait=True)
        for client in (*self._read_clients, *([self._writes] if self._writes else [])):
            client.close()
        self._read_clients, self._reader_threads, self._writes, self._writer_thread = [], None, None, None
        self._queue = None

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        if self._reader_threads is None:
            raise StorageError(f"store {self.url} is not open")
        body = {"requests": [{"type": "execute", "stmt": statement(sql, params)}, {"type": "close"}]}
        self.reads += 1
        return await asyncio.get_running_loop().run_in_executor(self._reader_threads, self._read, body)

    def _read(self, body: dict[str, Any]) -> list[Row]:
        """On a reader thread, over that thread's own kept-alive connection."""
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = PipelineClient(self.endpoint, headers=self._headers,
                                                         timeout_s=self._timeout_s)
            with self._counting:
                self._read_clients.append(client)
        return read_result(client.post(body))

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None

    async def run_write(self, work: Any) -> Any:
        """``work(transaction)`` as one transaction (or with the writes queued beside it, as
        one group) on the writer thread; its result, or its error after the rollback. Still
        locked after ``busy_timeout``: ``StorageBusy``."""
        queue = self._queue
        if queue is None:
            raise StorageError(f"store {self.url} is not open")
        try:  # the transaction never committed, so running ``work`` again is safe
            return await retry_locked(lambda: queue.submit(work), self.busy_timeout_ms)
        except sqlite3.OperationalError as exc:
            if is_locked(exc):
                raise StorageBusy(f"database {self.url} is locked by another writer") from exc
            raise

    def _run_group(self, group: list[Write]) -> None:
        """On the writer thread: the group as one transaction; if anything in it fails, each
        write again in a transaction of its own (see the module docstring)."""
        if len(group) > 1:
            try:
                results = self._transaction(lambda transaction: [write.work(transaction) for write in group])
            except (StorageUnavailable, StorageBusy, sqlite3.OperationalError) as exc:
                if not isinstance(exc, sqlite3.OperationalError) or is_locked(exc):  # the server's, not a write's
                    for write in group:  # each caller fails (a lock: retries) as it would have alone
                        write.outcome.set_exception(exc)
                    return
            except BaseException:  # noqa: S110 - every write is run again below and gets its own outcome
                pass
            else:
                for write, result in zip(group, results, strict=True):
                    write.outcome.set_result(result)
                return
        for write in group:
            write.run_alone(self._transaction)

    def _transaction(self, work: Any) -> Any:
        assert self._writes is not None
        transaction = Transaction(self._writes)
        try:
            result = work(transaction)
            transaction.commit()
        except BaseException:
            transaction.rollback()
            raise
        finally:
            with self._counting:
                self.round_trips += transaction.round_trips
                self.transactions += 1
        return result

    def health(self) -> dict[str, Any]:
        return {"engine": self.engine, "url": self.url, "path": None, "open": self.is_open, "server": True,
                "requests": {"reads": self.reads, "writes": self.round_trips, "transactions": self.transactions},
                "writes": {"writes": queue.writes, "transactions": queue.groups, "queued": len(queue)}
                if (queue := self._queue) is not None else None}


def ping(url: str, auth_token: str | None = None, timeout_s: float = 2.0) -> bool:
    """Whether a libsql server answers at ``url`` (the tests wait for sqld with it)."""
    headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
    client = PipelineClient(pipeline_url(url), headers=headers, timeout_s=timeout_s)
    try:
        client.post({"requests": [{"type": "execute", "stmt": statement("SELECT 1")}, {"type": "close"}]})
        return True
    except StorageError:
        return False
    finally:
        client.close()
