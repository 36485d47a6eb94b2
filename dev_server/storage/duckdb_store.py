"""The observability store: spans, traces and logs in one DuckDB file.

DuckDB allows one process to hold a file read-write and refuses every other process, even
read-only, so only the studio opens it (docs/architecture.md#decisions). The Python API is blocking
and a connection must not be used from two threads at once, so every call runs on one
dedicated worker thread. Inserts go through DuckDB's appender: measured on this machine,
about 200x faster than ``executemany`` for the same rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from dev_server.kernel.clock import now_iso
from dev_server.paths import PathError, ensure_db_dir, file_path
from dev_server.storage.errors import StorageError, first_line
from dev_server.storage.migrate import apply_duckdb, load_migrations

T = TypeVar("T")
log = logging.getLogger("dev-server.observability")

# Without a limit of ours, DuckDB caches the blocks it wrote up to its own, 80 % of the RAM:
# the studio's RSS grew with the spans it stored, by hundreds of megabytes. Its primary-key
# indexes (ART) must fit in memory whatever the limit (past it, a write or a checkpoint fails),
# and they are not always in memory when looked at: a checkpoint writes them out, a restart
# opens them on disk, and the next insert reads them back whole. So the limit follows the
# keys stored (KEY_BYTES a string key, above the ~100 measured; SPAN_KEY_BYTES a span's
# 16-byte key, above the ~40 measured) or the indexes' size in memory, whichever is larger,
# never lower than it was in this process, plus a room for the rest: CACHE_MB at first.
# A checkpoint compresses a column 2,048 rows at a time, all of them pinned: 2,048 spans whose
# input is 30 kB each need 60 MB at once, past such a room, and DuckDB then gives up the whole
# database (a FATAL error: every later statement refused until it is opened again). Its
# writes are in the WAL by then, so the store opens the file again with twice the room (up to
# ROOM_CAP_MB) and runs the job again: the WAL replayed, a batch already stored is upserted.
# So the room starts small (a 10-minute soak, 661,000 spans: the studio's RSS 138-177 MB at
# 32 MB against 149-194 at 64, trace-list queries as fast) and grows where spans need it.
CACHE_MB = 32
ROOM_CAP_MB = 1024
KEY_BYTES = 160
SPAN_KEY_BYTES = 64
REFIT_EVERY = 16  # writes between two looks (~0.1 MB of index a write)
# Rows written since the last checkpoint are held in memory (DuckDB's "IN_MEMORY_TABLE") until
# the WAL reaches this size: at DuckDB's 16 MB, up to 16 MB of the studio's RSS. 640,000 spans
# written through the store alone: RSS 145-146 MB at 8 MiB against 155-158 at 16, the CPU per
# span the same; at 4 MiB ingest cost ~15 % more CPU and at 2 MiB a third (checkpoints that
# write the table's last, still growing row group again, presumably).
CHECKPOINT_WAL = "8MiB"
_NEEDED_BYTES_SQL = (f"SELECT (SELECT count(*) FROM spans) * {SPAN_KEY_BYTES}"
                     f" + ((SELECT count(*) FROM traces) + (SELECT count(*) FROM logs)) * {KEY_BYTES}")
_INDEX_BYTES_SQL = "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'ART_INDEX'"


class DuckDBStore:
    engine = "duckdb"

    def __init__(self, url: str, *, memory_mb: int | None = None) -> None:
        self.url = url
        self.memory_mb = memory_mb  # DuckDB's memory_limit (None: what the indexes need + CACHE_MB, kept so)
        self._con = None
        self._writes = 0
        self._index_bytes = 0  # the most the indexes were found to need in this process
        self._room_mb = CACHE_MB  # the limit's room beside the indexes (grows after a FATAL error)
        self.reopened = 0  # times the database was opened again after a FATAL error
        self._executor: ThreadPoolExecutor | None = None

    @property
    def path(self) -> Path | None:
        return file_path(self.url)

    @property
    def is_open(self) -> bool:
        return self._con is not None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="duckdb")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def open(self) -> None:
        if self._con is None:
            await self._run(self._open_sync)

    def _open_sync(self) -> None:
        import duckdb  # imported here: the gateway never opens DuckDB

        try:
            target = ensure_db_dir(self.url)
        except PathError as exc:
            raise StorageError(str(exc)) from exc
        try:
            # a fixed limit (DEV_SERVER_TRACE_MEMORY_MB) is only safe with retention: see CACHE_MB
            config = {"checkpoint_threshold": CHECKPOINT_WAL}
            if self.memory_mb:
                config["memory_limit"] = f"{self.memory_mb}MB"
            con = duckdb.connect(str(target) if target else ":memory:", config=config)
        except duckdb.Error as exc:
            raise StorageError(f"cannot open observability database {target}: {first_line(exc)}") from exc
        try:
            apply_duckdb(con, load_migrations("duckdb"), now_iso())
        except duckdb.Error as exc:
            con.close()
            raise StorageError(f"cannot migrate observability database {target}: {first_line(exc)}") from exc
        self._con = con
        self._fit_memory_limit(con)

    def wrote(self, con) -> None:
        """After a write, on the worker thread: now and then, the limit follows the indexes."""
        self._writes += 1
        if self._writes % REFIT_EVERY == 0:
            self._fit_memory_limit(con)

    def _fit_memory_limit(self, con) -> None:
        if self.memory_mb or self.path is None:  # configured, or in memory (nothing to evict its blocks to)
            return
        (needed,) = con.execute(_NEEDED_BYTES_SQL).fetchone()
        (in_memory,) = con.execute(_INDEX_BYTES_SQL).fetchone()
        self._index_bytes = max(self._index_bytes, needed, in_memory)
        con.execute(f"SET memory_limit = '{self.memory_limit_mb}MiB'")

    async def close(self) -> None:
        if self._con is not None:
            await self._run(self._con.close)
            self._con = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _require(self):
        if self._con is None:
            raise StorageError(f"observability store {self.url} is not open")
        return self._con

    async def append(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int:
        """Append rows in one batch through the appender; returns the row count."""
        if not rows:
            return 0

        def append_sync(con) -> int:
            with con.appender(table, columns=list(columns)) as appender:
                appender.append_rows(rows)
            return len(rows)

        return await self.run(append_sync)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        def query_sync(con) -> list[dict[str, Any]]:
            cursor = con.execute(sql, list(params))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

        return await self.run(query_sync)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        await self.run(lambda con: con.execute(sql, list(params)))

    async def run(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(connection)`` as one job on the worker thread, so several statements (a
        transaction around two appends) cannot interleave with another caller's."""
        return await self._run(self._job, fn)

    def _job(self, fn: Callable[[Any], T]) -> T:
        """``fn(connection)`` on the worker thread; after a FATAL error, once more on the
        database opened again with more room (ROOM_CAP_MB above)."""
        try:
            return fn(self._require())
        except Exception:
            if not self._invalidated():
                raise
        self._reopen()
        return fn(self._require())

    def _invalidated(self) -> bool:
        import duckdb

        con = self._con
        if con is None or self.path is None:  # in memory, opening it again would lose every row
            return False
        try:
            con.execute("SELECT 1").fetchall()
        except duckdb.FatalException:
            return True
        except duckdb.Error:
            pass
        return False

    def _reopen(self) -> None:
        import duckdb

        failed_at = self.memory_limit_mb
        with contextlib.suppress(duckdb.Error):
            self._require().close()
        self._con = None
        self.reopened += 1
        self._room_mb = min(self._room_mb * 2, ROOM_CAP_MB)
        self._open_sync()
        log.warning("the observability database %s failed at a memory limit of %s MB (a FATAL error of DuckDB);"
                    " opened again, limit now %s MB", self.path, failed_at, self.memory_limit_mb)

    def run_blocking(self, fn: Callable[[Any], T], timeout: float | None = None) -> T:
        """``run`` for a thread that is not the event loop's (an OpenTelemetry processor
        thread): queued on the same worker thread, waited for. Never call it from that thread."""
        executor = self._executor
        if executor is None or self._con is None:
            raise StorageError(f"observability store {self.url} is not open")
        try:
            future = executor.submit(self._job, fn)
        except RuntimeError as exc:  # shut down by close() meanwhile
            raise StorageError(f"observability store {self.url} is closed") from exc
        return future.result(timeout)

    def health(self) -> dict[str, Any]:
        return {"engine": self.engine, "url": self.url, "path": str(self.path) if self.path else None,
                "open": self.is_open, "memoryLimitMb": self.memory_limit_mb, "reopened": self.reopened}

    @property
    def memory_limit_mb(self) -> int | None:
        """DuckDB's memory limit as this store keeps it (None: in memory, DuckDB's own)."""
        if self.memory_mb:
            return self.memory_mb
        return (self._index_bytes >> 20) + self._room_mb if self.path is not None and self.is_open else None
