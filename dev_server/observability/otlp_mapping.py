"""OTLP export requests -> rows of ``spans``, ``traces`` and ``logs`` (pure, no I/O).

The gateway cannot open the DuckDB file (docs/architecture.md#decisions), so its spans and logs
arrive at the studio as OTLP/HTTP. The studio's own spans and logs are read from the SDK as
they are (``spans_from_own``, ``logs_from_own``: no OTLP message in between) into the same
rows. The
``mastra.*`` attributes our instrumentation sets become the Mastra row fields of
Mastra's Studio REST API: observability; every other attribute (third-party instrumentation) is kept in
the row's ``attributes`` (spans) or ``data`` (logs) JSON.

A request is decoded whole or refused whole (``OtlpDecodeError``, a 400): ids of the
wrong length or bad timestamps fail the request instead of leaving half a trace. Rows are
tuples in the fixed order of ``SPAN_COLUMNS``/``TRACE_COLUMNS``/``LOG_COLUMNS``, ready for
DuckDB's appender. Ids leave as lowercase hex (trace 32 chars, span 16 chars). Turning an
HTTP body (protobuf or OTLP/JSON, gzip) into the request message is ``dev_server.api.otlp``'s job.

Ownership: with ``resource`` given (an authenticated user's ``user:<principal>``), every row
gets that resource, whatever ``mastra.resource_id`` the sender claims.

Identity: a span is (traceId, spanId). A log record has no id in OTLP; ``log_id`` is the
sender's ``log.record.uid`` when it sets one, else a digest of the record with its resource
and scope, so the same record sent twice (a retried batch, in either encoding) has the same
id and is stored once. A record with no timestamp at all is told apart from an identical
one by its position in the request too (such records cannot be deduplicated across retries).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import orjson
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from dev_server.storage.observability.columns import SPAN_COLUMNS, TRACE_COLUMNS

PREVIEW_CHARS = 200
STATUS_CODE_ERROR = 2
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FIELDS = ("entity_type", "entity_id", "entity_name", "thread_id", "resource_id", "run_id")
_TEXT_LEVELS = {"trace": "debug", "debug": "debug", "info": "info", "information": "info", "warn": "warn",
                "warning": "warn", "error": "error", "err": "error", "fatal": "fatal", "critical": "fatal"}


class OtlpDecodeError(ValueError):
    """A payload this receiver refuses (400); ``issues`` names the fields at fault."""

    def __init__(self, message: str, issues: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.issues = issues


def _any(value) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_any(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return getattr(value, kind)


def _attributes(pairs) -> dict[str, Any]:
    return {kv.key: _any(kv.value) for kv in pairs}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def _json(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:  # NaN/Infinity are not JSON; DuckDB would refuse the row
        return json.dumps(_finite(value), separators=(",", ":"), ensure_ascii=False)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # json.loads takes NaN; DuckDB's JSON does not


_DECODER = json.JSONDecoder(parse_constant=_no_constant)  # one, not one per json.loads call

def _decoded(raw: Any) -> tuple[Any, str | None]:
    """A ``mastra.*`` JSON-encoded attribute -> (value, JSON text); plain text stays a string."""
    if raw is None:
        return None, None
    if isinstance(raw, str):
        try:
            return _DECODER.decode(raw), raw
        except ValueError:
            return raw, _json(raw)
    return raw, _json(raw)


def _payload(raw: Any) -> tuple[Any, str | None]:
    """``_decoded`` for ``mastra.input`` and ``mastra.output``, orjson first: a model
    generation's input is the whole prompt (tens of kilobytes on a long thread), parsed on
    every span at twice json's speed. Their JSON text is stored as sent and the value only
    feeds the trace's input preview, so orjson's one liberty (an integer past 64 bits read as
    a float) shows at most in the preview of an input that is such a number; what orjson
    refuses goes through json as before."""
    if isinstance(raw, str):
        try:
            return orjson.loads(raw), raw
        except orjson.JSONDecodeError:
            pass
    return _decoded(raw)


def _moment(nanos: int, field: str) -> datetime:
    try:
        return _EPOCH + timedelta(microseconds=nanos // 1000)
    except OverflowError:
        raise OtlpDecodeError(f"{field} is out of range", [{"field": field, "message": "out of range"}]) from None


def _hex_id(raw: bytes, size: int, field: str, *, required: bool) -> str | None:
    """Lowercase hex; an empty or all-zero id is absent (OTLP's "invalid id")."""
    if (not raw or not any(raw)) and not required:
        return None
    if len(raw) != size or not any(raw):
        raise OtlpDecodeError(f"{field} must be {size} non-zero bytes, got {raw.hex() or 'none'}",
                              [{"field": field, "message": f"must be {size} non-zero bytes"}])
    return raw.hex()


def _resource(resource) -> tuple[str | None, str | None]:
    return _service_env(_attributes(resource.attributes))


def _service_env(attrs: Any) -> tuple[str | None, str | None]:
    """A resource's service name and deployment environment, from its attributes (a mapping)."""
    env = attrs.get("deployment.environment") or attrs.get("deployment.environment.name")
    return _text(attrs.get("service.name")), _text(env)


def _tags(raw: Any) -> str | None:
    tags = _decoded(raw)[0]
    return None if tags is None else _json(tags if isinstance(tags, list) else [tags])


def input_preview(value: Any) -> str | None:
    """The Studio's Input column: the text itself, the last user message, else JSON cut short."""
    if value is None:
        return None
    if isinstance(value, str):
        return value[:PREVIEW_CHARS]
    messages = value.get("messages") if isinstance(value, dict) else value
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                text = _message_text(message)
                if text is not None:
                    return text[:PREVIEW_CHARS]
    return (_json(value) or "")[:PREVIEW_CHARS]


def _message_text(message: dict[str, Any]) -> str | None:
    content = message.get("content", message.get("parts"))
    if isinstance(content, str):
        return content
    if isinstance(content, dict):  # Mastra's stored format 2: {format, parts}
        content = content.get("parts")
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return " ".join(texts) if texts else None
    return None


def _error(facts: SpanFacts, decoded: Any) -> Any:
    if decoded is not None:
        return decoded if isinstance(decoded, dict) else {"message": str(decoded)}
    if not facts.failed:
        return None
    if facts.exception is not None:
        attrs = facts.exception
        error = {"message": attrs.get("exception.message") or facts.status_message or "error",
                 "name": attrs.get("exception.type"), "stack": attrs.get("exception.stacktrace")}
        return {k: v for k, v in error.items() if v is not None}
    return {"message": facts.status_message or "error"}


@dataclass(slots=True)
class SpanFacts:
    """One span as its rows need it, read from an OTLP message (``_proto_facts``) or from this
    process's own SDK span (``own_span_facts``): ids in lowercase hex, times as datetimes."""

    name: str
    attributes: dict[str, Any]
    trace_id: str
    span_id: str
    parent_id: str | None
    started: datetime
    ended: datetime | None
    failed: bool
    status_message: str
    exception: dict[str, Any] | None  # the attributes of its first "exception" event
    links: list[dict[str, Any]]


def _proto_facts(span) -> SpanFacts:
    trace_id = _hex_id(span.trace_id, 16, "traceId", required=True)
    span_id = _hex_id(span.span_id, 8, "spanId", required=True)
    parent_id = _hex_id(span.parent_span_id, 8, "parentSpanId", required=False)
    exception = next((_attributes(event.attributes) for event in span.events if event.name == "exception"), None)
    return SpanFacts(
        name=span.name, attributes=_attributes(span.attributes), trace_id=trace_id, span_id=span_id,
        parent_id=parent_id, started=_moment(span.start_time_unix_nano, "startTimeUnixNano"),
        ended=_moment(span.end_time_unix_nano, "endTimeUnixNano") if span.end_time_unix_nano else None,
        failed=span.status.code == STATUS_CODE_ERROR, status_message=span.status.message, exception=exception,
        links=[{"traceId": link.trace_id.hex(), "spanId": link.span_id.hex(),
                "attributes": _attributes(link.attributes) or None} for link in span.links])


def own_span_facts(span) -> SpanFacts:
    """An OpenTelemetry SDK ``ReadableSpan`` of this process, read as it is: the studio's own
    spans reach its store without an OTLP message in between (encoded to protobuf and read
    back, they cost twice as much as the rest of their way to the store)."""
    context, parent = span.context, span.parent
    exception = next((dict(event.attributes or {}) for event in span.events if event.name == "exception"), None)
    return SpanFacts(
        name=span.name, attributes=dict(span.attributes or {}), trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}", parent_id=f"{parent.span_id:016x}" if parent is not None else None,
        started=_moment(span.start_time or 0, "startTimeUnixNano"),
        ended=_moment(span.end_time, "endTimeUnixNano") if span.end_time else None,
        failed=span.status.status_code.value == STATUS_CODE_ERROR, status_message=span.status.description or "",
        exception=exception,
        links=[{"traceId": f"{link.context.trace_id:032x}", "spanId": f"{link.context.span_id:016x}",
                "attributes": dict(link.attributes or {}) or None} for link in span.links])


