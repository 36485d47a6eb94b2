"""The studio's OTLP/HTTP receivers: ``POST /v1/traces`` and ``POST /v1/logs``.

Only the studio may open the DuckDB file (docs/architecture.md#decisions), so the gateway's
OpenTelemetry exporters send here, and so may any OTLP/HTTP sender. A body is
``application/x-protobuf`` (the default) or OTLP/JSON, plain or gzip. Replies follow the
OTLP spec's HTTP rules where a sender acts on them: 200 with an Export*Response in the
request's encoding (``partial_success`` counts spans left out, see below); 400 (a payload
that cannot be decoded; not retried, nothing written); 415 (content type or encoding); 503
with ``Retry-After`` while the observability store is unavailable (the exporters retry 503).
Error bodies are this server's JSON ``{"error", "issues"?}``.

Ownership: with authentication on, rows from a user are filed under that user's resource
(``user:<principal>``) whatever ``mastra.resource_id`` they claim; the gateway's exporter
authenticates as ``SERVICE_PRINCIPAL`` and its rows keep the resource of the run they
describe. Ingest is idempotent (``ObservabilityWriter``): a retried batch is stored once, and
a span whose id another resource already holds is left out and reported as rejected.
Decoding and mapping run off the event loop; the write is one transaction.
"""

from __future__ import annotations

import base64
import re
import zlib
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.concurrency import run_in_threadpool

from dev_server.api.deps import Principal
from dev_server.api.studio.observability import ObservabilityStoreDep
from dev_server.auth import SERVICE_PRINCIPAL, resource_for
from dev_server.json_finite import NonFiniteNumber, loads_finite
from dev_server.observability.otlp_mapping import OtlpDecodeError, logs_from_request, spans_from_request
from dev_server.storage.errors import StorageError
from dev_server.storage.observability.writer import ObservabilityWriter, RowsRejected

router = APIRouter()

PROTOBUF, JSON = "application/x-protobuf", "application/json"
MAX_DECOMPRESSED = 64 * 1024 * 1024  # a gzip bomb stops here, whatever the body limit let through
# OTLP/JSON needs a handful of levels plus nested kvlist/array values; protobuf's own parser
# stops binary bodies at 100, so a JSON body gets no more room than that.
MAX_JSON_DEPTH = 100
_ID_KEYS = {"traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id"}
_HEX = re.compile(r"[0-9a-fA-F]*")


class OtlpUnsupported(OtlpDecodeError):
    """A content type or encoding this receiver does not speak (415)."""


async def owner(principal: Principal) -> str | None:
    """The resource every received row is filed under: the caller's own with auth on; None
    (rows keep the resource they name) with auth off and for the gateway's exporter."""
    if principal is None or principal == SERVICE_PRINCIPAL:
        return None
    return resource_for(principal)


Owner = Annotated[str | None, Depends(owner)]


@router.post("/v1/traces")
async def receive_traces(request: Request, store: ObservabilityStoreDep, resource: Owner) -> Response:
    return await _receive(request, ObservabilityWriter(store), "traces", resource)


@router.post("/v1/logs")
async def receive_logs(request: Request, store: ObservabilityStoreDep, resource: Owner) -> Response:
    return await _receive(request, ObservabilityWriter(store), "logs", resource)


async def _receive(request: Request, writer: ObservabilityWriter, signal: str, resource: str | None) -> Response:
    content_type, encoding = request.headers.get("content-type"), request.headers.get("content-encoding")
    try:
        kind = media_type(content_type)
    except OtlpUnsupported as exc:
        return _error(415, str(exc))
    body = await request.body()
    received_at = datetime.now(UTC)
    try:
        rows = await run_in_threadpool(_rows, signal, body, content_type, encoding, received_at, resource)
    except OtlpUnsupported as exc:
        return _error(415, str(exc))
    except OtlpDecodeError as exc:
        return _error(400, str(exc), exc.issues)
    try:
        if signal == "traces":
            written = await writer.write_spans(*rows)
        else:
            written = await writer.write_logs(rows)
    except RowsRejected as exc:
        return _error(400, str(exc))
    except StorageError as exc:
        return _error(503, str(exc), retry=True)
    if signal == "traces":
        reply: Any = ExportTraceServiceResponse()
        if written.rejected:
            reply.partial_success.CopyFrom(ExportTracePartialSuccess(
                rejected_spans=written.rejected, error_message="span ids already held by another resource"))
    else:
        reply = ExportLogsServiceResponse()  # a log already stored is a retry, not a rejection
    if kind == JSON:
        return Response(json_format.MessageToJson(reply, indent=None) or "{}", media_type=JSON)
    return Response(reply.SerializeToString(), media_type=PROTOBUF)


