"""Reads for the Studio over the observability store (Mastra's Studio REST API: observability).

Trace lists read the ``traces`` table (one row per trace, written with its root span), so
they never scan all spans; ``spans`` is read for one trace's tree, a span, or a
``spans.some`` predicate. Rows leave here in the API's camelCase with ISO timestamps and
explicit nulls, as Mastra's observability rows have.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from dev_server.kernel.clock import parse_iso, to_iso
from dev_server.storage.duckdb_store import DuckDBStore
from dev_server.storage.observability.columns import span_key
from dev_server.storage.observability.where import compile_where

JSON_COLUMNS = {"attributes", "metadata", "input", "output", "error", "tags", "links", "request_context", "data"}

SPAN_FIELDS = {
    "trace_id": "traceId", "span_id": "spanId", "parent_span_id": "parentSpanId", "name": "name",
    "span_type": "spanType", "is_event": "isEvent", "status": "status", "started_at": "startedAt",
    "ended_at": "endedAt", "entity_type": "entityType", "entity_id": "entityId", "entity_name": "entityName",
    "run_id": "runId", "thread_id": "threadId", "resource_id": "resourceId", "user_id": "userId",
    "environment": "environment", "service_name": "serviceName", "source": "source", "attributes": "attributes",
    "metadata": "metadata", "input": "input", "output": "output", "error": "error", "tags": "tags",
    "links": "links", "request_context": "requestContext", "created_at": "createdAt", "updated_at": "updatedAt",
}
TRACE_FIELDS = {
    "trace_id": "traceId", "root_span_id": "rootSpanId", "name": "name", "entity_type": "entityType",
    "entity_id": "entityId", "entity_name": "entityName", "thread_id": "threadId", "resource_id": "resourceId",
    "environment": "environment", "metadata": "metadata", "input_preview": "inputPreview", "status": "status",
    "started_at": "startedAt", "ended_at": "endedAt", "created_at": "createdAt",
}
LOG_FIELDS = {
    "log_id": "logId", "timestamp": "timestamp", "level": "level", "message": "message", "data": "data",
    "tags": "tags", "trace_id": "traceId", "span_id": "spanId", "entity_type": "entityType",
    "entity_id": "entityId", "entity_name": "entityName", "thread_id": "threadId", "resource_id": "resourceId",
    "run_id": "runId", "service_name": "serviceName", "environment": "environment", "metadata": "metadata",
}
LIGHT_SPAN_KEYS = ("traceId", "spanId", "name", "spanType", "isEvent", "startedAt", "endedAt", "parentSpanId",
                   "error", "status", "entityType", "entityId", "entityName", "metadata", "createdAt", "updatedAt")

# flat filter name -> span column, for the list routes
SPAN_FILTERS = {"threadId": "thread_id", "resourceId": "resource_id", "entityType": "entity_type",
                "entityId": "entity_id", "entityName": "entity_name", "spanType": "span_type", "status": "status",
                "runId": "run_id", "userId": "user_id", "traceId": "trace_id", "name": "name",
                "environment": "environment", "serviceName": "service_name"}
LOG_FILTERS = {"level": "level", "traceId": "trace_id", "spanId": "span_id", "entityName": "entity_name",
               "entityType": "entity_type", "threadId": "thread_id", "resourceId": "resource_id", "runId": "run_id",
               "serviceName": "service_name", "environment": "environment"}


def _value(column: str, value: Any) -> Any:
    if isinstance(value, datetime):
        return to_iso(value)
    if column in JSON_COLUMNS and isinstance(value, str):
        return json.loads(value)
    return value


def to_api(row: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    return {api: _value(column, row.get(column)) for column, api in fields.items()}


class CursorError(ValueError):
    """A ``page.after`` this server did not issue (400 TRACE_QUERY_CURSOR_MALFORMED), or one
    issued for another ordering (409 TRACE_QUERY_CURSOR_CONFLICT)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


_ORDER_COLUMNS = {"startedAt": "t.started_at", "endedAt": "coalesce(t.ended_at, t.started_at)"}


def encode_cursor(field: str, descending: bool, moment: datetime, trace_id: str) -> str:
    document = [field, "desc" if descending else "asc", moment.isoformat(), trace_id]
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode()


def decode_cursor(cursor: str, field: str, descending: bool) -> tuple[datetime, str]:
    try:
        document = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        issued_field, direction, moment, trace_id = document
        moment, trace_id = parse_iso(moment), str(trace_id)
        trace_id.encode("utf-8")
    except (ValueError, TypeError, UnicodeError, AttributeError):
        raise CursorError("TRACE_QUERY_CURSOR_MALFORMED", "The trace query cursor is malformed") from None
    if (issued_field, direction) != (field, "desc" if descending else "asc"):
        raise CursorError("TRACE_QUERY_CURSOR_CONFLICT", "The cursor does not match the query")
    return moment, trace_id


