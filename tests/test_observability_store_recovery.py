"""The studio's observability store outlives a FATAL error of DuckDB (``DuckDBStore._job``).

Under the memory limit the store keeps, a checkpoint of spans with large inputs (2,048 rows
of a column pinned at once) once failed to allocate, and DuckDB refused every statement from
then on: each OTLP export answered 503, then 500, until the studio was restarted. A real file
in a temporary directory, spans mapped from real OTLP messages.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from dev_server.observability.otlp_mapping import spans_from_request
from dev_server.storage.duckdb_store import CACHE_MB, DuckDBStore
from dev_server.storage.observability.writer import ObservabilityWriter

SPANS_A_BATCH = 64
# a model generation's input on a long thread with Observational Memory: the whole window
BIG_INPUT = json.dumps({"messages": [{"role": "user", "content": "word " * 6_000}]})


def batch(index: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for i in range(SPANS_A_BATCH):
        spans.append(ProtoSpan(
            trace_id=(index * SPANS_A_BATCH + i + 1).to_bytes(16, "big"), span_id=(i + 1).to_bytes(8, "big"),
            name="llm: 'gpt-4o-mini'", start_time_unix_nano=1_700_000_000_000_000_000 + i,
            end_time_unix_nano=1_700_000_000_000_000_000 + i + 1_000,
            attributes=[KeyValue(key="mastra.span_type", value=AnyValue(string_value="model_generation")),
                        KeyValue(key="mastra.input", value=AnyValue(string_value=BIG_INPUT))]))
    return request


@pytest.mark.anyio
async def test_a_fatal_checkpoint_opens_the_database_again_with_more_room_and_loses_no_span(tmp_path: Path):
    store = DuckDBStore(f"file:{tmp_path / 'observability.duckdb'}")
    await store.open()
    writer = ObservabilityWriter(store)
    first_limit = store.memory_limit_mb
    batches = 0
    while store.reopened == 0:  # the first checkpoint past the room fails after a few MB of such inputs
        assert batches < 400, "no checkpoint failed: the store's room grew past what this test writes"
        await writer.write_spans(*spans_from_request(batch(batches), datetime.now(UTC)))
        batches += 1
    for _ in range(3):  # and writes go on
        await writer.write_spans(*spans_from_request(batch(batches), datetime.now(UTC)))
        batches += 1
    # every span of every batch, the one whose commit failed included, stored once
    assert await store.fetch_all("SELECT count(*) AS n, count(DISTINCT span_key) AS keys FROM spans") == [
        {"n": batches * SPANS_A_BATCH, "keys": batches * SPANS_A_BATCH}]
    health = store.health()
    assert health["reopened"] == 1 and health["open"]
    assert first_limit is not None and health["memoryLimitMb"] >= first_limit + CACHE_MB
    await store.close()
    # and the file opens as any other
    again = DuckDBStore(f"file:{tmp_path / 'observability.duckdb'}")
    await again.open()
    assert await again.fetch_all("SELECT count(*) AS n FROM spans") == [{"n": batches * SPANS_A_BATCH}]
    await again.close()
