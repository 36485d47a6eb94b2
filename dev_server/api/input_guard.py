"""The one boundary where request input is checked and repaired, before routing.

``InputGuard`` is a pure ASGI middleware for both processes. It refuses, with a 400
``{"error", "issues": [{"field", "message"}]}``, what would otherwise make a route fail
with a 500 deep inside a parser or a store:

- a body declared as JSON (``application/json``, ``*+json``) that does not parse, is not
  UTF-8, holds an integer longer than Python's ``int`` digit limit, nests deeper than
  ``MAX_DEPTH``, or holds a non-finite number (``NaN``, ``Infinity``, ``1e999``: Python
  parses them, SQLite's JSON refuses them later; the issue names the field, e.g.
  ``messages.0.metadata.score``); bodies sent without a content type (or as ``text/plain``,
  as CORS-simple clients do) that look like JSON get the same checks except "malformed";
- a query parameter that holds JSON nested deeper than ``MAX_DEPTH``, or a digit run
  longer than the ``int`` limit.

It repairs, rather than refuses, lone UTF-16 surrogates, which SQLite and DuckDB cannot
store and the SSE encoder cannot send: a ``\\ud800`` escape in a JSON body and a
``%ED%A0%80`` (CESU-8) sequence in the path or the query string become U+FFFD. A repaired
body is re-serialised and the app reads the new bytes (``content-length`` updated).

The hot path is one parse of the body (``dev_server.json_finite.loads_finite``: ``json.loads`` at
C speed, whose hooks run only for float literals and the non-finite constants; it also finds
malformed JSON and oversized integers), a count of openers and a search for surrogate escapes; only a body
with more openers than the depth limit has its containers walked (level by level, never
more than the limit), and only one with a lone surrogate is re-serialised. Other media
types (OTLP protobuf, forms) and compressed bodies (gzip OTLP/JSON) pass untouched.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any
from urllib.parse import parse_qsl, unquote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dev_server.json_finite import NonFiniteNumber, loads_finite

MAX_DEPTH = 64
# CPython's limit on int('...') and json.loads of a long integer (ValueError beyond it).
MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300

_BODY, _QUERY = "Invalid request body", "Invalid query parameters"
_SNIFFED = (b"", b"text/plain")  # no declared type, or a CORS-simple one: checked if it looks like JSON

_CONTAINERS = frozenset((dict, list))
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# A UTF-16 surrogate encoded as UTF-8 (CESU-8), percent-encoded: ED A0..BF 80..BF.
_PERCENT_SURROGATE = re.compile(rb"%[eE][dD]%[aAbB][0-9a-fA-F]%[89aAbB][0-9a-fA-F]")
_REPLACEMENT = b"%EF%BF%BD"
_LONG_DIGITS = re.compile(rf"\d{{{MAX_INT_DIGITS + 1},}}")


class InputRefused(Exception):
    def __init__(self, error: str, field: str, message: str) -> None:
        super().__init__(message)
        self.body = {"error": error, "issues": [{"field": field, "message": message}]}


def nests_deeper_than(document: Any, limit: int = MAX_DEPTH, raw: bytes | None = None) -> bool:
    """Whether parsed JSON nests arrays/objects deeper than ``limit``. With the ``raw`` text,
    a body with no more openers than the limit (the usual small one) is not walked at all."""
    if raw is not None and raw.count(b"{") + raw.count(b"[") <= limit:
        return False
    level = [document] if type(document) in _CONTAINERS else []
    for _ in range(limit):
        if not level:
            return False
        # exact types: json.loads makes only dict and list containers (and this is the hot loop)
        level = [child for node in level for child in (node.values() if type(node) is dict else node)
                 if type(child) in _CONTAINERS]
    return bool(level)


def replace_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON) with every lone surrogate in its strings and keys as U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [replace_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {replace_surrogates(key): replace_surrogates(item) for key, item in value.items()}
    return value


def check_json_body(body: bytes, *, declared: bool) -> bytes | None:
    """Refuse (``InputRefused``) or pass a JSON body; returns repaired bytes, or None if unchanged."""
    try:
        document = loads_finite(body)
    except NonFiniteNumber as exc:  # refused even in a sniffed body: a route would parse it anyway
        raise InputRefused(_BODY, exc.field(), exc.message) from None
    except UnicodeDecodeError:
        if declared:
            raise InputRefused(_BODY, "body", "Malformed JSON: the body is not valid UTF-8") from None
        return None
    except json.JSONDecodeError as exc:
        if declared:
            raise InputRefused(_BODY, "body", f"Malformed JSON: {exc.msg} at position {exc.pos}") from None
        return None
    except ValueError:  # only the int digit limit raises a plain ValueError here
        raise InputRefused(_BODY, "body", f"holds an integer with more than {MAX_INT_DIGITS} digits") from None
    except RecursionError:
        raise InputRefused(_BODY, "body", f"JSON nests deeper than {MAX_DEPTH} levels") from None
    if nests_deeper_than(document, raw=body):
        raise InputRefused(_BODY, "body", f"JSON nests deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(body) is None:
        return None
    if not _surrogate_in(document):
        return None  # only valid pairs (an emoji written as two escapes)
    return json.dumps(replace_surrogates(document), ensure_ascii=False, separators=(",", ":")).encode()


def _surrogate_in(value: Any) -> bool:
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, list):
        return any(map(_surrogate_in, value))
    if isinstance(value, dict):
        return any(_surrogate_in(k) or _surrogate_in(v) for k, v in value.items())
    return False


def check_query(query_string: bytes) -> None:
    """Refuse query parameters holding over-deep JSON or over-long integers."""
    if not query_string or (len(query_string) <= MAX_INT_DIGITS and _openers(query_string) <= MAX_DEPTH):
        return  # the usual short query: too short for a long integer, too few openers to nest deep
    for key, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if _LONG_DIGITS.search(value):
            raise InputRefused(_QUERY, key, f"holds an integer with more than {MAX_INT_DIGITS} digits")
        if value.lstrip()[:1] in ("{", "[") and query_json_too_deep(value):
            raise InputRefused(_QUERY, key, f"JSON nests deeper than {MAX_DEPTH} levels")


def _openers(query_string: bytes) -> int:
    """How many ``{`` and ``[`` a query string holds, as written or percent-encoded."""
    if b"%" in query_string:
        query_string = query_string.lower()
    return sum(map(query_string.count, (b"{", b"[", b"%7b", b"%5b")))


def query_json_too_deep(value: str) -> bool:
    """Whether a query value holding JSON nests too deep (not JSON at all: left to the route)."""
    try:
        document = json.loads(value)
    except RecursionError:
        return True
    except ValueError:
        return False
    return nests_deeper_than(document, raw=value.encode())


def repair_target(scope: Scope) -> Scope:
    """``scope`` with CESU-8 surrogates in the raw path and query string as one U+FFFD each
    (the server's own decoding would make three, and the query parser's too)."""
    query, raw_path = scope.get("query_string", b""), scope.get("raw_path") or b""
    fixed_query = _PERCENT_SURROGATE.sub(_REPLACEMENT, query) if b"%" in query else query
    fixed_path = _PERCENT_SURROGATE.sub(_REPLACEMENT, raw_path) if b"%" in raw_path else raw_path
    if fixed_query == query and fixed_path == raw_path:
        return scope
    repaired = {**scope, "query_string": fixed_query}
    if fixed_path != raw_path:  # the server decodes path from raw_path the same way
        repaired |= {"raw_path": fixed_path, "path": scope.get("root_path", "") + unquote(fixed_path.decode("latin-1"))}
    return repaired


def _body_headers(scope: Scope) -> tuple[bytes, bytes]:
    """(media type, content encoding) of the request body, lower-cased, b"" when absent."""
    media = encoding = b""
    for name, value in scope["headers"]:
        if name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
        elif name == b"content-encoding":
            encoding = value.strip().lower()
    return media, encoding


def _json_declared(media: bytes) -> bool:
    return media == b"application/json" or media.endswith(b"+json")


class InputGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            scope = repair_target(scope)
            check_query(scope.get("query_string", b""))
        except InputRefused as refused:
            await _refuse(send, refused)
            return
        media, encoding = _body_headers(scope)
        declared = _json_declared(media)
        # A compressed body (gzip OTLP/JSON) is inflated and bounded by its route.
        if (scope["method"] in ("GET", "HEAD", "OPTIONS") or encoding not in (b"", b"identity")
                or not (declared or media in _SNIFFED)):
            await self.app(scope, receive, send)
            return
        body, disconnected = await _read_body(receive)
        if disconnected:
            return
        if body and (declared or body.lstrip()[:1] in (b"{", b"[")):
            try:
                repaired = check_json_body(body, declared=declared)
            except InputRefused as refused:
                await _refuse(send, refused)
                return
            if repaired is not None:
                body = repaired
                scope = {**scope, "headers": _with_length(scope["headers"], len(body))}
        await self.app(scope, _replay(body, receive), send)


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"", True
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), False


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # later calls wait for the disconnect, as streaming routes expect

    return replayed


def _with_length(headers: list[tuple[bytes, bytes]], length: int) -> list[tuple[bytes, bytes]]:
    kept = [(k, v) for k, v in headers if k not in (b"content-length", b"transfer-encoding")]
    return [*kept, (b"content-length", str(length).encode())]


async def _refuse(send: Send, refused: InputRefused) -> None:
    payload = json.dumps(refused.body).encode()
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})
