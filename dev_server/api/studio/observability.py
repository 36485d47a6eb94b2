"""Observability routes of the Mastra API (Mastra's Studio REST API: observability).

Every route gets the observability store through ``ObservabilityStoreDep``: when it is
unavailable (its DuckDB file locked or corrupt) they answer 503 with the cause and a
``Retry-After``, while every other route of the studio keeps working. With authentication
on, every read is limited to the caller's resource (``ForcedResource``): trace lists, a
trace's spans, logs and the discovery lists (entity names and types, environments, service
names, tags) show only what that resource recorded.

The trace query routes (``/traces/query`` and its discovery pair ``/fields``, ``/values``)
answer errors in the contract's own family: a body that is not a JSON object is 400
``{"error": "Invalid request body", "issues": [{"field": "body", ...}]}``; a body that is JSON but not a valid query is
422 ``{"code": "TRACE_QUERY_INVALID", "message", "issues": [{"code", "path", "message"}]}`` with the path of
the field at fault; a cursor this server did not issue is 400 TRACE_QUERY_CURSOR_MALFORMED,
one issued for another ordering 409 TRACE_QUERY_CURSOR_CONFLICT.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from dev_server.api.deps import ForcedResource, MastraQuery, StorageDep
from dev_server.api.query import Query, iso_time
from dev_server.kernel.errors import NotFound, invalid
from dev_server.observability.otlp_mapping import input_preview
from dev_server.observability.query_models import FieldsQuery, TraceQuery, ValuesQuery
from dev_server.storage.composite import OBSERVABILITY, DomainUnavailable
from dev_server.storage.duckdb_store import DuckDBStore
from dev_server.storage.observability import discovery, reads
from dev_server.storage.observability.query_fields import field as query_field
from dev_server.storage.observability.reads import CursorError
from dev_server.storage.observability.where import TraceQueryInvalid
from dev_server.storage.observability.where import invalid as query_invalid

MAX_PER_PAGE = 100
MAX_PAGE = 2 ** 53 - 1  # Mastra's bound; page * perPage still fits DuckDB's 64-bit OFFSET


async def observability_store(storage: StorageDep) -> DuckDBStore:
    """The observability store; a 503 naming the cause when it could not be opened."""
    try:
        return storage.domain(OBSERVABILITY)
    except DomainUnavailable as exc:
        raise HTTPException(503, str(exc), headers={"Retry-After": "5"}) from None


ObservabilityStoreDep = Annotated[DuckDBStore, Depends(observability_store)]


def _query_error(code: str, message: str, status: int, issues: list[dict[str, Any]] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if issues is not None:
        body["issues"] = issues
    return JSONResponse(body, status_code=status)


def _invalid(exc: TraceQueryInvalid) -> JSONResponse:
    return _query_error("TRACE_QUERY_INVALID", f"The trace query is invalid: {exc}", 422, exc.issues)


class TraceQueryRoute(APIRoute):
    """Answers a trace query's problems in the contract's TRACE_QUERY_* family."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                if any(error.get("type") == "json_invalid" or tuple(error.get("loc", ())) == ("body",)
                       for error in exc.errors()):
                    raise  # not JSON, or not a JSON object: the app's 400 "Invalid request body"
                return _invalid(TraceQueryInvalid([
                    {"code": "invalid_request", "path": list(error["loc"][1:]),
                     "message": str(error.get("msg", "invalid")).removeprefix("Value error, ")}
                    for error in exc.errors()]))
            except TraceQueryInvalid as exc:
                return _invalid(exc)
            except CursorError as exc:
                status = 400 if exc.code == "TRACE_QUERY_CURSOR_MALFORMED" else 409
                return _query_error(exc.code, str(exc), status)

        return route


router = APIRouter(prefix="/api/observability")
trace_query = APIRouter(route_class=TraceQueryRoute)  # included into router below
legacy = APIRouter(prefix="/api")


@trace_query.post("/traces/query")
async def query_traces(store: ObservabilityStoreDep, forced: ForcedResource,
                       body: TraceQuery | None = None) -> dict[str, Any]:
    body = body or TraceQuery()
    time_range, order = body.timeRange, body.order
    traces, cursor = await reads.query_traces(
        store, start=time_range.start if time_range else None, end=time_range.end if time_range else None,
        where=body.where, field=order.field, descending=order.direction == "desc", limit=body.page.limit,
        after=body.page.after, resource=forced)
    return {"traces": traces, "page": {"next": cursor}}


