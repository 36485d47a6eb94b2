"""Observability in tests: waiting for a studio's traces, reading its DuckDB rows, and
hand-made OTLP/JSON requests (one span, two log records) as an exporter would send them."""

from __future__ import annotations

import time
from typing import Any

from tests.kit.local_http import local_http

QUERY = "/api/observability/traces/query"
TRACE_HEX, SPAN_HEX = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"


def wait_for_traces(studio: Any, predicate, *, where=None, timeout: float = 45.0) -> list[dict]:
    """The studio's trace list (``POST .../traces/query``) once ``predicate`` holds for it."""
    deadline = time.monotonic() + timeout
    traces: list[dict] = []
    while time.monotonic() < deadline:
        body = {"page": {"limit": 100, "after": None}, **({"where": where} if where else {})}
        traces = local_http.post(f"{studio.url}{QUERY}", json=body, timeout=10).json()["traces"]
        if predicate(traces):
            return traces
        time.sleep(0.25)
    raise AssertionError(f"traces never matched; last: {traces}")


def observability_store(server: Any) -> Any:
    """The DuckDB store of an in-process studio (``tests.kit.servers.InProcessServer``)."""
    return server.app.state.services.storage.domain("observability")


def rows(server: Any, sql: str) -> list[tuple]:
    """``sql`` on an in-process studio's DuckDB."""
    return observability_store(server).run_blocking(lambda con: con.execute(sql).fetchall())


def json_request(**span: Any) -> dict:
    """An OTLP/JSON traces request of one span (hex ids, an error status, three attributes);
    ``span`` replaces its fields."""
    base = {"traceId": TRACE_HEX, "spanId": SPAN_HEX, "name": "js root", "kind": 2,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000500000000",
            "status": {"code": 2, "message": "boom"},
            "attributes": [{"key": "mastra.span_type", "value": {"stringValue": "agent_run"}},
                           {"key": "mastra.input", "value": {"stringValue": "\"hello there\""}},
                           {"key": "retries", "value": {"intValue": "3"}}]}
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "js"}}]},
                               "scopeSpans": [{"scope": {"name": "x"}, "spans": [base | span]}]}]}


def log_request() -> dict:
    """An OTLP/JSON logs request of two records of trace ``TRACE_HEX``, thread t1."""
    record = {"timeUnixNano": "1700000000000000001", "severityText": "INFO", "body": {"stringValue": "once"},
              "traceId": TRACE_HEX, "attributes": [{"key": "mastra.thread_id", "value": {"stringValue": "t1"}}]}
    return {"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "js"}}]},
                              "scopeLogs": [{"scope": {"name": "x"}, "logRecords": [record, record | {
                                  "timeUnixNano": "1700000000000000002"}]}]}]}
