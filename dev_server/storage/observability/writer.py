"""Writes span, trace and log rows into the observability store, one request at a time.

Rows come from ``otlp_mapping`` (the studio's OTLP receivers, and the studio's own spans
through its in-process exporter). Each call is all-or-nothing: its batches (one per table)
run inside one explicit transaction, as ONE job on the store's worker thread, so a trace
row never lands without its spans and no other caller's statement can slip in between.

Ingest is idempotent (migration 0002 gives every table its natural key; 0003 keeps a span's
as the digest ``span_key``, a smaller index): rows are appended
to their tables directly (DuckDB's appender) while none of their keys is stored yet; a batch
that meets a stored key goes through a per-connection TEMP staging table instead, then one
``INSERT ... ON CONFLICT DO UPDATE`` moves them in. A batch sent again (a sender whose
acknowledgement was lost retries it) replaces its own rows instead of adding copies. A row
may only replace a row of the same resource: a span id that another resource already holds
is left as it is and counted as rejected (``Written.rejected``), so one user cannot
overwrite another's spans by reusing their ids. Log records never change once written, so
a known ``log_id`` is skipped.

Errors are split by who can fix them: ``RowsRejected`` (the rows themselves: a NULL in a
NOT NULL column, a value DuckDB cannot convert) is the sender's; any other ``StorageError``
is the store's, and a sender should retry later.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from dev_server.storage.duckdb_store import DuckDBStore
from dev_server.storage.errors import StorageError, first_line
from dev_server.storage.observability.columns import LOG_COLUMNS, SPAN_COLUMNS, TRACE_COLUMNS, span_key

Rows = Sequence[Sequence[Any]]


class RowsRejected(StorageError):
    """The store refused the rows' values; nothing of the request was written."""


@dataclass(frozen=True)
class Table:
    """How one table takes upserts: its columns (row order), key, and what a conflict does.
    ``digest``: the column the primary key is on, a digest of the key's columns computed
    here (``spans.span_key``: a smaller index than the columns themselves); the rows the
    mapping builds have ``columns``, the rows written ``written``."""

    name: str
    columns: Sequence[str]
    key: tuple[str, ...]
    immutable: bool = False  # True: a known key is skipped instead of updated
    digest: tuple[str, Callable[..., Any]] | None = None  # (column, function of the key's values)

    @property
    def written(self) -> tuple[str, ...]:
        return (*self.columns, self.digest[0]) if self.digest else tuple(self.columns)

    def upsert_sql(self) -> str:
        columns = ", ".join(self.written)
        conflict = self.digest[0] if self.digest else ", ".join(self.key)
        sql = f"INSERT INTO {self.name} ({columns}) SELECT {columns} FROM stage_{self.name} ON CONFLICT ({conflict}) "
        if self.immutable:
            return sql + "DO NOTHING"
        kept = {*self.key, "created_at"}  # a replaced row keeps when it was first stored
        updates = ", ".join(f"{c} = excluded.{c}" for c in self.columns if c not in kept)
        return sql + f"DO UPDATE SET {updates} WHERE {self.name}.resource_id IS NOT DISTINCT FROM excluded.resource_id"

    def prepare(self, rows: Rows) -> list[Sequence[Any]]:
        """One row per key (the last wins: one INSERT may not touch a key twice), each with
        its digest when the table has one."""
        index = [self.columns.index(c) for c in self.key]
        unique = {tuple(row[i] for i in index): row for row in rows}
        if self.digest is None:
            return list(unique.values())
        digest = self.digest[1]
        return [(*row, digest(*key)) for key, row in unique.items()]


SPANS = Table("spans", SPAN_COLUMNS, ("trace_id", "span_id"), digest=("span_key", span_key))
TRACES = Table("traces", TRACE_COLUMNS, ("trace_id",))
LOGS = Table("logs", LOG_COLUMNS, ("log_id",), immutable=True)


@dataclass(frozen=True)
class Written:
    """What one write did: rows stored (inserted or replaced) and rows left out because
    their key belongs to another resource (spans) or is already stored (logs)."""

    stored: int
    rejected: int