@trace_query.post("/traces/query/fields")
async def query_fields(body: FieldsQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    return await discovery.fields(store, body.predicateScope, search=body.search, limit=body.limit,
                                  start=body.timeRange.start, end=body.timeRange.end, resource=forced)


@trace_query.post("/traces/query/values")
async def query_values(body: ValuesQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    found = query_field(body.predicateScope, body.path)
    if found is None or not found.suggest:
        raise query_invalid(["path"], "Value suggestions are not available for this path")
    return await discovery.values(store, body.predicateScope, body.path, search=body.search, limit=body.limit,
                                  start=body.timeRange.start, end=body.timeRange.end, resource=forced)


router.include_router(trace_query)  # keeps TraceQueryRoute for these three


def _pagination(total: int, page: int, per_page: int) -> dict[str, Any]:
    return {"total": total, "page": page, "perPage": per_page, "hasMore": (page + 1) * per_page < total}


def _range(query: Query, name: str) -> tuple[datetime | None, datetime | None]:
    value = query.json(name) or {}
    if not isinstance(value, dict):
        raise invalid("query", name, "must be a JSON object {start, end}")
    return iso_time(value.get("start"), f"{name}.start"), iso_time(value.get("end"), f"{name}.end")


def _filters(query: Query, allowed: dict[str, str], forced: str | None) -> dict[str, Any]:
    filters = {name: query.str(name) for name in allowed if query.str(name)}
    if forced is not None:
        filters["resourceId"] = forced
    return filters


async def _root_spans(query: Query, store: DuckDBStore,
                      forced: str | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    page = query.int("page", 0, maximum=MAX_PAGE)
    per_page = query.int("perPage", 10, minimum=1, maximum=MAX_PER_PAGE)
    field = query.str("field", "startedAt")
    if field not in ("startedAt", "endedAt"):
        raise invalid("query", "field", "must be startedAt or endedAt")
    direction = (query.str("direction", "DESC") or "DESC").upper()
    if direction not in ("ASC", "DESC"):
        raise invalid("query", "direction", "must be ASC or DESC")
    start, end = _range(query, "startedAt") if query.values.get("startedAt") else _range(query, "dateRange")
    spans, total = await reads.list_root_spans(store, _filters(query, reads.SPAN_FILTERS, forced), page=page,
                                               per_page=per_page, field=field, descending=direction == "DESC",
                                               start=start, end=end)
    return spans, _pagination(total, page, per_page)


@router.get("/traces")
async def list_traces(query: MastraQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    spans, pagination = await _root_spans(query, store, forced)
    return {"spans": spans, "pagination": pagination}


@router.get("/traces/light")
async def list_traces_light(query: MastraQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    spans, pagination = await _root_spans(query, store, forced)
    light = [{k: s.get(k) for k in reads.LIGHT_SPAN_KEYS} | {"inputPreview": input_preview(s.get("input"))}
             for s in spans]
    return {"spans": light, "pagination": pagination}


async def _trace(store: DuckDBStore, trace_id: str, forced: str | None) -> list[dict[str, Any]]:
    spans = await reads.trace_spans(store, trace_id)
    if forced is not None:
        spans = [s for s in spans if s.get("resourceId") == forced]
    if not spans:
        raise NotFound(f"Trace with ID '{trace_id}' not found")
    return spans


@router.get("/traces/{trace_id}")
async def get_trace(trace_id: str, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    return {"traceId": trace_id, "spans": await _trace(store, trace_id, forced)}


@router.get("/traces/{trace_id}/light")
async def get_trace_light(trace_id: str, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    spans = await _trace(store, trace_id, forced)
    return {"traceId": trace_id, "spans": [{k: s.get(k) for k in reads.LIGHT_SPAN_KEYS} for s in spans]}


@router.get("/traces/{trace_id}/spans/{span_id}")
async def get_span(trace_id: str, span_id: str, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    for item in await _trace(store, trace_id, forced):
        if item["spanId"] == span_id:
            return item
    raise NotFound(f"Span with ID '{span_id}' not found")


def _empty_page(query: Query, key: str) -> dict[str, Any]:
    """Scores and feedback: this server records none, so every page is empty (but valid)."""
    page, per_page = query.int("page", 0, maximum=MAX_PAGE), query.int("perPage", 10, minimum=1, maximum=MAX_PER_PAGE)
    return {key: [], "pagination": _pagination(0, page, per_page)}


@router.get("/traces/{trace_id}/{span_id}/scores")
async def span_scores(query: MastraQuery) -> dict[str, Any]:
    return _empty_page(query, "scores")


@router.get("/feedback")
async def feedback(query: MastraQuery) -> dict[str, Any]:
    return _empty_page(query, "feedback")


@router.get("/scores")
async def scores(query: MastraQuery) -> dict[str, Any]:
    return _empty_page(query, "scores")


@router.get("/logs")
async def logs(query: MastraQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    page = query.int("page", 0, maximum=MAX_PAGE)
    per_page = query.int("perPage", 20, minimum=1, maximum=MAX_PER_PAGE)
    direction = (query.str("direction", "DESC") or "DESC").upper()
    if direction not in ("ASC", "DESC"):
        raise invalid("query", "direction", "must be ASC or DESC")
    start, end = _range(query, "timestamp")
    rows, total = await reads.list_logs(store, _filters(query, reads.LOG_FILTERS, forced), page=page,
                                        per_page=per_page, descending=direction == "DESC", start=start, end=end)
    return {"logs": rows, "pagination": _pagination(total, page, per_page)}


@router.get("/discovery/entity-names")
async def entity_names(query: MastraQuery, store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    return {"names": await reads.distinct(store, "entity_name", entity_type=query.str("entityType"), resource=forced)}


@router.get("/discovery/entity-types")
async def entity_types(store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    return {"entityTypes": await reads.distinct(store, "entity_type", resource=forced)}


@router.get("/discovery/environments")
async def environments(store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    return {"environments": await reads.distinct(store, "environment", resource=forced)}


@router.get("/discovery/service-names")
async def service_names(store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    return {"serviceNames": await reads.distinct(store, "service_name", resource=forced)}


@router.get("/discovery/tags")
async def tags(store: ObservabilityStoreDep, forced: ForcedResource) -> dict[str, Any]:
    return {"tags": await reads.distinct_tags(store, resource=forced)}


@legacy.get("/logs/transports")
async def log_transports() -> dict[str, Any]:
    return {"transports": []}


@legacy.get("/logs")
async def legacy_logs(query: MastraQuery) -> dict[str, Any]:
    if not query.str("transportId"):
        raise invalid("query", "transportId", "transportId is required")
    return {"logs": [], "total": 0, "page": query.int("page", 0, maximum=MAX_PAGE),
            "perPage": query.int("perPage", 100, maximum=MAX_PAGE), "hasMore": False}


@legacy.get("/logs/{run_id}")
async def legacy_run_logs(run_id: str, query: MastraQuery) -> dict[str, Any]:
    return await legacy_logs(query)
