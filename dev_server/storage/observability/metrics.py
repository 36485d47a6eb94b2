"""Mastra metrics (Mastra's Studio REST API: metrics) computed from the span rows in the observability store.

There is no metrics table: every metric is a view over ``spans``, one row per span, timed at
the span's end (``coalesce(ended_at, started_at)``):

- ``mastra_model_total_input_tokens`` / ``..._output_tokens``: ``attributes.usage.inputTokens`` /
  ``outputTokens`` of ``model_generation`` spans (spans without usage are skipped);
- ``mastra_model_input_cache_read_tokens`` / ``..._write_tokens``: ``usage.cachedInputTokens`` or
  ``usage.inputDetails.cacheRead`` / ``usage.inputDetails.cacheWrite`` of ``model_generation``
  spans, 0 when absent (the local model reports none, so these are zero today);
- ``mastra_agent_duration_ms``: ``ended_at - started_at`` of ``agent_run`` spans;
- ``mastra_tool_duration_ms``: the same for ``tool_call``/``mcp_tool_call``/``client_tool_call`` spans;
- ``mastra_workflow_duration_ms``: the same for ``workflow_run`` spans (none exist today).

Labels come from the span's columns (entity, thread, resource, service, status "ok"|"error",
...), ``rootEntity*`` from the trace row, ``parentEntity*`` from the parent span, and ``model`` /
``provider`` from ``model_generation`` attributes. Identifiers in the SQL come only from the
tables below; every value a client sends is bound. No pricing is known, so costs are null.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dev_server.kernel.clock import to_iso
from dev_server.storage.duckdb_store import DuckDBStore

_USAGE = "TRY_CAST(json_extract_string(s.attributes, '$.usage.{}') AS DOUBLE)"
_DURATION = "date_diff('microsecond', s.started_at, s.ended_at) / 1000.0"
_MODEL_TYPES = ("model_generation",)
_DURATIONS = "s.ended_at IS NOT NULL"

# metric name -> (span types, value expression, extra condition, has model labels)
METRICS: dict[str, tuple[tuple[str, ...], str, str, bool]] = {
    "mastra_model_total_input_tokens": (_MODEL_TYPES, _USAGE.format("inputTokens"), "", True),
    "mastra_model_total_output_tokens": (_MODEL_TYPES, _USAGE.format("outputTokens"), "", True),
    "mastra_model_input_cache_read_tokens": (
        _MODEL_TYPES, f"coalesce({_USAGE.format('cachedInputTokens')}, {_USAGE.format('inputDetails.cacheRead')}, 0)",
        "", True),
    "mastra_model_input_cache_write_tokens": (
        _MODEL_TYPES, f"coalesce({_USAGE.format('inputDetails.cacheWrite')}, 0)", "", True),
    "mastra_agent_duration_ms": (("agent_run",), _DURATION, _DURATIONS, False),
    "mastra_tool_duration_ms": (("tool_call", "mcp_tool_call", "client_tool_call"), _DURATION, _DURATIONS, False),
    "mastra_workflow_duration_ms": (("workflow_run",), _DURATION, _DURATIONS, False),
}

# label key -> (column of the metric rows, expression over spans s / parent p / trace t)
DIMENSIONS: dict[str, tuple[str, str]] = {
    "name": ("metric_name", ""), "traceId": ("trace_id", "s.trace_id"), "spanId": ("span_id", "s.span_id"),
    "entityType": ("entity_type", "s.entity_type"), "entityId": ("entity_id", "s.entity_id"),
    "entityName": ("entity_name", "s.entity_name"),
    "parentEntityType": ("parent_entity_type", "p.entity_type"),
    "parentEntityName": ("parent_entity_name", "p.entity_name"),
    "rootEntityType": ("root_entity_type", "t.entity_type"), "rootEntityName": ("root_entity_name", "t.entity_name"),
    "serviceName": ("service_name", "s.service_name"), "environment": ("environment", "s.environment"),
    "threadId": ("thread_id", "s.thread_id"), "resourceId": ("resource_id", "s.resource_id"),
    "runId": ("run_id", "s.run_id"), "userId": ("user_id", "s.user_id"),
    "executionSource": ("execution_source", "s.source"),
    "status": ("status", "CASE s.status WHEN 'success' THEN 'ok' ELSE s.status END"),
    "model": ("model", "json_extract_string(s.attributes, '$.model')"),
    "provider": ("provider", "json_extract_string(s.attributes, '$.provider')"),
}
MODEL_LABELS = ("model", "provider")
FILTER_ALIASES = {"source": "executionSource"}
# filters the API lists that no span column carries: a value there matches no row
UNMAPPED_FILTERS = ("entityVersionId", "parentEntityVersionId", "rootEntityVersionId", "organizationId",
                    "experimentId", "sessionId", "requestId", "costUnit")
DISTINCT_COLUMNS = ("entityType", "entityName", "parentEntityType", "parentEntityName", "rootEntityType",
                    "rootEntityName", "name", "provider", "model", "environment", "executionSource",
                    "serviceName", "threadId", "resourceId")
AGGREGATIONS = ("sum", "avg", "min", "max", "count", "count_distinct", "last")
INTERVALS = {"1m": "1 minute", "5m": "5 minutes", "15m": "15 minutes", "1h": "1 hour", "1d": "1 day"}
COMPARE_SHIFT = {"previous_day": timedelta(days=1), "previous_week": timedelta(days=7)}


def label_keys(metric: str) -> list[str]:
    """The label keys of one metric (ids of single rows left out)."""
    model = METRICS[metric][3]
    return [k for k in DIMENSIONS if k not in ("name", "traceId", "spanId") and (model or k not in MODEL_LABELS)]


def _source(metric: str, joins: set[str], scoped: bool = False) -> tuple[str, list[Any]]:
    """One metric's rows; ``scoped`` (a resource filter, always there with auth on) takes parent
    and root labels only from rows of the same resource, so a span claiming a foreign parent
    cannot read that parent's entity through ``parentEntity*``/``rootEntity*``."""
    span_types, value, extra, model = METRICS[metric]
    columns = []
    for key, (column, expr) in DIMENSIONS.items():
        if key == "name":
            continue
        if (expr.startswith("p.") and "p" not in joins) or (expr.startswith("t.") and "t" not in joins) or (
                key in MODEL_LABELS and not model):
            expr = "NULL"
        columns.append(f"{expr} AS {column}")
    sql = (f"SELECT ? AS metric_name, coalesce(s.ended_at, s.started_at) AS ts, {value} AS value, s.tags AS tags, "
           + ", ".join(columns) + " FROM spans s")
    if "p" in joins:
        sql += " LEFT JOIN spans p ON p.trace_id = s.trace_id AND p.span_id = s.parent_span_id"
        if scoped:
            sql += " AND p.resource_id IS NOT DISTINCT FROM s.resource_id"
    if "t" in joins:
        sql += " LEFT JOIN traces t ON t.trace_id = s.trace_id"
        if scoped:
            sql += " AND t.resource_id IS NOT DISTINCT FROM s.resource_id"
    sql += f" WHERE s.span_type IN ({', '.join('?' * len(span_types))})"
    if extra:
        sql += f" AND {extra}"
    return f"SELECT * FROM ({sql}) WHERE value IS NOT NULL", [metric, *span_types]


