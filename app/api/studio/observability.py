"""Observability routes of the Mastra API (STUDIO-REST.md section 6).

When the observability store is unavailable (its DuckDB file locked or corrupt), these
routes answer 503 with the cause, while every other route of the studio keeps working.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.bodies import json_object
from app.api.studio.access import forced_resource
from app.api.studio.query import Query, iso_time
from app.errors import NotFound, ServiceUnavailable, invalid
from app.observability import reads
from app.observability.otlp_mapping import input_preview
from app.observability.where import WhereError
from app.storage.composite import OBSERVABILITY, DomainUnavailable

router = APIRouter(prefix="/api/observability")
legacy = APIRouter(prefix="/api")

MAX_PER_PAGE = 100


def observability_store(request: Request):
    """The observability store; a 503 naming the cause when it could not be opened."""
    storage = request.app.state.storage
    try:
        return storage.domain(OBSERVABILITY)
    except DomainUnavailable as exc:
        raise ServiceUnavailable(str(exc)) from None


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


def _query_error(code: str, message: str, status: int) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


@router.post("/traces/query")
async def query_traces(request: Request) -> Any:
    forced = await forced_resource(request)
    body = await json_object(request)
    page = body.get("page") or {}
    limit = page.get("limit", 25) if isinstance(page, dict) else 25
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PER_PAGE:
        return _query_error("TRACE_QUERY_INVALID", f"page.limit must be 1..{MAX_PER_PAGE}", 422)
    time_range = body.get("timeRange") or {}
    order = (body.get("orderBy") or [{}])[0] if isinstance(body.get("orderBy"), list) else {}
    where = body.get("where")
    if forced is not None:
        scope = {"op": "eq", "left": {"path": "resourceId"}, "right": {"literal": forced}}
        where = {"op": "and", "args": [scope, where]} if where else scope
    store = observability_store(request)
    try:
        traces, cursor = await reads.query_traces(
            store, start=iso_time(time_range.get("from"), "timeRange.from"), end=iso_time(time_range.get("to"), "timeRange.to"),
            where=where, descending=str(order.get("direction", "desc")).lower() != "asc", limit=limit,
            after=page.get("after") if isinstance(page, dict) else None)
    except WhereError as exc:
        code = "TRACE_QUERY_BAD_CURSOR" if "cursor" in str(exc) else "TRACE_QUERY_INVALID"
        return _query_error(code, str(exc), 400 if code.endswith("CURSOR") else 422)
    return {"traces": traces, "page": {"next": cursor}}


@router.post("/traces/query/fields")
@router.post("/traces/query/values")
async def query_discovery() -> JSONResponse:
    return _query_error("TRACE_QUERY_DISCOVERY_UNSUPPORTED", "Trace query discovery is not supported", 501)


async def _root_spans(request: Request) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    query = Query(request)
    forced = await forced_resource(request)
    page = query.int("page", 0)
    per_page = query.int("perPage", 10, minimum=1, maximum=MAX_PER_PAGE)
    field = query.str("field", "startedAt")
    if field not in ("startedAt", "endedAt"):
        raise invalid("query", "field", "must be startedAt or endedAt")
    direction = (query.str("direction", "DESC") or "DESC").upper()
    if direction not in ("ASC", "DESC"):
        raise invalid("query", "direction", "must be ASC or DESC")
    start, end = _range(query, "startedAt") if query.values.get("startedAt") else _range(query, "dateRange")
    store = observability_store(request)
    spans, total = await reads.list_root_spans(store, _filters(query, reads.SPAN_FILTERS, forced), page=page,
                                               per_page=per_page, field=field, descending=direction == "DESC",
                                               start=start, end=end)
    return spans, _pagination(total, page, per_page)


@router.get("/traces")
async def list_traces(request: Request) -> dict[str, Any]:
    spans, pagination = await _root_spans(request)
    return {"spans": spans, "pagination": pagination}


@router.get("/traces/light")
async def list_traces_light(request: Request) -> dict[str, Any]:
    spans, pagination = await _root_spans(request)
    light = [{k: s.get(k) for k in reads.LIGHT_SPAN_KEYS} | {"inputPreview": input_preview(s.get("input"))} for s in spans]
    return {"spans": light, "pagination": pagination}


async def _trace(request: Request, trace_id: str) -> list[dict[str, Any]]:
    forced = await forced_resource(request)
    store = observability_store(request)
    spans = await reads.trace_spans(store, trace_id)
    if forced is not None:
        spans = [s for s in spans if s.get("resourceId") == forced]
    if not spans:
        raise NotFound(f"Trace with ID '{trace_id}' not found")
    return spans


@router.get("/traces/{trace_id}")
async def get_trace(trace_id: str, request: Request) -> dict[str, Any]:
    return {"traceId": trace_id, "spans": await _trace(request, trace_id)}


@router.get("/traces/{trace_id}/light")
async def get_trace_light(trace_id: str, request: Request) -> dict[str, Any]:
    spans = await _trace(request, trace_id)
    return {"traceId": trace_id, "spans": [{k: s.get(k) for k in reads.LIGHT_SPAN_KEYS} for s in spans]}


@router.get("/traces/{trace_id}/spans/{span_id}")
async def get_span(trace_id: str, span_id: str, request: Request) -> dict[str, Any]:
    for item in await _trace(request, trace_id):
        if item["spanId"] == span_id:
            return item
    raise NotFound(f"Span with ID '{span_id}' not found")


def _empty_page(request: Request, key: str) -> dict[str, Any]:
    """Scores and feedback: this server records none, so every page is empty (but valid)."""
    query = Query(request)
    page, per_page = query.int("page", 0), query.int("perPage", 10, minimum=1, maximum=MAX_PER_PAGE)
    return {key: [], "pagination": _pagination(0, page, per_page)}


@router.get("/traces/{trace_id}/{span_id}/scores")
async def span_scores(request: Request) -> dict[str, Any]:
    return _empty_page(request, "scores")


@router.get("/feedback")
async def feedback(request: Request) -> dict[str, Any]:
    return _empty_page(request, "feedback")


@router.get("/scores")
async def scores(request: Request) -> dict[str, Any]:
    return _empty_page(request, "scores")


@router.get("/logs")
async def logs(request: Request) -> dict[str, Any]:
    query = Query(request)
    forced = await forced_resource(request)
    page = query.int("page", 0)
    per_page = query.int("perPage", 20, minimum=1, maximum=MAX_PER_PAGE)
    direction = (query.str("direction", "DESC") or "DESC").upper()
    if direction not in ("ASC", "DESC"):
        raise invalid("query", "direction", "must be ASC or DESC")
    start, end = _range(query, "timestamp")
    store = observability_store(request)
    rows, total = await reads.list_logs(store, _filters(query, reads.LOG_FILTERS, forced), page=page,
                                        per_page=per_page, descending=direction == "DESC", start=start, end=end)
    return {"logs": rows, "pagination": _pagination(total, page, per_page)}


async def _distinct(request: Request, column: str, **kwargs: Any) -> list[str]:
    return await reads.distinct(observability_store(request), column, **kwargs)


@router.get("/discovery/entity-names")
async def entity_names(request: Request) -> dict[str, Any]:
    return {"names": await _distinct(request, "entity_name", entity_type=Query(request).str("entityType"))}


@router.get("/discovery/entity-types")
async def entity_types(request: Request) -> dict[str, Any]:
    return {"entityTypes": await _distinct(request, "entity_type")}


@router.get("/discovery/environments")
async def environments(request: Request) -> dict[str, Any]:
    return {"environments": await _distinct(request, "environment")}


@router.get("/discovery/service-names")
async def service_names(request: Request) -> dict[str, Any]:
    return {"serviceNames": await _distinct(request, "service_name")}


@router.get("/discovery/tags")
async def tags(request: Request) -> dict[str, Any]:
    return {"tags": await reads.distinct_tags(observability_store(request))}


@legacy.get("/logs/transports")
async def log_transports() -> dict[str, Any]:
    return {"transports": []}


@legacy.get("/logs")
async def legacy_logs(request: Request) -> dict[str, Any]:
    query = Query(request)
    if not query.str("transportId"):
        raise invalid("query", "transportId", "transportId is required")
    return {"logs": [], "total": 0, "page": query.int("page", 0), "perPage": query.int("perPage", 100), "hasMore": False}


@legacy.get("/logs/{run_id}")
async def legacy_run_logs(run_id: str, request: Request) -> dict[str, Any]:
    return await legacy_logs(request)
