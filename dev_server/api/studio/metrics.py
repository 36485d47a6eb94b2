"""Metrics routes of the Mastra API (Mastra's Studio REST API: metrics), computed from the span rows by
``dev_server.storage.observability.metrics``: ``POST /observability/metrics/{aggregate,breakdown,timeseries,
percentiles}`` and ``GET /observability/discovery/metric-{names,label-keys,label-values}``.

Bodies are typed models checked against the OpenAPI field lists: a bad metric name,
aggregation, interval, percentile, groupBy key or filter value is the app's 400 ``{"error",
"issues": [{field, message}]}`` naming the field (``name.0``, ``filters.timestamp.start``);
unknown keys are dropped. With authentication on, every answer is computed over the caller's
resource only. An unavailable observability store is a 503, as for the other observability
routes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, create_model

from dev_server.api.deps import ForcedResource, MastraQuery
from dev_server.api.query import Query
from dev_server.api.studio.observability import ObservabilityStoreDep
from dev_server.kernel.errors import invalid
from dev_server.observability.query_models import IsoTime, Text
from dev_server.storage.observability import metrics

router = APIRouter(prefix="/api/observability")

_STRING_FILTERS = ("traceId", "spanId", "entityType", "entityId", "entityName", "userId", "serviceName",
                   "environment", "parentEntityType", "parentEntityName", "rootEntityType", "rootEntityName",
                   "resourceId", "runId", "threadId", "executionSource", "source", "provider", "model",
                   *metrics.UNMAPPED_FILTERS)
MAX_LIMIT = 1000


def _known_metric(name: str) -> str:
    if name not in metrics.METRICS:
        raise ValueError(f"Unknown metric name '{name}'; known: {', '.join(metrics.METRICS)}")
    return name


def _known_label(key: str) -> str:
    if key not in metrics.DIMENSIONS:
        raise ValueError(f"Unknown label key '{key}'")
    return key


def _listed(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


MetricNames = Annotated[list[Annotated[Text, AfterValidator(_known_metric)]], BeforeValidator(_listed),
                        Field(min_length=1), AfterValidator(lambda names: list(dict.fromkeys(names)))]
GroupBy = Annotated[list[Annotated[Text, AfterValidator(_known_label)]], Field(min_length=1),
                    AfterValidator(lambda keys: list(dict.fromkeys(keys)))]
Strings = Annotated[list[Text], Field(min_length=1)]


class TimestampFilter(BaseModel):
    start: IsoTime | None = None
    end: IsoTime | None = None
    startExclusive: Annotated[bool, Field(strict=True)] = False
    endExclusive: Annotated[bool, Field(strict=True)] = False


MetricFilters = create_model(
    "MetricFilters", __config__=ConfigDict(extra="ignore"),
    timestamp=(TimestampFilter | None, None),
    traceIds=(Annotated[Strings, Field(max_length=1000)] | None, None), tags=(Strings | None, None),
    name=(Strings | None, None), labels=(dict[str, Text] | None, None),
    **{key: (Text | None, None) for key in _STRING_FILTERS})


class MetricQuery(BaseModel):
    name: MetricNames
    aggregation: Literal[metrics.AGGREGATIONS]  # type: ignore[valid-type]
    distinctColumn: Literal[metrics.DISTINCT_COLUMNS] | None = None  # type: ignore[valid-type]
    filters: MetricFilters | None = None  # type: ignore[valid-type]

    def scoped_filters(self, forced: str | None) -> dict[str, Any]:
        filters = self.filters.model_dump(exclude_none=True) if self.filters is not None else {}
        if forced is not None:
            filters["resourceId"] = forced
        return filters

    def checked_distinct(self) -> str | None:
        if self.aggregation == "count_distinct" and self.distinctColumn is None:
            raise invalid("body", "distinctColumn", "is required when aggregation is 'count_distinct'")
        return self.distinctColumn


class AggregateQuery(MetricQuery):
    comparePeriod: Literal[("previous_period", *metrics.COMPARE_SHIFT)] | None = None  # type: ignore[valid-type]


class BreakdownQuery(MetricQuery):
    groupBy: GroupBy
    limit: Annotated[int, Field(strict=True, ge=1, le=MAX_LIMIT)] | None = None
    orderDirection: Literal["ASC", "DESC"] = "DESC"


class TimeseriesQuery(MetricQuery):
    interval: Literal[tuple(metrics.INTERVALS)]  # type: ignore[valid-type]
    groupBy: GroupBy | None = None


class PercentilesQuery(BaseModel):
    name: Annotated[MetricNames, Field(max_length=1)]
    percentiles: Annotated[list[Annotated[float, Field(ge=0, le=1)]], Field(min_length=1)]
    interval: Literal[tuple(metrics.INTERVALS)]  # type: ignore[valid-type]
    filters: MetricFilters | None = None  # type: ignore[valid-type]

    scoped_filters = MetricQuery.scoped_filters


@router.post("/metrics/aggregate")
async def aggregate(body: AggregateQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    return await metrics.aggregate(store, body.name, body.aggregation, distinct=body.checked_distinct(),
                                   filters=body.scoped_filters(forced), compare=body.comparePeriod)


@router.post("/metrics/breakdown")
async def breakdown(body: BreakdownQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    groups = await metrics.breakdown(store, body.name, body.aggregation, body.groupBy, distinct=body.checked_distinct(),
                                     filters=body.scoped_filters(forced), descending=body.orderDirection == "DESC",
                                     limit=body.limit)
    return {"groups": groups}


@router.post("/metrics/timeseries")
async def timeseries(body: TimeseriesQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    series = await metrics.timeseries(store, body.name, body.aggregation, body.interval,
                                      distinct=body.checked_distinct(), filters=body.scoped_filters(forced),
                                      group_by=body.groupBy)
    return {"series": series}


@router.post("/metrics/percentiles")
async def percentiles(body: PercentilesQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    series = await metrics.percentiles(store, body.name[0], body.percentiles, body.interval,
                                       filters=body.scoped_filters(forced))
    return {"series": series}


def _metric_param(query: Query) -> str:
    name = query.str("metricName")
    if not name:
        raise invalid("query", "metricName", "metricName is required")
    if name not in metrics.METRICS:
        raise invalid("query", "metricName", f"Unknown metric name '{name}'")
    return name


@router.get("/discovery/metric-names")
async def metric_names(query: MastraQuery) -> dict[str, Any]:
    prefix, limit = query.str("prefix") or "", query.int("limit", MAX_LIMIT, minimum=1, maximum=MAX_LIMIT)
    return {"names": [name for name in metrics.METRICS if name.startswith(prefix)][:limit]}


@router.get("/discovery/metric-label-keys")
async def metric_label_keys(query: MastraQuery) -> dict[str, Any]:
    return {"keys": metrics.label_keys(_metric_param(query))}


@router.get("/discovery/metric-label-values")
async def metric_label_values(query: MastraQuery, store: ObservabilityStoreDep,
                              forced: ForcedResource) -> dict[str, Any]:
    name = _metric_param(query)
    key = query.str("labelKey")
    if key not in metrics.label_keys(name):
        raise invalid("query", "labelKey", f"must be one of {', '.join(metrics.label_keys(name))}")
    limit = query.int("limit", 100, minimum=1, maximum=MAX_LIMIT)
    return {"values": await metrics.label_values(store, name, key, query.str("prefix"), limit,
                                                 {"resourceId": forced} if forced is not None else None)}

