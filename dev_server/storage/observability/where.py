"""The trace query's ``where`` predicate (Mastra's Studio REST API: trace query) checked and compiled to SQL.

Grammar (Mastra's trace query): ``and/or {args}``, ``not {arg}``,
``eq/ne/lt/lte/gt/gte {left:{path}, right:{literal}}``, ``in/notIn {value:{path}, set:[...]}``,
``exists/notExists {path}``, ``includes/notIncludes {path, value}`` (or ``left``/``right``), and
``spans|scores|feedback: {some|none: Pred}``, which asks the same of a trace's related records.
Paths and the operators and literal kinds they take come from ``query_fields``; nothing a
client sends becomes SQL text, values are bound.

Everything is checked before any SQL exists, and every problem is a ``TraceQueryInvalid``
(422 TRACE_QUERY_INVALID) whose issues name the offending field as a path from the body
(``["where", "args", 0, "right", "literal"]``): unknown ops, paths that are not strings or
not fields of the scope, literals whose type does not match the field (no coercion), strings
that are not valid Unicode (a lone UTF-16 surrogate cannot reach DuckDB), integers beyond 64
bits, and trees past Mastra's limits (depth 12, 100 nodes, 8 related clauses, 100 values in a
set, 1,000 literals, 4,096-byte strings). Recursion is bounded by the depth check, so a deep
tree costs nothing. Missing values satisfy ``ne``/``notIn``/``notIncludes`` only, as in Mastra.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from dev_server.kernel.clock import parse_iso
from dev_server.storage.observability.query_fields import expression, field

MAX_DEPTH, MAX_NODES, MAX_RELATED, MAX_SET, MAX_LITERALS, MAX_STRING_BYTES = 12, 100, 8, 100, 1000, 4096
_COMPARE = {"eq": "=", "ne": "IS DISTINCT FROM", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}
_RELATED = ("spans", "scores", "feedback")
_INT64 = 2 ** 63
Path = list[str | int]


class TraceQueryInvalid(ValueError):
    """A request this server refuses: 422 ``{"code": "TRACE_QUERY_INVALID", "message", "issues"}``."""

    def __init__(self, issues: list[dict[str, Any]]) -> None:
        first = issues[0]
        super().__init__(f"{'.'.join(map(str, first['path'])) or 'body'}: {first['message']}")
        self.issues = issues


def invalid(path: Path, message: str, code: str = "invalid_request") -> TraceQueryInvalid:
    return TraceQueryInvalid([{"code": code, "path": list(path), "message": message}])


def check_text(value: str, path: Path, *, max_bytes: int = MAX_STRING_BYTES) -> str:
    """A string that can be stored and compared: valid Unicode, at most ``max_bytes``."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise invalid(path, "must be valid Unicode (it holds a lone UTF-16 surrogate)") from None
    if size > max_bytes:
        raise invalid(path, f"must be at most {max_bytes} UTF-8 bytes")
    return value


def compile_where(pred: Any, alias: str = "t", *, resource: str | None = None) -> tuple[str, list[Any]]:
    """SQL over ``traces`` (alias ``alias``) and its bound values. ``resource`` (the caller's,
    with auth on) also limits ``spans`` clauses to that resource's spans."""
    return _Compiler(resource).predicate(pred, "trace", alias, ["where"], 1)