def _own_payload(raw: Any, *, parse: bool) -> tuple[Any, str | None]:
    """``_payload`` for a span of this process, whose ``mastra.*`` JSON text ``spans.to_json``
    wrote (valid JSON by construction): the text is stored as it is, and parsed only when
    ``parse`` (a root span's input, for the trace's preview). A model generation's input is the
    whole prompt; parsing it on every span only to keep its text was most of the mapping's cost."""
    if not isinstance(raw, str):
        return _decoded(raw)
    return (orjson.loads(raw) if parse else None), raw


def _span_rows(facts: SpanFacts, service: str | None, resource_env: str | None, received_at: datetime,
               *, own: bool = False) -> tuple[tuple, tuple | None]:
    """The span's row, and its trace's row when it is a root. ``own``: a span of this process
    (``own_span_facts``), its input and output stored as they are (``_own_payload``)."""
    attrs = facts.attributes
    mastra = {key[7:]: attrs.pop(key) for key in [k for k in attrs if k.startswith("mastra.")]}
    fields = {name: _text(mastra.pop(name, None)) for name in (*_FIELDS, "user_id", "span_type", "environment")}
    extra, _ = _decoded(mastra.pop("attributes", None))
    attrs.update({f"mastra.{k}": v for k, v in mastra.items()
                  if k not in ("input", "output", "metadata", "tags", "error")})
    if extra is not None:
        attrs.update(extra if isinstance(extra, dict) else {"mastra.attributes": extra})
    parent = facts.parent_id
    if own:
        input_value, input_json = _own_payload(mastra.get("input"), parse=parent is None)
        output_json = _own_payload(mastra.get("output"), parse=False)[1]
    else:
        input_value, input_json = _payload(mastra.get("input"))
        output_json = _payload(mastra.get("output"))[1]
    metadata = _decoded(mastra.get("metadata"))[1]
    error = _error(facts, _decoded(mastra.get("error"))[0])
    trace_id, span_id, started, ended = facts.trace_id, facts.span_id, facts.started, facts.ended
    status = "error" if facts.failed else "success"
    environment = fields["environment"] or resource_env
    row = (trace_id, span_id, parent, facts.name, fields["span_type"] or "generic", False, status, started, ended,
           fields["entity_type"], fields["entity_id"], fields["entity_name"], fields["run_id"], fields["thread_id"],
           fields["resource_id"], fields["user_id"], environment, service, _json(attrs or None), metadata,
           input_json, output_json, _json(error), _tags(mastra.get("tags")),
           _json(facts.links or None), received_at, received_at)
    if parent is not None:
        return row, None
    trace = (trace_id, span_id, facts.name, status, started, ended, fields["entity_type"], fields["entity_id"],
             fields["entity_name"], fields["thread_id"], fields["resource_id"], fields["run_id"], environment,
             service, metadata, input_preview(input_value), received_at)
    return row, trace


