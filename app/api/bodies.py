"""Reading JSON request bodies with Mastra-shaped 400s (``field: "body"``)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from app.errors import invalid


async def json_body(request: Request, *, empty: Any = None) -> Any:
    raw = await request.body()
    if not raw and empty is not None:
        return empty
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise invalid("body", "body", "Malformed JSON") from None


async def json_object(request: Request) -> dict[str, Any]:
    data = await json_body(request, empty={})
    if not isinstance(data, dict):
        raise invalid("body", "body", "The body must be a JSON object")
    return data
