"""Trace-query discovery: the fields a query can filter on, and suggested values for one.

``fields`` answers Mastra's ``POST /observability/traces/query/fields``: the registry of the
scope (``query_fields``, filtered by ``search``; it does not count against ``limit``) and, for
the ``trace`` scope, the top-level string keys observed in the metadata of qualifying traces
as ``metadata.<key>``, most frequent first. ``values`` answers ``.../query/values``: the
distinct non-empty string values of one suggestable field with their counts, most frequent
first. Qualifying traces are those started in ``[start, end)`` (and, with auth on, of the
caller's resource); span values come from those traces' spans (of that resource too).
Both fetch one row past ``limit`` to say whether the answer was truncated. Scores and
feedback are never recorded here, so their scopes observe nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dev_server.storage.duckdb_store import DuckDBStore
from dev_server.storage.observability.query_fields import MAX_PATH_BYTES, canonical, expression

MAX_VALUE_BYTES = 4096


def _qualifying(start: datetime, end: datetime, resource: str | None) -> tuple[str, list[Any]]:
    sql, params = "t.started_at >= ? AND t.started_at < ?", [start, end]
    if resource is not None:
        sql, params = sql + " AND t.resource_id = ?", [*params, resource]
    return sql, params


async def fields(store: DuckDBStore, scope: str, *, search: str, limit: int, start: datetime, end: datetime,
                 resource: str | None = None) -> dict[str, Any]:
    observed: list[dict[str, Any]] = []
    if scope == "trace":
        where, params = _qualifying(start, end, resource)
        rows = await store.fetch_all(
            "SELECT e.key AS key, count(*) AS n FROM traces t, json_each(t.metadata) e "
            f"WHERE {where} AND json_type(t.metadata) = 'OBJECT' AND e.type = 'VARCHAR' AND e.key <> '' "
            "AND NOT contains(e.key, '.') AND octet_length(encode('metadata.' || e.key)) <= ? "
            "AND contains(lower('metadata.' || e.key), lower(?)) "
            "GROUP BY e.key ORDER BY n DESC, e.key LIMIT ?", [*params, MAX_PATH_BYTES, search.strip(), limit + 1])
        observed = [{"path": f"metadata.{r['key']}", "valueKind": "string",
                     "operators": ["eq", "ne", "in", "notIn", "exists", "notExists"], "valueSuggestions": True,
                     "occurrences": r["n"]} for r in rows]
    return {"canonicalFields": canonical(scope, search), "observedFields": observed[:limit],
            "observedFieldsTruncated": len(observed) > limit}


async def values(store: DuckDBStore, scope: str, path: str, *, search: str, limit: int, start: datetime,
                 end: datetime, resource: str | None = None) -> dict[str, Any]:
    """Values of a field the registry marks ``suggest`` (the caller checks that)."""
    if scope not in ("trace", "spans"):
        return {"values": [], "valuesTruncated": False}
    where, params = _qualifying(start, end, resource)
    alias = "t" if scope == "trace" else "s"
    value, value_params = expression(scope, path, alias)
    source = "traces t"
    if scope == "spans":
        source = "spans s JOIN traces t ON s.trace_id = t.trace_id"
        if resource is not None:
            where, params = where + " AND s.resource_id = ?", [*params, resource]
    rows = await store.fetch_all(
        f"SELECT v, count(*) AS n FROM (SELECT {value} AS v FROM {source} WHERE {where}) "
        "WHERE v IS NOT NULL AND v <> '' AND octet_length(encode(v)) <= ? AND contains(lower(v), lower(?)) "
        "GROUP BY v ORDER BY n DESC, v LIMIT ?",
        [*value_params, *params, MAX_VALUE_BYTES, search.strip(), limit + 1])
    found = [{"value": r["v"], "count": r["n"]} for r in rows]
    return {"values": found[:limit], "valuesTruncated": len(found) > limit}