_SPAN_RESOURCE = SPAN_COLUMNS.index("resource_id")
_TRACE_RESOURCE = TRACE_COLUMNS.index("resource_id")
_LOG_NAMESPACE = uuid.UUID("0f4b7d52-5d1e-4b1c-9a51-2f6f3f1f0b6e")


def _owned(row: tuple, index: int, resource: str | None) -> tuple:
    return row if resource is None else (*row[:index], resource, *row[index + 1:])


def spans_from_request(req: ExportTraceServiceRequest, received_at: datetime,
                       resource: str | None = None) -> tuple[list[tuple], list[tuple]]:
    """Span rows (``SPAN_COLUMNS``) and one trace row (``TRACE_COLUMNS``) per root span;
    ``resource`` (when given) replaces every row's resource."""
    spans, traces = [], []
    for resource_spans in req.resource_spans:
        service, env = _resource(resource_spans.resource)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                row, trace = _span_rows(_proto_facts(span), service, env, received_at)
                spans.append(_owned(row, _SPAN_RESOURCE, resource))
                if trace is not None:
                    traces.append(_owned(trace, _TRACE_RESOURCE, resource))
    return spans, traces


def spans_from_own(spans: Sequence[Any], received_at: datetime) -> tuple[list[tuple], list[tuple]]:
    """``spans_from_request`` for this process's own SDK spans (``ReadableSpan``), read
    directly (``own_span_facts``), as the OTLP mapping would store them."""
    rows, traces = [], []
    resources: dict[int, tuple[str | None, str | None]] = {}
    for span in spans:
        if id(span.resource) not in resources:
            resources[id(span.resource)] = _service_env(span.resource.attributes)
        row, trace = _span_rows(own_span_facts(span), *resources[id(span.resource)], received_at, own=True)
        rows.append(row)
        if trace is not None:
            traces.append(trace)
    return rows, traces