class _Compiler:
    def __init__(self, resource: str | None) -> None:
        self.resource = resource
        self.nodes = self.related = self.literals = 0

    def predicate(self, pred: Any, scope: str, alias: str, path: Path, depth: int) -> tuple[str, list[Any]]:
        self.nodes += 1
        if depth > MAX_DEPTH:
            raise invalid(path, f"predicates nest at most {MAX_DEPTH} levels", "predicate_too_complex")
        if self.nodes > MAX_NODES:
            raise invalid(path, f"a query has at most {MAX_NODES} predicates", "predicate_too_complex")
        if not isinstance(pred, dict):
            raise invalid(path, "a predicate must be an object")
        related = [name for name in _RELATED if name in pred]
        if related:
            if scope != "trace" or len(pred) != 1:
                raise invalid(path, f"{related[0]} clauses stand alone, at the trace level")
            return self._related(related[0], pred[related[0]], alias, [*path, related[0]], depth)
        op = pred.get("op")
        if not isinstance(op, str):
            raise invalid([*path, "op"], "must be a string naming the operator")
        if op in ("and", "or"):
            args = pred.get("args")
            if not isinstance(args, list) or not args:
                raise invalid([*path, "args"], f"{op} needs a non-empty array of predicates")
            parts = [self.predicate(arg, scope, alias, [*path, "args", i], depth + 1) for i, arg in enumerate(args)]
            return "(" + f" {op.upper()} ".join(sql for sql, _ in parts) + ")", [v for _, vs in parts for v in vs]
        if op == "not":
            sql, values = self.predicate(pred.get("arg"), scope, alias, [*path, "arg"], depth + 1)
            return f"(NOT {sql})", values
        if op in _COMPARE:
            return self._compare(op, pred, scope, alias, path)
        if op in ("in", "notIn"):
            return self._membership(op, pred, scope, alias, path)
        if op in ("exists", "notExists"):
            column, values, _ = self._field(op, pred.get("path"), scope, alias, [*path, "path"])
            return f"{column} IS {'NOT ' if op == 'exists' else ''}NULL", values
        if op in ("includes", "notIncludes"):
            return self._includes(op, pred, scope, alias, path)
        raise invalid([*path, "op"], f"unknown operator {op!r}")

    def _related(self, name: str, clause: Any, alias: str, path: Path, depth: int) -> tuple[str, list[Any]]:
        self.related += 1
        if self.related > MAX_RELATED:
            raise invalid(path, f"a query has at most {MAX_RELATED} related clauses", "predicate_too_complex")
        if not isinstance(clause, dict) or len(clause) != 1 or not ({"some", "none"} & clause.keys()):
            raise invalid(path, f"{name} needs exactly one of some or none")
        quantifier = "some" if "some" in clause else "none"
        inner, values = self.predicate(clause[quantifier], name, "s", [*path, quantifier], depth + 1)
        if name != "spans":  # no scores or feedback are recorded: some finds none, none holds
            return ("FALSE" if quantifier == "some" else "TRUE"), []
        if self.resource is not None:
            inner, values = f"s.resource_id = ? AND {inner}", [self.resource, *values]
        exists = f"EXISTS (SELECT 1 FROM spans s WHERE s.trace_id = {alias}.trace_id AND {inner})"
        return (exists if quantifier == "some" else f"NOT {exists}"), values

    def _field(self, op: str, raw: Any, scope: str, alias: str, path: Path) -> tuple[str, list[Any], str]:
        """(SQL, its values, value kind) of a path, checked against the scope and operator."""
        if not isinstance(raw, str) or not raw:
            raise invalid(path, "must be a non-empty string naming a field")
        check_text(raw, path, max_bytes=128)
        found = field(scope, raw)
        if found is None:
            raise invalid(path, f"unknown field {raw!r} in the {scope} scope")
        if not found.accepts(op):
            raise invalid(path, f"{raw} does not take {op} (it takes {', '.join(found.operators)})")
        sql, values = expression(scope, raw, alias)
        return sql, values, found.kind

    def _literal(self, value: Any, kind: str, name: str, path: Path) -> Any:
        self.literals += 1
        if self.literals > MAX_LITERALS:
            raise invalid(path, f"a query has at most {MAX_LITERALS} literals", "predicate_too_complex")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and isinstance(value, int) and not -_INT64 <= value < _INT64:
            raise invalid(path, "integers must fit in 64 bits")
        if number and isinstance(value, float) and not math.isfinite(value):
            raise invalid(path, "numbers must be finite")
        if kind == "string" and isinstance(value, str):
            return check_text(value, path)
        if kind == "number" and number:
            return value
        if kind == "stringOrNumber" and (number or isinstance(value, str)):
            return check_text(value, path) if isinstance(value, str) else value
        if kind == "timestamp" and isinstance(value, str):
            return _moment(value, path)
        wanted = {"string": "a string", "number": "a number", "stringOrNumber": "a string or a number",
                  "timestamp": "an ISO-8601 date-time string"}.get(kind, "absent")
        raise invalid(path, f"{name} compares with {wanted}, got {type(value).__name__}")

    def _compare(self, op: str, pred: dict, scope: str, alias: str, path: Path) -> tuple[str, list[Any]]:
        left, right = pred.get("left"), pred.get("right")
        if not isinstance(left, dict) or "path" not in left:
            raise invalid([*path, "left"], "must be {path} (a field on the left)")
        if not isinstance(right, dict) or "literal" not in right:
            raise invalid([*path, "right"], "must be {literal} (a literal on the right)")
        column, values, kind = self._field(op, left["path"], scope, alias, [*path, "left", "path"])
        literal = self._literal(right["literal"], kind, left["path"], [*path, "right", "literal"])
        return f"{column} {_COMPARE[op]} ?", [*values, literal]

    def _membership(self, op: str, pred: dict, scope: str, alias: str, path: Path) -> tuple[str, list[Any]]:
        ref = pred.get("value", pred.get("left"))
        if not isinstance(ref, dict) or "path" not in ref:
            raise invalid([*path, "value"], "must be {path}")
        column, values, kind = self._field(op, ref["path"], scope, alias, [*path, "value", "path"])
        members = pred.get("set")
        if not isinstance(members, list) or not 1 <= len(members) <= MAX_SET:
            raise invalid([*path, "set"], f"must be an array of 1 to {MAX_SET} literals")
        literals = [self._literal(v, kind, ref["path"], [*path, "set", i]) for i, v in enumerate(members)]
        if len({type(v) for v in literals}) > 1:
            raise invalid([*path, "set"], "must hold literals of one type")
        marks = ", ".join("?" * len(literals))
        if op == "in":
            return f"{column} IN ({marks})", [*values, *literals]
        return f"({column} IS NULL OR {column} NOT IN ({marks}))", [*values, *values, *literals]

    def _includes(self, op: str, pred: dict, scope: str, alias: str, path: Path) -> tuple[str, list[Any]]:
        if "path" in pred:
            raw, needle, where = pred["path"], pred.get("value"), [*path, "value"]
        else:
            left, right = pred.get("left"), pred.get("right")
            raw = left.get("path") if isinstance(left, dict) else None
            needle = right.get("literal") if isinstance(right, dict) else None
            where = [*path, "right", "literal"]
        column, values, _ = self._field(op, raw, scope, alias, [*path, "path"])
        needle = self._literal(needle, "string", str(raw), where)
        sql = f"contains(lower({column}), lower(?))"
        return (sql if op == "includes" else f"NOT coalesce({sql}, false)"), [*values, needle]


def _moment(text: str, path: Path) -> datetime:
    check_text(text, path)
    try:
        return parse_iso(text)
    except ValueError:
        raise invalid(path, "must be an ISO-8601 date-time") from None
