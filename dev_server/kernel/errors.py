"""The errors a client can cause, each carrying the HTTP status it is answered with.

Raised where the rule lives (a route, the turn rules, the memory), rendered as JSON in one
place at the edge (``dev_server.errors``). Anything that is not an ``ApiError`` is the
server's failure: a logged 500 with a generic message.

    ApiError
    ├── BadRequest            400
    ├── Unauthorized          401
    ├── NotFound              404
    ├── Conflict              409
    ├── TooManyRequests       429 (with Retry-After)
    └── UpstreamModelError    502 (provider failures, by the kinds of dev_server.llm)
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    status = 500
    headers: dict[str, str] | None = None

    def __init__(self, error: str, issues: list[dict[str, str]] | None = None, *,
                 status: int | None = None, **extra: Any) -> None:
        super().__init__(error)
        if status is not None:
            self.status = status
        self.message = error
        self.issues = issues
        self.extra = extra

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.message, **self.extra}
        if self.issues:
            body["issues"] = self.issues
        return body


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class TooManyRequests(ApiError):
    status = 429

    def __init__(self, error: str, *, retry_after_s: int) -> None:
        super().__init__(error)
        self.headers = {"Retry-After": str(retry_after_s)}


class UpstreamModelError(ApiError):
    status = 502


# Provider failures as our clients see them: a bad provider key is the server's problem
# (502), not the caller's (401); a rate limit or a timeout keeps its meaning.
_PROVIDER_STATUS = {"rate_limit": 429, "timeout": 504, "bad_request": 400, "not_configured": 503}


def upstream(kind: str, message: str) -> UpstreamModelError:
    """The API error for a model provider failure of the given kind (dev_server.llm's kinds)."""
    return UpstreamModelError(message, status=_PROVIDER_STATUS.get(kind, 502), kind=kind)


REQUEST_PARTS = {  # where a bad value came from -> the error message for it
    "body": "Invalid request body", "query": "Invalid query parameters", "path": "Invalid path parameters"}


def invalid(kind: str, field: str, message: str) -> BadRequest:
    """A 400 in Mastra's shape: kind is "body", "query" or "path"."""
    return BadRequest(REQUEST_PARTS[kind], [{"field": field, "message": message}])