def log_id(record, resource_bytes: bytes, scope_bytes: bytes, position: int) -> str:
    """A stable id for a log record that carries none (see the module docstring)."""
    digest = hashlib.sha1(_LOG_NAMESPACE.bytes)
    for part in (resource_bytes, scope_bytes, record.SerializeToString(deterministic=True)):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    if not (record.time_unix_nano or record.observed_time_unix_nano):
        digest.update(position.to_bytes(8, "big"))
    return str(uuid.UUID(bytes=digest.digest()[:16], version=5))


def _log_row(attrs: dict[str, Any], severity_text: str, severity_number: int, nanos: int, body: Any,
             trace_id: str | None, span_id: str | None, service: str | None, env: str | None,
             received_at: datetime, resource: str | None, default_id: Callable[[], str]) -> tuple:
    """One log row (``LOG_COLUMNS``); ``default_id`` gives the record's id when it names none."""
    mastra = {name: _text(attrs.pop(f"mastra.{name}", None)) for name in (*_FIELDS, "environment")}
    given_ids = attrs.pop("log.record.uid", None), attrs.pop("mastra.log_id", None)
    level = _TEXT_LEVELS.get(severity_text.strip().lower(), "info")
    if 1 <= severity_number <= 24:
        level = ("debug", "debug", "info", "warn", "error", "fatal")[(severity_number - 1) // 4]
    moment = _moment(nanos, "timeUnixNano") if nanos else received_at
    message = body if isinstance(body, str) else ("" if body is None else _json(body))
    tags, metadata = attrs.pop("mastra.tags", None), attrs.pop("mastra.metadata", None)
    given = given_ids[0] or given_ids[1]
    key = str(given) if given else default_id()
    if resource is not None:
        mastra["resource_id"] = resource
    return (key, moment, level, message, _json(attrs or None), _tags(tags), trace_id, span_id,
            *(mastra[name] for name in _FIELDS), service, mastra["environment"] or env, _decoded(metadata)[1])


def logs_from_request(req: ExportLogsServiceRequest, received_at: datetime,
                      resource: str | None = None) -> list[tuple]:
    """Log rows in ``LOG_COLUMNS`` order; a record without any timestamp gets the receive time;
    ``resource`` (when given) replaces every row's resource."""
    rows = []
    position = 0
    for resource_logs in req.resource_logs:
        service, env = _resource(resource_logs.resource)
        resource_bytes = resource_logs.resource.SerializeToString(deterministic=True)
        for scope_logs in resource_logs.scope_logs:
            scope_bytes = scope_logs.scope.SerializeToString(deterministic=True)
            for record in scope_logs.log_records:
                position += 1
                rows.append(_log_row(
                    _attributes(record.attributes), record.severity_text, record.severity_number,
                    record.time_unix_nano or record.observed_time_unix_nano,
                    _any(record.body) if record.HasField("body") else None,
                    _hex_id(record.trace_id, 16, "traceId", required=False),
                    _hex_id(record.span_id, 8, "spanId", required=False), service, env, received_at, resource,
                    partial(log_id, record, resource_bytes, scope_bytes, position)))
    return rows


def logs_from_own(records: Sequence[Any], received_at: datetime) -> list[tuple]:
    """``logs_from_request`` for this process's own SDK log records (``ReadableLogRecord``),
    read as they are. A record's id is a digest of what it holds (its times, severity, body,
    attributes, ids and resource), so a batch written again keeps its ids, as an OTLP one does."""
    rows = []
    for record in records:
        log_record, resource_attrs = record.log_record, record.resource.attributes
        attrs = dict(log_record.attributes or {})
        severity = getattr(log_record.severity_number, "value", None) or 0
        nanos = log_record.timestamp or log_record.observed_timestamp or 0
        trace_id, span_id = log_record.trace_id or 0, log_record.span_id or 0
        rows.append(_log_row(
            attrs, log_record.severity_text or "", severity, nanos, log_record.body,
            f"{trace_id:032x}" if trace_id else None, f"{span_id:016x}" if span_id else None,
            *_service_env(resource_attrs), received_at, None,
            partial(_own_log_id, log_record, resource_attrs)))
    return rows


def _own_log_id(log_record: Any, resource_attrs: Any) -> str:
    facts = (log_record.timestamp, log_record.observed_timestamp, log_record.severity_text,
             getattr(log_record.severity_number, "value", None), log_record.trace_id, log_record.span_id,
             log_record.body, dict(log_record.attributes or {}), dict(resource_attrs))
    digest = hashlib.sha1(_LOG_NAMESPACE.bytes + json.dumps(facts, default=repr).encode())
    return str(uuid.UUID(bytes=digest.digest()[:16], version=5))