def _joins(keys: list[str]) -> set[str]:
    return {DIMENSIONS[k][1][0] for k in keys if k in DIMENSIONS and DIMENSIONS[k][1][1:2] == "."} & {"p", "t"}


def _where(filters: dict[str, Any], start: datetime | None, end: datetime | None) -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    ts = filters.get("timestamp") or {}
    if start is not None:
        clauses.append("ts > ?" if ts.get("startExclusive") else "ts >= ?")
        params.append(start)
    if end is not None:
        clauses.append("ts < ?" if ts.get("endExclusive") else "ts <= ?")
        params.append(end)
    for key, value in filters.items():
        key = FILTER_ALIASES.get(key, key)
        if value is None:
            continue
        if key in UNMAPPED_FILTERS:
            clauses.append("FALSE")
        elif key == "traceIds":
            clauses.append(f"trace_id IN ({', '.join('?' * len(value))})")
            params.extend(value)
        elif key == "name":
            clauses.append(f"metric_name IN ({', '.join('?' * len(value))})")
            params.extend(value)
        elif key == "tags":
            for tag in value:
                clauses.append("list_contains(CAST(tags AS VARCHAR[]), ?)")
                params.append(tag)
        elif key == "labels":
            for label, wanted in value.items():
                if label in DIMENSIONS:
                    clauses.append(f"{DIMENSIONS[label][0]} = ?")
                    params.append(wanted)
                else:
                    clauses.append("FALSE")
        elif key in DIMENSIONS:
            clauses.append(f"{DIMENSIONS[key][0]} = ?")
            params.append(value)
    return clauses, params