async def query_traces(store: DuckDBStore, *, start: datetime | None, end: datetime | None, where: Any,
                       field: str = "startedAt", descending: bool = True, limit: int, after: str | None,
                       resource: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """One page of traces: started in ``[start, end)``, matching ``where``, of ``resource``
    when one is forced, ordered by ``field`` then trace id; the cursor continues after the last."""
    clauses, params = ["TRUE"], []
    order_column = _ORDER_COLUMNS[field]
    if resource is not None:
        clauses.append("t.resource_id = ?")
        params.append(resource)
    if start is not None:
        clauses.append("t.started_at >= ?")
        params.append(start)
    if end is not None:
        clauses.append("t.started_at < ?")
        params.append(end)
    if where:
        sql, values = compile_where(where, resource=resource)
        clauses.append(sql)
        params += values
    if after:
        moment, trace_id = decode_cursor(after, field, descending)
        clauses.append(f"({order_column}, t.trace_id) {'<' if descending else '>'} (?, ?)")
        params += [moment, trace_id]
    order = "DESC" if descending else "ASC"
    rows = await store.fetch_all(
        f"SELECT *, {order_column} AS order_key FROM traces t WHERE {' AND '.join(clauses)} "
        f"ORDER BY order_key {order}, t.trace_id {order} LIMIT ?", [*params, limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    traces = [{**to_api(r, TRACE_FIELDS), "parentSpanId": None} for r in rows]
    last = rows[-1] if rows else None
    next_cursor = encode_cursor(field, descending, last["order_key"], last["trace_id"]) if more and last else None
    return traces, next_cursor


async def _page(store: DuckDBStore, table: str, clauses: list[str], params: list[Any], filters: dict[str, Any],
                columns: dict[str, str], time_column: str, start: datetime | None, end: datetime | None,
                order: str, page: int, per_page: int, fields: dict[str, str]) -> tuple[list[dict[str, Any]], int]:
    """One filtered, time-bounded page of a table and the total count behind it."""
    clauses, params = list(clauses), list(params)
    for name, value in filters.items():
        clauses.append(f"{columns[name]} = ?")
        params.append(value)
    for bound, op in ((start, ">="), (end, "<=")):
        if bound is not None:
            clauses.append(f"{time_column} {op} ?")
            params.append(bound)
    where = " AND ".join(clauses) or "TRUE"
    total = (await store.fetch_all(f"SELECT count(*) AS n FROM {table} WHERE {where}", params))[0]["n"]
    rows = await store.fetch_all(f"SELECT * FROM {table} WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
                                 [*params, per_page, page * per_page])
    return [to_api(r, fields) for r in rows], total


async def list_root_spans(store: DuckDBStore, filters: dict[str, Any], *, page: int, per_page: int, field: str,
                          descending: bool, start: datetime | None = None,
                          end: datetime | None = None) -> tuple[list[dict[str, Any]], int]:
    column = "ended_at" if field == "endedAt" else "started_at"
    order = f"{column} {'DESC' if descending else 'ASC'}, trace_id"
    return await _page(store, "spans", ["parent_span_id IS NULL"], [], filters, SPAN_FILTERS, "started_at",
                       start, end, order, page, per_page, SPAN_FIELDS)


async def trace_spans(store: DuckDBStore, trace_id: str) -> list[dict[str, Any]]:
    rows = await store.fetch_all("SELECT * FROM spans WHERE trace_id = ? ORDER BY started_at, span_id", [trace_id])
    return [to_api(r, SPAN_FIELDS) for r in rows]


async def span(store: DuckDBStore, trace_id: str, span_id: str) -> dict[str, Any] | None:
    rows = await store.fetch_all("SELECT * FROM spans WHERE span_key = ? AND trace_id = ? AND span_id = ?",
                                 [span_key(trace_id, span_id), trace_id, span_id])  # the key's index finds it
    return to_api(rows[0], SPAN_FIELDS) if rows else None


async def list_logs(store: DuckDBStore, filters: dict[str, Any], *, page: int, per_page: int, descending: bool,
                    start: datetime | None, end: datetime | None) -> tuple[list[dict[str, Any]], int]:
    order = f"timestamp {'DESC' if descending else 'ASC'}, log_id"
    return await _page(store, "logs", [], [], filters, LOG_FILTERS, "timestamp", start, end, order, page,
                       per_page, LOG_FIELDS)


async def distinct(store: DuckDBStore, column: str, *, table: str = "traces", entity_type: str | None = None,
                   resource: str | None = None) -> list[str]:
    """The values of ``column`` (a name from this module, never from a client), only over the
    rows of ``resource`` when one is forced."""
    where, params = f"{column} IS NOT NULL", []
    if entity_type:
        where += " AND entity_type = ?"
        params.append(entity_type)
    if resource is not None:
        where += " AND resource_id = ?"
        params.append(resource)
    rows = await store.fetch_all(f"SELECT DISTINCT {column} AS v FROM {table} WHERE {where} ORDER BY 1", params)
    return [r["v"] for r in rows]


async def distinct_tags(store: DuckDBStore, resource: str | None = None) -> list[str]:
    scope, params = ("AND resource_id = ?", [resource]) if resource is not None else ("", [])
    rows = await store.fetch_all(
        f"SELECT DISTINCT unnest(CAST(tags AS VARCHAR[])) AS v FROM spans WHERE tags IS NOT NULL {scope} ORDER BY 1",
        params)
    return [r["v"] for r in rows if r["v"] is not None]
