"""The fields a trace query can filter on, per predicate scope (Mastra's trace-query registry).

One registry serves both the ``where`` compiler (which paths exist, which operators and
literal kinds they take) and trace-query discovery (``/traces/query/fields`` lists it,
``/traces/query/values`` suggests values for the fields marked ``suggest``). Scopes:

- ``trace``: the row of ``traces`` (alias ``t``), plus ``metadata.<key>`` for top-level string
  keys of the trace's metadata;
- ``spans``: a row of ``spans`` (alias ``s``), used inside ``spans: {some|none}``;
- ``scores`` / ``feedback``: grammar only. This server records neither, so their clauses are
  validated against these fields and then match nothing (``some``) or everything (``none``).

Mastra's canonical fields come first, in its order; the extra columns this store has
(``name``, ``entityId``, ``runId``, ``serviceName``, span ids, ...) follow. A field without a
column here (``entityVersionId``) is always missing. SQL comes only from this table; values
a client sends are bound.
"""

from __future__ import annotations

from dataclasses import dataclass

STRING_OPS = ("eq", "ne", "in", "notIn", "exists", "notExists")
ORDERED_OPS = (*STRING_OPS, "lt", "lte", "gt", "gte")
PRESENCE_OPS = ("exists", "notExists")
# Substring matching: the Studio's filter bar can send it; Mastra lists it for no field, so
# it is accepted on string fields without being advertised.
SUBSTRING_OPS = ("includes", "notIncludes")
SCOPES = ("trace", "spans", "scores", "feedback")
MAX_PATH_BYTES = 128


@dataclass(frozen=True)
class Field:
    kind: str  # string | number | stringOrNumber | timestamp | presence
    sql: str | None = None  # over alias {a}; None: no such column here, always missing
    suggest: bool = False  # /traces/query/values answers for it

    @property
    def operators(self) -> tuple[str, ...]:
        return {"string": STRING_OPS, "presence": PRESENCE_OPS}.get(self.kind, ORDERED_OPS)

    def accepts(self, op: str) -> bool:
        return op in self.operators or (self.kind == "string" and op in SUBSTRING_OPS)


def _text(column: str, suggest: bool = False) -> Field:
    return Field("string", f"{{a}}.{column}", suggest)


def _attribute(key: str) -> Field:
    """A string attribute of a span; a non-string value counts as missing."""
    path = f"'$.{key}'"
    return Field("string", f"CASE WHEN json_type({{a}}.attributes, {path}) = 'VARCHAR' "
                           f"THEN json_extract_string({{a}}.attributes, {path}) END", True)


_MISSING = Field("string")
_STARTED, _ENDED = Field("timestamp", "{a}.started_at"), Field("timestamp", "{a}.ended_at")

REGISTRY: dict[str, dict[str, Field]] = {
    "trace": {
        "traceId": _text("trace_id"), "threadId": _text("thread_id"), "resourceId": _text("resource_id"),
        "startedAt": _STARTED, "endedAt": _ENDED, "entityName": _text("entity_name", True),
        "entityType": _text("entity_type", True), "environment": _text("environment", True),
        "status": _text("status", True),
        "name": _text("name", True), "entityId": _text("entity_id"), "runId": _text("run_id"),
        "serviceName": _text("service_name", True),
    },
    "spans": {
        "name": _text("name", True), "spanType": _text("span_type", True), "model": _attribute("model"),
        "provider": _attribute("provider"), "startedAt": _STARTED, "endedAt": _ENDED,
        "durationMs": Field("number", "date_diff('microsecond', {a}.started_at, {a}.ended_at) / 1000.0"),
        "status": _text("status", True), "error": Field("presence", "{a}.error"),
        "entityType": _text("entity_type", True), "entityId": _text("entity_id"),
        "entityName": _text("entity_name", True), "entityVersionId": _MISSING,
        "parentEntityVersionId": _MISSING, "rootEntityVersionId": _MISSING,
        "traceId": _text("trace_id"), "spanId": _text("span_id"), "parentSpanId": _text("parent_span_id"),
        "threadId": _text("thread_id"), "resourceId": _text("resource_id"), "runId": _text("run_id"),
        "environment": _text("environment", True), "serviceName": _text("service_name", True),
    },
    "scores": {
        "scorerId": Field("string", suggest=True), "scorerVersion": Field("string", suggest=True),
        "scoreSource": Field("string", suggest=True), "score": Field("number"), "timestamp": Field("timestamp"),
        "spanId": Field("presence"), "entityVersionId": _MISSING, "parentEntityVersionId": _MISSING,
        "rootEntityVersionId": _MISSING,
    },
    "feedback": {
        "feedbackType": Field("string", suggest=True), "feedbackSource": Field("string", suggest=True),
        "feedbackUserId": _MISSING, "sourceId": _MISSING, "entityVersionId": _MISSING,
        "parentEntityVersionId": _MISSING, "rootEntityVersionId": _MISSING, "value": Field("stringOrNumber"),
        "timestamp": Field("timestamp"), "comment": Field("presence"),
    },
}


def metadata_key(path: str) -> str | None:
    """``metadata.<key>`` -> key, for a top-level key (no dot, not empty, path <= 128 bytes)."""
    if not path.startswith("metadata.") or len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return None
    key = path[len("metadata."):]
    return key if key and "." not in key else None


def metadata_json_path(key: str) -> str:
    return '$."' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


_METADATA = Field("string", suggest=True)  # its SQL depends on the key: see metadata_sql


def field(scope: str, path: str) -> Field | None:
    """The field at ``path`` in ``scope``; ``metadata.<key>`` is a string field of traces."""
    if scope == "trace" and metadata_key(path) is not None:
        return _METADATA
    return REGISTRY[scope].get(path)


def metadata_sql(alias: str, key: str) -> tuple[str, list[str]]:
    """A top-level metadata value, trimmed; a non-string value counts as missing."""
    path = metadata_json_path(key)
    return (f"CASE WHEN json_type({alias}.metadata, ?) = 'VARCHAR' "
            f"THEN trim(json_extract_string({alias}.metadata, ?)) END"), [path, path]


def expression(scope: str, path: str, alias: str) -> tuple[str, list[str]]:
    """SQL (and its bound values) for a field known to ``field``; NULL when it has no column."""
    key = metadata_key(path) if scope == "trace" else None
    if key is not None:
        return metadata_sql(alias, key)
    sql = REGISTRY[scope][path].sql
    return ("NULL" if sql is None else sql.format(a=alias)), []


def canonical(scope: str, search: str) -> list[dict[str, object]]:
    """The registry of one scope as the fields route lists it (filtered by ``search``)."""
    needle = search.strip().lower()
    return [{"path": path, "valueKind": f.kind, "operators": list(f.operators), "valueSuggestions": f.suggest}
            for path, f in REGISTRY[scope].items() if needle in path.lower()]
