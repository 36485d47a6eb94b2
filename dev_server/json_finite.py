"""Non-finite numbers in what clients send: refused, naming where.

``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (RFC 8259), and a number beyond a
double's range (``1e999``) has no float value, yet Python's ``json.loads`` turns all of them
into floats; SQLite's and DuckDB's JSON functions refuse them later, far from the request.
``loads_finite`` parses client JSON (request bodies, JSON query parameters, OTLP/JSON) and
raises ``NonFiniteNumber`` with the dotted path of the first one, for a 400 naming the field.
(What the server itself writes is made valid JSON by ``dev_server.kernel.json_text`` instead.)

It costs nothing on the usual document: the parse hooks run only for float literals and
the three constants, and the path is searched only once one was found.
"""

from __future__ import annotations

import json
import math
from typing import Any

Path = tuple[str | int, ...]
_CONSTANTS = ("NaN", "Infinity", "-Infinity")


class NonFiniteNumber(ValueError):
    """A client document holds NaN, ±Infinity or a number beyond a double's range.
    ``path`` is where (keys and list indexes; empty for the top level or when unknown)."""

    def __init__(self, path: Path, literal: str) -> None:
        self.path = path
        self.literal = literal
        why = "is not JSON" if literal in _CONSTANTS else "is beyond the range of a double"
        self.message = f"must be a finite number ({literal} {why})"
        super().__init__(self.message)

    def field(self, prefix: str = "") -> str:
        """The dotted field of the app's 400 issues, under ``prefix`` (a query parameter's name)."""
        return ".".join(str(part) for part in ((prefix,) if prefix else ()) + self.path) or "body"


class _Seen(Exception):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


class _Marker:
    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _refuse_constant(literal: str) -> Any:
    raise _Seen(literal)


def _refuse_overflow(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # a literal beyond the double range parses as ±inf
        raise _Seen(text)
    return value


def _mark_overflow(text: str) -> Any:
    value = float(text)
    return _Marker(text) if math.isinf(value) else value


_STRICT = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_refuse_overflow)
_MARKING = json.JSONDecoder(parse_constant=_Marker, parse_float=_mark_overflow)  # only to say where


def loads_finite(raw: bytes | str) -> Any:
    """``json.loads``, except that a non-finite number raises ``NonFiniteNumber``. Raises
    what ``json.loads`` raises otherwise (``JSONDecodeError``, ``UnicodeDecodeError``,
    ``ValueError`` for an integer past the digit limit, ``RecursionError``)."""
    text = raw.decode(json.detect_encoding(raw), "surrogatepass") if isinstance(raw, (bytes, bytearray)) else raw
    try:
        return _STRICT.decode(text)
    except _Seen as seen:
        path, literal = _locate(_MARKING.decode(text))
        raise NonFiniteNumber(path, literal or seen.literal) from None


def _locate(document: Any) -> tuple[Path, str | None]:
    """The path of the first marker in document order (iterative: the document may be deep).
    None when a later duplicate key replaced it (``{"a": NaN, "a": 1}``)."""
    stack: list[tuple[Path, Any]] = [((), document)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, _Marker):
            return path, node.literal
        if isinstance(node, dict):
            stack.extend(reversed([((*path, key), value) for key, value in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([((*path, index), value) for index, value in enumerate(node)]))
    return (), None