def _rows(names: list[str], filters: dict[str, Any], keys: list[str], start: datetime | None = None,
          end: datetime | None = None) -> tuple[str, list[Any]]:
    """The metric rows of ``names`` that pass ``filters``, as one SQL subquery."""
    used = [*keys, *[FILTER_ALIASES.get(k, k) for k in filters], *(filters.get("labels") or {})]
    joins = _joins(used)
    parts = [_source(name, joins, scoped="resourceId" in filters) for name in names]
    clauses, params = _where(filters, start, end)
    sql = " UNION ALL ".join(f"({sql})" for sql, _ in parts)
    sql = f"SELECT * FROM ({sql}) m" + (" WHERE " + " AND ".join(clauses) if clauses else "")
    return sql, [v for _, vs in parts for v in vs] + params


def _aggregate(aggregation: str, distinct: str | None) -> str:
    if aggregation == "count":
        return "count(*)"
    if aggregation == "count_distinct":
        return f"count(DISTINCT {DIMENSIONS[distinct or 'name'][0]})"
    if aggregation == "last":
        return "arg_max(value, ts)"
    return f"{aggregation}(value)"


def _number(value: Any) -> float | int | None:
    if value is None:
        return None
    value = float(value)
    return int(value) if value.is_integer() else value


def _range(filters: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    ts = filters.get("timestamp") or {}
    return ts.get("start"), ts.get("end")


def _empty(aggregation: str) -> float | int | None:
    return 0 if aggregation in ("sum", "count", "count_distinct") else None


async def _value(store: DuckDBStore, names: list[str], aggregation: str, distinct: str | None,
                 filters: dict[str, Any], start: datetime | None, end: datetime | None) -> float | int | None:
    rows_sql, params = _rows(names, filters, [distinct] if distinct else [], start, end)
    (row,) = await store.fetch_all(f"SELECT {_aggregate(aggregation, distinct)} AS v, count(*) AS n "
                                   f"FROM ({rows_sql})", params)
    return _number(row["v"]) if row["n"] else _empty(aggregation)


async def aggregate(store: DuckDBStore, names: list[str], aggregation: str, *, distinct: str | None = None,
                    filters: dict[str, Any], compare: str | None = None) -> dict[str, Any]:
    start, end = _range(filters)
    value = await _value(store, names, aggregation, distinct, filters, start, end)
    previous = change = None
    if compare:
        if compare == "previous_period":
            if start is not None:  # the period of equal length just before, ending where this one starts
                stop = end or datetime.now(UTC)
                before = {**filters, "timestamp": {**(filters.get("timestamp") or {}), "endExclusive": True}}
                previous = await _value(store, names, aggregation, distinct, before, start - (stop - start), start)
        else:
            shift = COMPARE_SHIFT[compare]
            previous = await _value(store, names, aggregation, distinct, filters,
                                    start - shift if start else None, (end or datetime.now(UTC)) - shift)
        if previous and value is not None:
            change = (value - previous) / previous * 100
    return {"value": value, "estimatedCost": None, "costUnit": None, "previousValue": previous,
            "previousEstimatedCost": None, "changePercent": change, "costChangePercent": None}


async def breakdown(store: DuckDBStore, names: list[str], aggregation: str, group_by: list[str], *,
                    distinct: str | None = None, filters: dict[str, Any], descending: bool = True,
                    limit: int | None = None) -> list[dict[str, Any]]:
    rows_sql, params = _rows(names, filters, [*group_by, *([distinct] if distinct else [])], *_range(filters))
    columns = [DIMENSIONS[key][0] for key in group_by]
    group = ", ".join(columns)
    sql = (f"SELECT {group}, {_aggregate(aggregation, distinct)} AS v FROM ({rows_sql}) GROUP BY {group} "
           f"ORDER BY v {'DESC' if descending else 'ASC'} NULLS LAST, {group}")
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    rows = await store.fetch_all(sql, params)
    return [{"dimensions": {key: row[column] for key, column in zip(group_by, columns, strict=True)},
             "value": _number(row["v"]) or 0, "estimatedCost": None, "costUnit": None} for row in rows]


def _bucket(interval: str) -> str:
    return f"time_bucket(INTERVAL '{INTERVALS[interval]}', ts AT TIME ZONE 'UTC')"


def _stamp(moment: datetime) -> str:
    return to_iso(moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment)


async def timeseries(store: DuckDBStore, names: list[str], aggregation: str, interval: str, *,
                     distinct: str | None = None, filters: dict[str, Any],
                     group_by: list[str] | None = None) -> list[dict[str, Any]]:
    group_by = group_by or []
    rows_sql, params = _rows(names, filters, [*group_by, *([distinct] if distinct else [])], *_range(filters))
    series_key = [DIMENSIONS[key][0] for key in group_by] or ["metric_name"]
    keys = ", ".join(series_key)
    rows = await store.fetch_all(f"SELECT {keys}, {_bucket(interval)} AS bucket, {_aggregate(aggregation, distinct)}"
                                 f" AS v FROM ({rows_sql}) GROUP BY ALL ORDER BY {keys}, bucket", params)
    series: dict[str, dict[str, Any]] = {} if group_by else {
        name: {"name": name, "costUnit": None, "points": []} for name in names}
    for row in rows:
        label = "|".join("" if row[c] is None else str(row[c]) for c in series_key)
        entry = series.setdefault(label, {"name": label, "costUnit": None, "points": []})
        entry["points"].append({"timestamp": _stamp(row["bucket"]), "value": _number(row["v"]) or 0,
                                "estimatedCost": None})
    return list(series.values())


async def percentiles(store: DuckDBStore, name: str, quantiles: list[float], interval: str, *,
                      filters: dict[str, Any]) -> list[dict[str, Any]]:
    rows_sql, params = _rows([name], filters, [], *_range(filters))
    columns = ", ".join(f"quantile_cont(value, ?) AS q{i}" for i in range(len(quantiles)))
    rows = await store.fetch_all(f"SELECT {_bucket(interval)} AS bucket, {columns} FROM ({rows_sql}) "
                                 f"GROUP BY bucket ORDER BY bucket", [*quantiles, *params])
    return [{"percentile": q, "points": [{"timestamp": _stamp(row["bucket"]), "value": _number(row[f"q{i}"])}
                                         for row in rows]} for i, q in enumerate(quantiles)]


async def label_values(store: DuckDBStore, metric: str, key: str, prefix: str | None, limit: int,
                       filters: dict[str, Any] | None = None) -> list[str]:
    rows_sql, params = _rows([metric], filters or {}, [key])
    column = DIMENSIONS[key][0]
    sql = f"SELECT DISTINCT CAST({column} AS VARCHAR) AS v FROM ({rows_sql}) WHERE {column} IS NOT NULL"
    if prefix:
        sql += f" AND starts_with(CAST({column} AS VARCHAR), ?)"
        params.append(prefix)
    rows = await store.fetch_all(sql + " ORDER BY v LIMIT ?", [*params, limit])
    return [row["v"] for row in rows]
