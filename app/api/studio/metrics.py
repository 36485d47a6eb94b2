"""Metrics routes of the Mastra API (STUDIO-REST.md 6.7), computed from the span rows by
``app.observability.metrics``: ``POST /observability/metrics/{aggregate,breakdown,timeseries,
percentiles}`` and ``GET /observability/discovery/metric-{names,label-keys,label-values}``.

Bodies are checked against the OpenAPI field lists: a bad metric name, aggregation, interval,
percentile, groupBy key or filter value is a 400 ``{"error", "issues": [{field, message}]}``;
unknown keys are dropped. An unavailable observability store is a 503, as for the other
observability routes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request

from app.api.bodies import json_object
from app.api.studio.access import forced_resource
from app.api.studio.observability import observability_store
from app.api.studio.query import Query, iso_time
from app.errors import invalid
from app.observability import metrics

router = APIRouter(prefix="/api/observability")

_STRING_FILTERS = ("traceId", "spanId", "entityType", "entityId", "entityName", "userId", "serviceName",
                   "environment", "parentEntityType", "parentEntityName", "rootEntityType", "rootEntityName",
                   "resourceId", "runId", "threadId", "executionSource", "source", "provider", "model",
                   *metrics.UNMAPPED_FILTERS)
_LIST_FILTERS = {"traceIds": 1000, "tags": None, "name": None}


def _names(value: Any, field: str = "name") -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise invalid("body", field, "must be a non-empty array of metric names")
    for i, name in enumerate(value):
        if name not in metrics.METRICS:
            raise invalid("body", f"{field}.{i}", f"Unknown metric name '{name}'; known: {', '.join(metrics.METRICS)}")
    return list(dict.fromkeys(value))


def _choice(body: dict[str, Any], field: str, allowed: Any, *, required: bool = False) -> Any:
    value = body.get(field)
    if value is None and not required:
        return None
    if value not in allowed:
        raise invalid("body", field, f"must be one of {', '.join(allowed)}")
    return value


def _aggregation(body: dict[str, Any]) -> tuple[str, str | None]:
    aggregation = _choice(body, "aggregation", metrics.AGGREGATIONS, required=True)
    distinct = _choice(body, "distinctColumn", metrics.DISTINCT_COLUMNS)
    if aggregation == "count_distinct" and distinct is None:
        raise invalid("body", "distinctColumn", "is required when aggregation is 'count_distinct'")
    return aggregation, distinct


def _filters(body: dict[str, Any], forced: str | None) -> dict[str, Any]:
    raw = body.get("filters") or {}
    if not isinstance(raw, dict):
        raise invalid("body", "filters", "must be an object")
    filters: dict[str, Any] = {}
    stamp = raw.get("timestamp")
    if stamp is not None:
        if not isinstance(stamp, dict):
            raise invalid("body", "filters.timestamp", "must be an object {start, end}")
        filters["timestamp"] = {"start": iso_time(stamp.get("start"), "filters.timestamp.start", "body"),
                                "end": iso_time(stamp.get("end"), "filters.timestamp.end", "body")}
        for flag in ("startExclusive", "endExclusive"):
            if stamp.get(flag) is not None and not isinstance(stamp[flag], bool):
                raise invalid("body", f"filters.timestamp.{flag}", "must be a boolean")
            filters["timestamp"][flag] = bool(stamp.get(flag))
    for key in _STRING_FILTERS:
        if raw.get(key) is not None:
            if not isinstance(raw[key], str):
                raise invalid("body", f"filters.{key}", "must be a string")
            filters[key] = raw[key]
    for key, maximum in _LIST_FILTERS.items():
        value = raw.get(key)
        if value is not None:
            if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value) or (
                    maximum and len(value) > maximum):
                raise invalid("body", f"filters.{key}", f"must be a non-empty array of strings"
                              + (f" (at most {maximum})" if maximum else ""))
            filters[key] = value
    labels = raw.get("labels")
    if labels is not None:
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise invalid("body", "filters.labels", "must be an object of strings")
        filters["labels"] = labels
    if forced is not None:
        filters["resourceId"] = forced
    return filters


def _group_by(body: dict[str, Any], required: bool) -> list[str]:
    value = body.get("groupBy")
    if value is None and not required:
        return []
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise invalid("body", "groupBy", "must be a non-empty array of label keys")
    for i, key in enumerate(value):
        if key not in metrics.DIMENSIONS:
            raise invalid("body", f"groupBy.{i}", f"Unknown label key '{key}'")
    return list(dict.fromkeys(value))


@router.post("/metrics/aggregate")
async def aggregate(request: Request) -> dict[str, Any]:
    body = await json_object(request)
    names, (aggregation, distinct) = _names(body.get("name")), _aggregation(body)
    compare = _choice(body, "comparePeriod", ("previous_period", *metrics.COMPARE_SHIFT))
    filters = _filters(body, await forced_resource(request))
    return await metrics.aggregate(observability_store(request), names, aggregation, distinct=distinct, filters=filters,
                                   compare=compare)


@router.post("/metrics/breakdown")
async def breakdown(request: Request) -> dict[str, Any]:
    body = await json_object(request)
    names, group_by, (aggregation, distinct) = _names(body.get("name")), _group_by(body, True), _aggregation(body)
    limit = body.get("limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= 1000):
        raise invalid("body", "limit", "must be an integer from 1 to 1000")
    direction = _choice(body, "orderDirection", ("ASC", "DESC")) or "DESC"
    filters = _filters(body, await forced_resource(request))
    groups = await metrics.breakdown(observability_store(request), names, aggregation, group_by, distinct=distinct,
                                     filters=filters, descending=direction == "DESC", limit=limit)
    return {"groups": groups}


@router.post("/metrics/timeseries")
async def timeseries(request: Request) -> dict[str, Any]:
    body = await json_object(request)
    names, (aggregation, distinct) = _names(body.get("name")), _aggregation(body)
    interval = _choice(body, "interval", tuple(metrics.INTERVALS), required=True)
    group_by = _group_by(body, False)
    filters = _filters(body, await forced_resource(request))
    series = await metrics.timeseries(observability_store(request), names, aggregation, interval, distinct=distinct,
                                      filters=filters, group_by=group_by)
    return {"series": series}


@router.post("/metrics/percentiles")
async def percentiles(request: Request) -> dict[str, Any]:
    body = await json_object(request)
    names = _names(body.get("name"))
    if len(names) != 1:
        raise invalid("body", "name", "must be one metric name")
    quantiles = body.get("percentiles")
    if not isinstance(quantiles, list) or not quantiles:
        raise invalid("body", "percentiles", "must be a non-empty array of numbers from 0 to 1")
    for i, q in enumerate(quantiles):
        if not isinstance(q, (int, float)) or isinstance(q, bool) or not 0 <= q <= 1:
            raise invalid("body", f"percentiles.{i}", "must be a number from 0 to 1")
    interval = _choice(body, "interval", tuple(metrics.INTERVALS), required=True)
    filters = _filters(body, await forced_resource(request))
    series = await metrics.percentiles(observability_store(request), names[0], [float(q) for q in quantiles], interval,
                                       filters=filters)
    return {"series": series}


def _metric_param(query: Query) -> str:
    name = query.str("metricName")
    if not name:
        raise invalid("query", "metricName", "metricName is required")
    if name not in metrics.METRICS:
        raise invalid("query", "metricName", f"Unknown metric name '{name}'")
    return name


@router.get("/discovery/metric-names")
async def metric_names(request: Request) -> dict[str, Any]:
    query = Query(request)
    prefix, limit = query.str("prefix") or "", query.int("limit", 1000, minimum=1)
    return {"names": [name for name in metrics.METRICS if name.startswith(prefix)][:limit]}


@router.get("/discovery/metric-label-keys")
async def metric_label_keys(request: Request) -> dict[str, Any]:
    return {"keys": metrics.label_keys(_metric_param(Query(request)))}


@router.get("/discovery/metric-label-values")
async def metric_label_values(request: Request) -> dict[str, Any]:
    query = Query(request)
    name = _metric_param(query)
    key = query.str("labelKey")
    if key not in metrics.label_keys(name):
        raise invalid("query", "labelKey", f"must be one of {', '.join(metrics.label_keys(name))}")
    limit = query.int("limit", 100, minimum=1)
    forced = await forced_resource(request)
    return {"values": await metrics.label_values(observability_store(request), name, key, query.str("prefix"), limit,
                                                 {"resourceId": forced} if forced is not None else None)}
