"""Query strings in the three encodings Mastra's clients send (Mastra's Studio REST API: conventions).

- plain scalars: ``page=0&perPage=40``;
- JSON in one parameter: ``orderBy={"field":"createdAt","direction":"DESC"}``;
- bracket notation, folded into an object: ``orderBy[field]=updatedAt&orderBy[direction]=ASC``.

``requestContext`` (base64 JSON, sometimes nested) is accepted and ignored; unknown keys
are dropped. Every failure is a 400 "Invalid query parameters" naming the field: a key
used both as a plain value and as a bracket object (``x=1&x[a]=2``, ``x[a]=1&x[a][b]=2``,
in either order), brackets or JSON nested deeper than ``MAX_DEPTH``, integers that are not
plain ASCII digits within 64 bits, non-finite numbers in JSON (``NaN``, ``1e999``), a
``page`` whose offset (``page * perPage``) is past 64 bits. Lone surrogates in JSON
parameters become U+FFFD.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from starlette.requests import Request

from dev_server.api.input_guard import MAX_DEPTH, query_json_too_deep, replace_surrogates
from dev_server.json_finite import NonFiniteNumber, loads_finite
from dev_server.kernel.clock import parse_iso
from dev_server.kernel.errors import invalid

_BRACKET = re.compile(r"^([^\[\]]+)((?:\[[^\[\]]*\])+)$")
_INTEGER = re.compile(r"-?[0-9]{1,19}")
INT64_MAX = 2**63 - 1
ISO_TIME = "must be an ISO-8601 date-time (years 1 to 9999 in UTC)"


class Query:
    def __init__(self, request: Request) -> None:
        self.values: dict[str, Any] = {}
        for key, value in request.query_params.multi_items():
            match = _BRACKET.match(key)
            if not match:
                if isinstance(self.values.get(key), dict):
                    raise invalid("query", key, "mixes a plain value and bracket notation")
                self.values[key] = value
                continue
            keys = re.findall(r"\[([^\[\]]*)\]", match[2])
            if len(keys) > MAX_DEPTH:
                raise invalid("query", match[1], f"bracket notation nests deeper than {MAX_DEPTH} levels")
            path = [match[1], *keys]
            target = self.values
            for depth, inner in enumerate(path[:-1], start=1):
                target = target.setdefault(inner, {})
                if not isinstance(target, dict):
                    raise invalid("query", _bracketed(path[:depth]), "mixes a plain value and bracket notation")
            if isinstance(target.get(path[-1]), dict):
                raise invalid("query", _bracketed(path), "mixes a plain value and bracket notation")
            target[path[-1]] = value

    def str(self, name: str, default: str | None = None, *, aliases: tuple[str, ...] = ()) -> str | None:
        for key in (name, *aliases):
            value = self.values.get(key)
            if value is not None:
                if not isinstance(value, str):
                    raise invalid("query", name, "must be a string")
                return value
        return default

    def int(self, name: str, default: int, *, minimum: int = 0, maximum: int = INT64_MAX) -> int:
        raw = self.values.get(name)
        if raw is None or raw == "":
            return default
        if not isinstance(raw, str) or not _INTEGER.fullmatch(raw):
            raise invalid("query", name, "must be an integer within 64 bits")
        value = int(raw)
        if value < minimum or value > maximum:
            raise invalid("query", name, f"must be at least {minimum} and at most {maximum}")
        return value

    def per_page(self, default: int, maximum: int) -> int | None:
        """``perPage``; the literal ``false`` (or -1) means no limit, as Mastra allows."""
        raw = self.values.get("perPage")
        if raw in ("false", "-1"):
            return None
        return self.int("perPage", default, minimum=1, maximum=maximum)

    def page(self, per_page: int | None) -> int:
        """``page`` (default 0), bounded so that its offset ``page * perPage`` fits SQL's 64-bit
        OFFSET (with no limit, ``per_page`` None, there is no offset to bound)."""
        limit = INT64_MAX // per_page if per_page else INT64_MAX
        page = self.int("page", 0, maximum=INT64_MAX)
        if page > limit:
            raise invalid("query", "page", f"must be at most {limit} with perPage {per_page} "
                                           "(the offset page * perPage must fit in 64 bits)")
        return page

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
        if query_json_too_deep(raw):
            raise invalid("query", name, f"JSON nests deeper than {MAX_DEPTH} levels")
        try:
            return replace_surrogates(loads_finite(raw))
        except NonFiniteNumber as exc:
            raise invalid("query", exc.field(name), exc.message) from None
        except json.JSONDecodeError:
            raise invalid("query", name, "must be valid JSON") from None
        except ValueError:  # the int digit limit
            raise invalid("query", name, "holds an integer that is too long") from None


def _bracketed(keys: list[str]) -> str:
    return keys[0] + "".join(f"[{key}]" for key in keys[1:])


def iso_time(value: Any, field: str, kind: str = "query") -> datetime | None:
    """An ISO-8601 date-time from a request; None when absent, a 400 naming the field when bad."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            return parse_iso(value)
        except ValueError:
            pass
    raise invalid(kind, field, ISO_TIME)


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
