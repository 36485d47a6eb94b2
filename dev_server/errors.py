"""The one place that renders errors as JSON, at the HTTP edge.

The errors themselves are the kernel's (``dev_server.kernel.errors``): every error a client
can cause is an ``ApiError`` carrying its status, raised wherever the rule lives. Here they
become ``{"error": <message>, "issues"?: [{"field", "message"}]}`` (Mastra's Studio REST
contract, section 1); FastAPI's own validation errors take the same shape, and anything
else becomes a logged 500 with a generic message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from dev_server.kernel.errors import REQUEST_PARTS, ApiError, BadRequest, upstream
from dev_server.llm.errors import ModelProviderError
from dev_server.storage.errors import StorageBusy
from dev_server.storage.hrana import StorageUnavailable

log = logging.getLogger(__name__)


def validation_issues(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """FastAPI's validation errors as ``[{"field", "message"}]``: the field is the dotted location
    inside the body / query / path (``messages.0.id``), or ``body`` for a body that is not JSON.
    A location starts with where the value came from, which the field leaves out."""
    issues = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        field = (".".join(loc[1:]) or loc[0]) if loc else "body"
        if error.get("type") == "json_invalid":
            field = "body"
        issues.append({"field": field, "message": str(error.get("msg", "invalid"))})
    return issues


def _request_kind(exc: RequestValidationError) -> str:
    kinds = {str(error["loc"][0]) if error.get("loc") else "body" for error in exc.errors()}
    return kinds.pop() if len(kinds) == 1 and kinds <= set(REQUEST_PARTS) else "body"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(ModelProviderError)  # raised before a stream starts (not_configured)
    async def model_error(_: Request, exc: ModelProviderError) -> JSONResponse:
        error = upstream(exc.kind, exc.message)
        return JSONResponse(error.body(), status_code=error.status)

    # The one place FastAPI's own validation (typed bodies, query and path parameters)
    # becomes Mastra's 400 shape; FastAPI's default would be a 422 {"detail": [...]}.
    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        error = BadRequest(REQUEST_PARTS[_request_kind(exc)], validation_issues(exc.errors()))
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = "Not found" if exc.status_code == 404 else str(exc.detail)
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)

    # The client left before its body was read (or missed the body deadline, when the
    # server cut it off: dev_server.connection_limits). Nobody reads this answer; not an error of ours.
    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, _: ClientDisconnect) -> JSONResponse:
        log.debug("client left before its request body was read: %s %s", request.method, request.url.path)
        return JSONResponse({"error": "The client disconnected before its request was read"}, status_code=400)

    @app.exception_handler(StorageBusy)
    async def storage_busy(_: Request, exc: StorageBusy) -> JSONResponse:
        return JSONResponse({"error": "Storage is busy, retry shortly"}, status_code=503,
                            headers={"Retry-After": "1"})

    @app.exception_handler(StorageUnavailable)
    async def storage_unavailable(_: Request, exc: StorageUnavailable) -> JSONResponse:
        log.warning("storage unavailable: %s", exc)
        return JSONResponse({"error": "Storage is unavailable, retry shortly"}, status_code=503,
                            headers={"Retry-After": "2"})

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse({"error": "Internal server error"}, status_code=500)


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string"},
        "issues": {"type": "array", "items": {"type": "object", "required": ["field", "message"],
                                              "properties": {"field": {"type": "string"},
                                                             "message": {"type": "string"}}}},
    },
}


def document_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """Make an OpenAPI schema say what the handlers above answer: FastAPI documents a 422
    ``HTTPValidationError`` for every route with parameters, where this server sends a 400
    ``{"error", "issues"}``. Idempotent; changes ``schema`` in place."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = ERROR_SCHEMA
    bad_request = {"description": "Invalid request (Mastra's shape)",
                   "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses") if isinstance(operation, dict) else None
            if responses is not None and responses.pop("422", None) is not None:
                responses.setdefault("400", bad_request)
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    return schema