class ObservabilityWriter:
    def __init__(self, store: DuckDBStore) -> None:
        self.store = store

    async def write_spans(self, span_rows: Rows, trace_rows: Rows = ()) -> Written:
        """Spans and their trace rows (``SPAN_COLUMNS``, ``TRACE_COLUMNS``) in one transaction."""
        return await self.store.run(self._write_job([(SPANS, span_rows), (TRACES, trace_rows)]))

    def write_spans_blocking(self, span_rows: Rows, trace_rows: Rows = (), timeout: float | None = 30.0) -> Written:
        """``write_spans`` from a non-event-loop thread (an OpenTelemetry processor thread)."""
        return self.store.run_blocking(self._write_job([(SPANS, span_rows), (TRACES, trace_rows)]), timeout)

    async def write_logs(self, rows: Rows) -> Written:
        return await self.store.run(self._write_job([(LOGS, rows)]))

    def write_logs_blocking(self, rows: Rows, timeout: float | None = 30.0) -> Written:
        return self.store.run_blocking(self._write_job([(LOGS, rows)]), timeout)

    def _write_job(self, batches: list[tuple[Table, Rows]]):
        write = _job(batches)

        def write_and_refit(con) -> Written:
            written = write(con)
            self.store.wrote(con)  # the store's memory limit follows its indexes
            return written

        return write_and_refit

    async def delete_older_than(self, days: int) -> int:
        """Retention: drop spans and traces that started, and logs stamped, over ``days`` ago."""
        if days < 0:
            raise ValueError("days must be >= 0")
        cutoff = datetime.now(UTC) - timedelta(days=days)

        def delete(con) -> int:
            statements = ("DELETE FROM spans WHERE started_at < ?", "DELETE FROM traces WHERE started_at < ?",
                          "DELETE FROM logs WHERE timestamp < ?")
            return _in_transaction(con, lambda: sum(con.execute(sql, [cutoff]).fetchone()[0] for sql in statements))

        return await self.store.run(delete)


class _KeysTaken(Exception):
    """A row's key is already stored: the batch is written again as upserts."""


def _job(given: list[tuple[Table, Rows]]):
    """The write as one function of the connection, run on the store's worker thread (the
    rows' preparation too: a digest per span stays off the caller's event loop); the first
    table's counts are reported (spans for a span write: the trace rows are derived from them).

    First the rows are appended to their tables directly, in one transaction: what nearly
    every batch is (new spans), at two thirds of the upsert's cost. A key already stored (a
    retried batch) rolls that back and the batch goes through staging and upserts."""

    def write_all(con) -> Written:
        batches = [(table, table.prepare(rows)) for table, rows in given if rows]
        if not batches:
            return Written(0, 0)
        try:
            return Written(_in_transaction(con, partial(_append_all, con, batches)), 0)
        except _KeysTaken:
            stored = _in_transaction(con, partial(_upsert_all, con, batches))
            return Written(stored, len(batches[0][1]) - stored)

    return write_all


def _upsert_all(con, batches: list[tuple[Table, list[Sequence[Any]]]]) -> int:
    """Each batch through its staging table and one upsert; the first table's rows stored."""
    first = None
    for table, rows in batches:
        # TEMP: private to this connection, so staging never shows in the schema
        con.execute(f"CREATE TEMP TABLE IF NOT EXISTS stage_{table.name} AS "
                    f"SELECT {', '.join(table.written)} FROM {table.name} LIMIT 0")
        with con.appender(f"stage_{table.name}") as appender:
            appender.append_rows(rows)
        (count,) = con.execute(table.upsert_sql()).fetchone()
        con.execute(f"DELETE FROM stage_{table.name}")
        first = count if first is None else first
    return first


def _append_all(con, batches: list[tuple[Table, Rows]]) -> int:
    import duckdb

    for table, rows in batches:
        try:
            with con.appender(table.name, columns=list(table.written)) as appender:
                appender.append_rows(rows)
        except duckdb.ConstraintException as exc:  # a key taken, or a NULL where none may be: the upserts tell
            raise _KeysTaken from exc
    return len(batches[0][1])


def _in_transaction(con, work):
    import duckdb  # the gateway never imports DuckDB; only the studio gets here

    con.execute("BEGIN TRANSACTION")
    try:
        result = work()
        con.execute("COMMIT")
        return result
    except BaseException as exc:
        with contextlib.suppress(duckdb.Error):  # a failed COMMIT has already ended the transaction
            con.execute("ROLLBACK")
        if isinstance(exc, (duckdb.DataError, duckdb.IntegrityError, duckdb.InvalidInputException,
                            TypeError, ValueError, OverflowError)):
            raise RowsRejected(f"rows rejected by the observability store: {first_line(exc)}") from exc
        if isinstance(exc, duckdb.Error):
            raise StorageError(f"observability write failed: {first_line(exc)}") from exc
        raise