def _rows(signal: str, body: bytes, content_type: str | None, encoding: str | None, received_at: datetime,
          resource: str | None) -> Any:
    if signal == "traces":
        return spans_from_request(decode_traces(body, content_type, encoding), received_at, resource)
    return logs_from_request(decode_logs(body, content_type, encoding), received_at, resource)


def _error(status: int, message: str, issues: list[dict[str, str]] | None = None, *,
           retry: bool = False) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if issues:
        body["issues"] = issues
    return JSONResponse(body, status_code=status, headers={"Retry-After": "5"} if retry else None)


def media_type(content_type: str | None) -> str:
    kind = (content_type or PROTOBUF).split(";", 1)[0].strip().lower()
    if kind not in (PROTOBUF, JSON):
        raise OtlpUnsupported(f"unsupported content type {kind!r}; send {PROTOBUF} or {JSON}")
    return kind


def decode_traces(body: bytes, content_type: str | None, content_encoding: str | None = None):
    return decode(ExportTraceServiceRequest(), body, content_type, content_encoding)


def decode_logs(body: bytes, content_type: str | None, content_encoding: str | None = None):
    return decode(ExportLogsServiceRequest(), body, content_type, content_encoding)


def decode(message, body: bytes, content_type: str | None, content_encoding: str | None):
    """Fill ``message`` from an OTLP/HTTP body: protobuf or OTLP/JSON, plain or gzip."""
    kind = media_type(content_type)
    body = _inflate(body, content_encoding)
    if kind == PROTOBUF:
        try:
            message.ParseFromString(body)
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise OtlpDecodeError(f"malformed OTLP protobuf: {exc or 'cannot parse'}") from None
        return message
    try:
        document = loads_finite(body)
    except RecursionError:
        raise _too_deep() from None
    except NonFiniteNumber as exc:  # NaN is not JSON (OTLP/JSON quotes it: "NaN")
        raise OtlpDecodeError(f"invalid OTLP/JSON: {exc.field()} {exc.message}",
                              [{"field": exc.field(), "message": exc.message}]) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise OtlpDecodeError(f"malformed JSON: {exc}") from None
    if not isinstance(document, dict):
        raise OtlpDecodeError("an OTLP/JSON body must be a JSON object")
    _check_depth(document)
    try:
        # OTLP/JSON writes ids as hex, protobuf's JSON mapping reads bytes as base64.
        json_format.ParseDict(_ids_to_base64(document), message, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError) as exc:
        raise OtlpDecodeError(f"invalid OTLP/JSON: {exc}") from None
    return message


def _too_deep() -> OtlpDecodeError:
    return OtlpDecodeError(f"OTLP/JSON nested deeper than {MAX_JSON_DEPTH} levels",
                           [{"field": "body", "message": f"nested deeper than {MAX_JSON_DEPTH} levels"}])


def _check_depth(document: Any) -> None:
    """Refuse nesting past ``MAX_JSON_DEPTH`` before anything walks the document recursively."""
    level, depth = [document], 1
    while level:
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        level = [child for node in level for child in (node.values() if isinstance(node, dict) else node)
                 if isinstance(child, (dict, list))]
        depth += 1


def _inflate(body: bytes, encoding: str | None) -> bytes:
    encoding = (encoding or "identity").strip().lower()
    if encoding == "identity":
        return body
    if encoding not in ("gzip", "x-gzip"):
        raise OtlpUnsupported(f"unsupported content encoding {encoding!r}; send gzip or none")
    inflater = zlib.decompressobj(wbits=31)
    try:
        data = inflater.decompress(body, MAX_DECOMPRESSED)
    except zlib.error as exc:
        raise OtlpDecodeError(f"malformed gzip body: {exc}") from None
    if inflater.unconsumed_tail:
        raise OtlpDecodeError(f"gzip body inflates past {MAX_DECOMPRESSED} bytes")
    if not inflater.eof:
        raise OtlpDecodeError("malformed gzip body: truncated")
    return data


def _ids_to_base64(node: Any, key: str = "") -> Any:
    if isinstance(node, list):
        return [_ids_to_base64(item) for item in node]
    if isinstance(node, dict):
        return {k: _ids_to_base64(v, k) for k, v in node.items()}
    if key in _ID_KEYS and isinstance(node, str):
        if not (_HEX.fullmatch(node) and len(node) % 2 == 0):
            raise OtlpDecodeError(f"invalid OTLP/JSON: {key} must be a hex string",
                                  [{"field": key, "message": "not hex"}])
        return base64.b64encode(bytes.fromhex(node)).decode()
    return node
