"""The trace query's ``where`` predicate (STUDIO-REST.md 6.1) compiled to SQL over ``traces``.

Predicates: ``and/or {args}``, ``not {arg}``, ``eq/ne/lt/lte/gt/gte {left:{path}, right:{literal}}``,
``in/notIn {value:{path}, set:[...]}``, ``exists/notExists {path}``, ``includes/notIncludes``,
and ``spans: {some|none: Pred}``, which asks the same of a trace's spans. Paths are
whitelisted column names, so nothing a client sends becomes SQL text; values are bound.
"""

from __future__ import annotations

from typing import Any

# camelCase path -> column, for a trace row and for a span row
TRACE_COLUMNS = {
    "traceId": "trace_id", "name": "name", "status": "status", "entityType": "entity_type",
    "entityId": "entity_id", "entityName": "entity_name", "threadId": "thread_id",
    "resourceId": "resource_id", "runId": "run_id", "environment": "environment",
    "serviceName": "service_name", "startedAt": "started_at", "endedAt": "ended_at",
}
SPAN_COLUMNS = {**TRACE_COLUMNS, "spanId": "span_id", "spanType": "span_type", "parentSpanId": "parent_span_id"}
_COMPARE = {"eq": "=", "ne": "!=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}


class WhereError(ValueError):
    """A predicate this server cannot evaluate; reported as 422 TRACE_QUERY_INVALID."""


def compile_where(pred: Any, alias: str = "t", columns: dict[str, str] = TRACE_COLUMNS) -> tuple[str, list[Any]]:
    if not isinstance(pred, dict):
        raise WhereError("a predicate must be an object")
    if "spans" in pred:
        return _spans(pred["spans"], alias)
    op = pred.get("op")
    if op in ("and", "or"):
        args = pred.get("args")
        if not isinstance(args, list):
            raise WhereError(f"{op} needs args")
        if not args:
            return ("TRUE" if op == "and" else "FALSE"), []
        parts = [compile_where(arg, alias, columns) for arg in args]
        return "(" + f" {op.upper()} ".join(sql for sql, _ in parts) + ")", [v for _, vs in parts for v in vs]
    if op == "not":
        sql, values = compile_where(pred.get("arg"), alias, columns)
        return f"(NOT {sql})", values
    if op in _COMPARE:
        column = _column(pred.get("left"), alias, columns)
        return f"{column} {_COMPARE[op]} ?", [_literal(pred.get("right"))]
    if op in ("in", "notIn"):
        column = _column(pred.get("value") or pred.get("left"), alias, columns)
        values = pred.get("set")
        if not isinstance(values, list):
            raise WhereError(f"{op} needs a set")
        if not values:
            return ("FALSE" if op == "in" else "TRUE"), []
        marks = ", ".join("?" * len(values))
        return f"{column} {'IN' if op == 'in' else 'NOT IN'} ({marks})", [_plain(v) for v in values]
    if op in ("exists", "notExists"):
        column = _column(pred.get("path") if isinstance(pred.get("path"), dict) else pred, alias, columns)
        return f"{column} IS {'NOT ' if op == 'exists' else ''}NULL", []
    if op in ("includes", "notIncludes"):
        column = _column(pred.get("left"), alias, columns)
        sql = f"contains(lower({column}), lower(?))"
        return (sql if op == "includes" else f"NOT {sql}"), [str(_literal(pred.get("right")))]
    raise WhereError(f"unsupported predicate op {op!r}")


def _spans(spec: Any, alias: str) -> tuple[str, list[Any]]:
    if not isinstance(spec, dict) or not ({"some", "none"} & spec.keys()):
        raise WhereError("spans needs some or none")
    quantifier = "some" if "some" in spec else "none"
    inner, values = compile_where(spec[quantifier], "s", SPAN_COLUMNS)
    exists = f"EXISTS (SELECT 1 FROM spans s WHERE s.trace_id = {alias}.trace_id AND {inner})"
    return (exists if quantifier == "some" else f"NOT {exists}"), values


def _column(ref: Any, alias: str, columns: dict[str, str]) -> str:
    path = ref.get("path") if isinstance(ref, dict) else None
    if isinstance(path, list):
        path = ".".join(map(str, path))
    if path not in columns:
        raise WhereError(f"unknown field {path!r}")
    return f"{alias}.{columns[path]}"


def _literal(ref: Any) -> Any:
    if not isinstance(ref, dict) or "literal" not in ref:
        raise WhereError("the right side must be {literal}")
    return _plain(ref["literal"])


def _plain(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    raise WhereError("literals must be strings, numbers or booleans")
