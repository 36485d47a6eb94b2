"""Query strings in the three encodings Mastra's clients send (STUDIO-REST.md section 1).

- plain scalars: ``page=0&perPage=40``;
- JSON in one parameter: ``orderBy={"field":"createdAt","direction":"DESC"}``;
- bracket notation, folded into an object: ``orderBy[field]=updatedAt&orderBy[direction]=ASC``.

``requestContext`` (base64 JSON, sometimes nested) is accepted and ignored; unknown keys
are dropped. Every failure is a 400 "Invalid query parameters" naming the field.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from starlette.requests import Request

from app.clock import parse_iso
from app.errors import invalid

_BRACKET = re.compile(r"^([^\[\]]+)((?:\[[^\[\]]*\])+)$")


class Query:
    def __init__(self, request: Request) -> None:
        self.values: dict[str, Any] = {}
        for key, value in request.query_params.multi_items():
            match = _BRACKET.match(key)
            if not match:
                self.values[key] = value
                continue
            target = self.values.setdefault(match[1], {})
            if not isinstance(target, dict):
                raise invalid("query", match[1], "mixes a plain value and bracket notation")
            keys = re.findall(r"\[([^\[\]]*)\]", match[2])
            for inner in keys[:-1]:
                target = target.setdefault(inner, {})
            target[keys[-1]] = value

    def str(self, name: str, default: str | None = None, *, aliases: tuple[str, ...] = ()) -> str | None:
        for key in (name, *aliases):
            value = self.values.get(key)
            if value is not None:
                if not isinstance(value, str):
                    raise invalid("query", name, "must be a string")
                return value
        return default

    def int(self, name: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
        raw = self.values.get(name)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except (TypeError, ValueError):
            raise invalid("query", name, "must be an integer") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f" and at most {maximum}" if maximum is not None else ""
            raise invalid("query", name, f"must be at least {minimum}{bound}")
        return value

    def per_page(self, default: int, maximum: int) -> int | None:
        """``perPage``; the literal ``false`` (or -1) means no limit, as Mastra allows."""
        raw = self.values.get("perPage")
        if raw in ("false", "-1"):
            return None
        return self.int("perPage", default, minimum=1, maximum=maximum)

    def bool(self, name: str, default: bool = False) -> bool:
        raw = self.values.get(name)
        if raw is None:
            return default
        if raw in ("true", "1"):
            return True
        if raw in ("false", "0"):
            return False
        raise invalid("query", name, "must be true or false")

    def json(self, name: str) -> Any:
        """A structured parameter: already an object (bracket form) or a JSON string."""
        raw = self.values.get(name)
        if raw is None or isinstance(raw, dict):
            return raw
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise invalid("query", name, "must be valid JSON") from None


def iso_time(value: Any, field: str, kind: str = "query") -> datetime | None:
    """An ISO-8601 date-time from a request; None when absent, a 400 naming the field when bad."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            return parse_iso(value)
        except ValueError:
            pass
    raise invalid(kind, field, "must be an ISO-8601 date-time")


def order_by(query: Query, fields: tuple[str, ...], default: tuple[str, str]) -> tuple[str, str]:
    """``orderBy`` as ``{field, direction}`` in any encoding, or flattened ``field``/``direction``."""
    value = query.json("orderBy")
    if value is None:
        value = {k: query.values[k] for k in ("field", "direction") if isinstance(query.values.get(k), str)}
    if isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, dict):
        raise invalid("query", "orderBy", "must be an object {field, direction}")
    field = value.get("field", default[0])
    direction = str(value.get("direction", default[1])).upper()
    if field not in fields:
        raise invalid("query", "orderBy.field", f"must be one of {', '.join(fields)}")
    if direction not in ("ASC", "DESC"):
        raise invalid("query", "orderBy.direction", "must be ASC or DESC")
    return field, direction
