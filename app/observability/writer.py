"""Writes span, trace and log rows into the observability store, one request at a time.

Rows come from ``otlp_mapping`` (the studio's OTLP receivers, and the studio's own spans
through its in-process exporter). Each call is all-or-nothing: its appender batches (one
per table) run inside one explicit transaction, as ONE job on the store's worker thread,
so a trace row never lands without its spans and no other caller's statement can slip in
between (DuckDB's appender takes part in BEGIN/COMMIT; a failed append is rolled back).

Errors are split by who can fix them: ``RowsRejected`` (the rows themselves: a NULL in a
NOT NULL column, a value DuckDB cannot convert) is the sender's; any other ``StorageError``
is the store's, and a sender should retry later.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from app.observability.otlp_mapping import LOG_COLUMNS, SPAN_COLUMNS, TRACE_COLUMNS
from app.storage.duckdb_store import DuckDBStore
from app.storage.errors import StorageError, first_line

Rows = Sequence[Sequence[Any]]
Batch = tuple[str, Sequence[str], Rows]


class RowsRejected(StorageError):
    """The store refused the rows' values; nothing of the request was written."""


class ObservabilityWriter:
    def __init__(self, store: DuckDBStore) -> None:
        self.store = store

    async def write_spans(self, span_rows: Rows, trace_rows: Rows = ()) -> int:
        """Spans and their trace rows (``SPAN_COLUMNS``, ``TRACE_COLUMNS``) in one transaction."""
        return await self.store.run(_job(_span_batches(span_rows, trace_rows)))

    def write_spans_blocking(self, span_rows: Rows, trace_rows: Rows = (), timeout: float | None = 30.0) -> int:
        """``write_spans`` from a non-event-loop thread (an OpenTelemetry processor thread)."""
        return self.store.run_blocking(_job(_span_batches(span_rows, trace_rows)), timeout)

    async def write_logs(self, rows: Rows) -> int:
        return await self.store.run(_job([("logs", LOG_COLUMNS, rows)]))

    def write_logs_blocking(self, rows: Rows, timeout: float | None = 30.0) -> int:
        return self.store.run_blocking(_job([("logs", LOG_COLUMNS, rows)]), timeout)

    async def delete_older_than(self, days: int) -> int:
        """Retention: drop spans and traces that started, and logs stamped, over ``days`` ago."""
        if days < 0:
            raise ValueError("days must be >= 0")
        cutoff = datetime.now(timezone.utc) - timedelta(days=days)

        def delete(con) -> int:
            statements = ("DELETE FROM spans WHERE started_at < ?", "DELETE FROM traces WHERE started_at < ?",
                          "DELETE FROM logs WHERE timestamp < ?")
            return _in_transaction(con, lambda: sum(con.execute(sql, [cutoff]).fetchone()[0] for sql in statements))

        return await self.store.run(delete)


def _span_batches(span_rows: Rows, trace_rows: Rows) -> list[Batch]:
    return [("spans", SPAN_COLUMNS, span_rows), ("traces", TRACE_COLUMNS, trace_rows)]


def _job(batches: list[Batch]):
    batches = [batch for batch in batches if batch[2]]

    def append_all(con) -> int:
        if not batches:
            return 0

        def appends() -> int:
            for table, columns, rows in batches:
                with con.appender(table, columns=list(columns)) as appender:
                    appender.append_rows(rows)
            return sum(len(rows) for _, _, rows in batches)

        return _in_transaction(con, appends)

    return append_all


def _in_transaction(con, work):
    import duckdb  # the gateway never imports DuckDB; only the studio gets here

    con.execute("BEGIN TRANSACTION")
    try:
        result = work()
        con.execute("COMMIT")
        return result
    except BaseException as exc:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # a failed COMMIT has already ended the transaction
        if isinstance(exc, (duckdb.DataError, duckdb.IntegrityError, duckdb.InvalidInputException,
                            TypeError, ValueError, OverflowError)):
            raise RowsRejected(f"rows rejected by the observability store: {first_line(exc)}") from exc
        if isinstance(exc, duckdb.Error):
            raise StorageError(f"observability write failed: {first_line(exc)}") from exc
        raise
