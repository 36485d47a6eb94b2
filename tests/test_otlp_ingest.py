"""The studio's OTLP/HTTP receivers, end to end: the real OpenTelemetry SDK and exporters
send to a real uvicorn serving the studio app, rows land in a real DuckDB file in a temp
dir, and the Studio's read routes return them. Bad payloads write nothing."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from dev_server.api import otlp
from dev_server.observability.otlp_mapping import (
    input_preview,
    logs_from_own,
    logs_from_request,
    spans_from_own,
    spans_from_request,
)
from dev_server.settings import Settings
from dev_server.storage.duckdb_store import DuckDBStore
from dev_server.storage.observability.columns import SPAN_COLUMNS, TRACE_COLUMNS
from dev_server.storage.observability.writer import ObservabilityWriter, RowsRejected, Written
from tests.kit.local_http import local_http
from tests.kit.servers import serve, server_fixture
from tests.kit.traces import SPAN_HEX, TRACE_HEX, json_request, log_request, rows

RESOURCE = Resource.create({"service.name": "dev-server-gateway", "deployment.environment": "test"})


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    # The studio's own telemetry would add its spans to these tables; these tests count rows.
    return Settings(data_dir=data_dir, telemetry=False)


studio = server_fixture("studio", scope="function", data="data_dir", inprocess=True, settings={"telemetry": False})


def counts(server) -> tuple[int, int, int]:
    return tuple(rows(server, f"SELECT count(*) FROM {t}")[0][0] for t in ("spans", "traces", "logs"))


def tracer_for(url: str, **exporter):
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces", **exporter)))
    return provider, provider.get_tracer("test")


def agent_run(tracer) -> str:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "first"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "text", "text": "weather?"}]}]
    with tracer.start_as_current_span("agent run: 'chat-agent'", attributes={
            "mastra.span_type": "agent_run", "mastra.entity_type": "agent", "mastra.entity_id": "chat-agent",
            "mastra.entity_name": "Chat Agent", "mastra.thread_id": "t1", "mastra.resource_id": "ai-chat",
            "mastra.run_id": "run-1", "mastra.user_id": "u1", "mastra.input": json.dumps(messages),
            "mastra.output": json.dumps({"text": "sunny"}), "mastra.metadata": json.dumps({"k": "v"}),
            "mastra.tags": json.dumps(["a", "b"]), "mastra.attributes": json.dumps({"conversationId": "t1"}),
            "http.method": "POST"}) as root:
        with (tracer.start_as_current_span("llm: 'gpt'", attributes={"mastra.span_type": "model_generation"}),
              pytest.raises(RuntimeError),
              tracer.start_as_current_span("tool: 'weather'", attributes={"mastra.span_type": "tool_call"})):
            raise RuntimeError("no network")
        with tracer.start_as_current_span("plain"):
            pass
        return format(root.get_span_context().trace_id, "032x")


def test_sdk_spans_become_a_tree_and_a_trace_row(studio):
    provider, tracer = tracer_for(studio.url)
    trace_id = agent_run(tracer)
    provider.shutdown()

    spans = {r[0]: r for r in rows(studio, "SELECT name, span_id, parent_span_id, span_type, status, error, attributes,"
                                           " service_name, environment, is_event, thread_id, user_id, tags, input,"
                                           " ended_at > started_at FROM spans")}
    assert set(spans) == {"agent run: 'chat-agent'", "llm: 'gpt'", "tool: 'weather'", "plain"}
    root, llm, tool, plain = (spans[n] for n in ("agent run: 'chat-agent'", "llm: 'gpt'", "tool: 'weather'", "plain"))
    assert root[2] is None and llm[2] == root[1] and tool[2] == llm[1] and plain[2] == root[1]
    assert len(root[1]) == 16 and root[1] == root[1].lower()
    assert (root[3], llm[3], tool[3], plain[3]) == ("agent_run", "model_generation", "tool_call", "generic")
    assert tool[4] == "error" and root[4] == "success" and root[5] is None
    assert json.loads(tool[5]) | {"stack": None} == {"message": "no network", "name": "RuntimeError", "stack": None}
    assert json.loads(root[6]) == {"http.method": "POST", "conversationId": "t1"}
    assert root[7:12] == ("dev-server-gateway", "test", False, "t1", "u1") and json.loads(root[12]) == ["a", "b"]
    assert json.loads(root[13])[-1]["role"] == "user" and all(s[14] for s in spans.values())

    (trace,) = rows(studio, "SELECT * FROM traces")
    trace = dict(zip(TRACE_COLUMNS, trace, strict=False))
    assert trace["trace_id"] == trace_id and len(trace_id) == 32 and trace["root_span_id"] == root[1]
    assert (trace["entity_id"], trace["run_id"], trace["service_name"]) == ("chat-agent", "run-1", "dev-server-gateway")
    assert trace["input_preview"] == "weather?" and json.loads(trace["metadata"]) == {"k": "v"}


def test_the_studios_own_spans_map_to_the_rows_their_otlp_message_maps_to():
    # The studio stores its own spans read from the SDK (spans_from_own), not through an OTLP
    # message; whatever the span holds (errors, events, links, arrays), the rows are the same.
    provider = TracerProvider(resource=RESOURCE)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    agent_run(tracer)
    with tracer.start_as_current_span("linked", links=[Link(provider.get_tracer("t").start_span("x").get_span_context(),
                                                             {"why": "retry", "n": 2})],
                                      attributes={"list": ["a", "b"], "flag": True, "ratio": 0.5,
                                                  "mastra.input": json.dumps("plain text")}) as span:
        span.set_status(Status(StatusCode.ERROR, "went wrong"))
    spans = memory.get_finished_spans()
    received = datetime.now(UTC)
    assert spans_from_own(spans, received) == spans_from_request(encode_spans(spans), received)
    own_rows, own_traces = spans_from_own(spans, received)
    assert len(own_rows) == len(spans) == 5 and len(own_traces) == 2


def test_studio_read_routes_return_ingested_traces(studio):
    provider, tracer = tracer_for(studio.url)
    trace_id = agent_run(tracer)
    provider.shutdown()
    with httpx.Client(base_url=studio.url) as client:
        listed = client.post("/api/observability/traces/query", json={"page": {"limit": 25}}).json()
        assert [(t["traceId"], t["inputPreview"], t["status"], t["entityId"]) for t in listed["traces"]] == [
            (trace_id, "weather?", "success", "chat-agent")]
        some = {"spans": {"some": {"op": "eq", "left": {"path": "spanType"}, "right": {"literal": "tool_call"}}}}
        assert len(client.post("/api/observability/traces/query", json={"where": some}).json()["traces"]) == 1
        none = {"spans": {"some": {"op": "eq", "left": {"path": "entityId"}, "right": {"literal": "nobody"}}}}
        assert client.post("/api/observability/traces/query", json={"where": none}).json()["traces"] == []
        detail = client.get(f"/api/observability/traces/{trace_id}").json()
    by_name = {s["name"]: s for s in detail["spans"]}
    assert by_name["agent run: 'chat-agent'"]["parentSpanId"] is None
    assert by_name["agent run: 'chat-agent'"]["output"] == {"text": "sunny"}
    assert by_name["tool: 'weather'"]["parentSpanId"] == by_name["llm: 'gpt'"]["spanId"]
    assert by_name["tool: 'weather'"]["error"]["message"] == "no network"


def test_gzip_from_the_sdk_exporter(studio):
    provider, tracer = tracer_for(studio.url, compression=Compression.Gzip)
    agent_run(tracer)
    provider.shutdown()
    assert counts(studio)[:2] == (4, 1)


@pytest.mark.parametrize("compress", [False, True])
def test_otlp_json_with_hex_ids(studio, compress: bool):
    body = json.dumps(json_request()).encode()
    headers = {"content-type": "application/json"} | ({"content-encoding": "gzip"} if compress else {})
    response = local_http.post(f"{studio.url}/v1/traces",
                               content=gzip.compress(body) if compress else body, headers=headers)
    assert response.status_code == 200 and response.json() == {}
    assert response.headers["content-type"].startswith("application/json")
    (span,) = rows(studio, "SELECT trace_id, span_id, status, error, attributes, started_at, service_name FROM spans")
    assert span[:2] == (TRACE_HEX, SPAN_HEX) and span[2] == "error" and json.loads(span[3]) == {"message": "boom"}
    assert json.loads(span[4]) == {"retries": 3} and span[6] == "js"
    assert span[5] == datetime.fromtimestamp(1_700_000_000, UTC)
    assert rows(studio, "SELECT input_preview FROM traces") == [("hello there",)]


def test_otlp_json_links_and_logs_take_hex_ids(studio):
    link = {"traceId": "ab" * 16, "spanId": "cd" * 8, "attributes": [{"key": "k", "value": {"boolValue": True}}]}
    assert local_http.post(f"{studio.url}/v1/traces", json=json_request(links=[link])).status_code == 200
    assert json.loads(rows(studio, "SELECT links FROM spans")[0][0]) == [
        {"traceId": "ab" * 16, "spanId": "cd" * 8, "attributes": {"k": True}}]
    record = {"observedTimeUnixNano": "1700000000000000000", "severityText": "WARNING", "traceId": TRACE_HEX,
              "spanId": "", "body": {"stringValue": "careful"},
              "attributes": [{"key": "log.record.uid", "value": {"stringValue": "log-1"}}]}
    body = {"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}
    assert local_http.post(f"{studio.url}/v1/logs", json=body).json() == {}
    assert rows(studio, "SELECT log_id, level, message, trace_id, span_id, timestamp, data FROM logs") == [
        ("log-1", "warn", "careful", TRACE_HEX, None, datetime.fromtimestamp(1_700_000_000, UTC), None)]


def test_protobuf_reply_is_an_empty_export_response(studio):
    request = ExportTraceServiceRequest()
    response = local_http.post(f"{studio.url}/v1/traces", content=request.SerializeToString(),
                          headers={"content-type": "application/x-protobuf"})
    assert response.status_code == 200 and response.content == b""
    assert response.headers["content-type"] == "application/x-protobuf"


def test_logs_from_the_sdk_exporter(studio):
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{studio.url}/v1/logs")))
    logger = provider.get_logger("test")
    tracer = TracerProvider(resource=RESOURCE).get_tracer("t")
    with tracer.start_as_current_span("s") as span:
        logger.emit(severity_number=SeverityNumber(17), severity_text="ERROR", body="tool failed",
                    attributes={"mastra.thread_id": "t1", "mastra.run_id": "r1", "mastra.entity_name": "Chat",
                                "mastra.tags": json.dumps(["x"]), "code.lineno": 12})
        ids = format(span.get_span_context().trace_id, "032x"), format(span.get_span_context().span_id, "016x")
    logger.emit(severity_number=SeverityNumber(10), body={"event": "started", "n": 1})
    provider.shutdown()
    got = rows(studio, "SELECT level, message, trace_id, span_id, thread_id, run_id, entity_name, tags, data,"
                       " service_name, environment, length(log_id) FROM logs ORDER BY level")
    assert got[0][:7] == ("error", "tool failed", *ids, "t1", "r1", "Chat")
    assert json.loads(got[0][7]) == ["x"] and json.loads(got[0][8]) == {"code.lineno": 12}
    assert got[0][9:] == ("dev-server-gateway", "test", 36)
    assert got[1][:4] == ("info", '{"event":"started","n":1}', None, None)


def test_the_studios_own_log_records_map_to_the_rows_their_otlp_message_maps_to():
    provider = LoggerProvider(resource=RESOURCE)
    memory = InMemoryLogRecordExporter()
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger("test")
    with TracerProvider(resource=RESOURCE).get_tracer("t").start_as_current_span("s"):
        logger.emit(severity_number=SeverityNumber(17), severity_text="ERROR", body="tool failed",
                    attributes={"mastra.thread_id": "t1", "mastra.tags": json.dumps(["x"]), "code.lineno": 12})
    logger.emit(severity_number=SeverityNumber(10), body={"event": "started", "n": 1})
    logger.emit(severity_number=SeverityNumber(10), body={"event": "started", "n": 1})  # the same, a moment later
    logger.emit(body="named", attributes={"log.record.uid": "given-id"})
    records = memory.get_finished_logs()
    received = datetime.now(UTC)
    own, sent = logs_from_own(records, received), logs_from_request(encode_logs(records), received)
    assert [row[1:] for row in own] == [row[1:] for row in sent]  # all but the id, which is derived apart
    ids = [row[0] for row in own]
    assert len(set(ids)) == 4 and ids[3] == "given-id"
    assert [row[0] for row in logs_from_own(records, received)] == ids  # written again: the same ids


def short_trace_id() -> bytes:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.append(
        ProtoSpan(trace_id=b"\x01" * 4, span_id=b"\x02" * 8, name="x", start_time_unix_nano=1))
    return request.SerializeToString()


@pytest.mark.parametrize("body,headers,field", [
    (b"\x0a\xff\xff\xff", {"content-type": "application/x-protobuf"}, None),
    (short_trace_id(), {}, "traceId"),
    (b'{"resourceSpans": [', {"content-type": "application/json"}, None),
    (b'[1, 2]', {"content-type": "application/json"}, None),
    (json.dumps({"resourceSpans": "nope"}).encode(), {"content-type": "application/json"}, None),
    (json.dumps(json_request(name=7, startTimeUnixNano={"x": 1})).encode(), {"content-type": "application/json"}, None),
    (json.dumps(json_request(traceId="zz" * 16)).encode(), {"content-type": "application/json"}, "traceId"),
    (gzip.compress(json.dumps(json_request()).encode())[:-12],
     {"content-type": "application/json", "content-encoding": "gzip"}, None),
    (b"not gzip at all", {"content-encoding": "gzip"}, None),
])
def test_bad_payloads_are_400_and_write_nothing(studio, body: bytes, headers: dict, field: str | None):
    # a good request first, so "nothing written" is measured against real rows
    local_http.post(f"{studio.url}/v1/traces", json=json_request(spanId="0000000000000001"))
    before = counts(studio)
    response = local_http.post(f"{studio.url}/v1/traces", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"]
    if field:
        assert response.json()["issues"][0]["field"] == field
    assert counts(studio) == before == (1, 1, 0)


@pytest.mark.parametrize("body,kind", [(b"\xff\xff", "application/x-protobuf"),
                                       (b'{"resourceLogs": 1}', "application/json"),
                                       (b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"spanId": "x"}]}]}]}',
                                        "application/json")])
def test_bad_log_payloads_are_400(studio, body: bytes, kind: str):
    response = local_http.post(f"{studio.url}/v1/logs", content=body, headers={"content-type": kind})
    assert response.status_code == 400 and counts(studio) == (0, 0, 0)


@pytest.mark.parametrize("headers", [{"content-type": "text/plain"}, {"content-encoding": "br"}])
def test_unsupported_media_is_415(studio, headers: dict):
    response = local_http.post(f"{studio.url}/v1/traces", content=b"{}", headers=headers)
    assert response.status_code == 415 and "unsupported" in response.json()["error"]


def test_unavailable_store_is_503_with_the_cause(settings: Settings, data_dir: Path):
    data_dir.mkdir(parents=True)
    (data_dir / "observability.duckdb").write_bytes(b"this is not a duckdb file" * 100)
    with serve("studio", data_dir, inprocess=True, settings=settings) as server:
        response = local_http.post(f"{server.url}/v1/traces", json=json_request())
        logs = local_http.post(f"{server.url}/v1/logs", content=b"", headers={"content-type": "application/x-protobuf"})
    assert response.status_code == 503 and logs.status_code == 503
    assert "observability" in response.json()["error"] and response.headers["retry-after"]


def sample_rows(n: int = 3, trace: bytes = b"\x0a") -> tuple[list[tuple], list[tuple]]:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for i in range(n):
        spans.append(ProtoSpan(trace_id=trace * 16, span_id=bytes([0] * 7 + [i + 1]), name=f"s{i}",
                               parent_span_id=b"" if i == 0 else bytes([0] * 7 + [1]),
                               start_time_unix_nano=1_700_000_000_000_000_000 + i))
    return spans_from_request(request, datetime.now(UTC))


@pytest.mark.anyio
async def test_a_failed_append_rolls_back_the_whole_request(tmp_path: Path):
    store = DuckDBStore(f"file:{tmp_path / 'obs.duckdb'}")
    await store.open()
    writer = ObservabilityWriter(store)
    span_rows, trace_rows = sample_rows()
    broken_trace = list(trace_rows[0])
    broken_trace[TRACE_COLUMNS.index("name")] = None  # NOT NULL: fails in the second appender
    with pytest.raises(RowsRejected, match="NOT NULL"):
        await writer.write_spans(span_rows, [tuple(broken_trace)])
    broken_span = list(span_rows[-1])
    broken_span[SPAN_COLUMNS.index("attributes")] = "{not json"
    with pytest.raises(RowsRejected):
        # fails after good rows in the same appender
        writer.write_spans_blocking([*span_rows[:-1], tuple(broken_span)], trace_rows)
    assert await store.fetch_all("SELECT (SELECT count(*) FROM spans) s, (SELECT count(*) FROM traces) t") == [
        {"s": 0, "t": 0}]
    assert await writer.write_spans(span_rows, trace_rows) == Written(3, 0)  # the connection is usable again
    await store.close()


@pytest.mark.anyio
async def test_retention_deletes_old_rows(tmp_path: Path):
    store = DuckDBStore(f"file:{tmp_path / 'obs.duckdb'}")
    await store.open()
    writer = ObservabilityWriter(store)
    await writer.write_spans(*sample_rows())  # started in 2023
    fresh = [tuple(datetime.now(UTC) if c == "started_at" else v for c, v in zip(SPAN_COLUMNS, row, strict=True))
             for row in sample_rows(1, trace=b"\x0b")[0]]
    await writer.write_spans(fresh)
    assert await writer.delete_older_than(30) == 4
    assert await store.fetch_all("SELECT count(*) AS n FROM spans") == [{"n": 1}]
    await store.close()


def test_input_preview_shapes():
    assert input_preview("hi") == "hi"
    assert input_preview({"messages": [{"role": "user", "parts": [{"type": "text", "text": "a"}]},
                                       {"role": "assistant", "content": "b"}]}) == "a"
    assert input_preview([{"role": "user", "content": {"format": 2, "parts": [{"type": "text", "text": "c"}]}}]) == "c"
    assert input_preview({"x": "y" * 500}) == json.dumps({"x": "y" * 500}, separators=(",", ":"))[:200]
    assert len(input_preview("z" * 1000)) == 200 and input_preview(None) is None


def test_ended_at_is_null_for_an_unfinished_span_and_timestamps_are_microseconds():
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.append(
        ProtoSpan(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="x", start_time_unix_nano=1_700_000_000_123_456_789))
    (row,), _ = spans_from_request(request, datetime.now(UTC))
    started = row[SPAN_COLUMNS.index("started_at")]
    assert started - datetime.fromtimestamp(1_700_000_000, UTC) == timedelta(microseconds=123_456)
    assert row[SPAN_COLUMNS.index("ended_at")] is None


# ---------------------------------------------------------------- idempotent ingest (issue 9.8)

def proto_batch(**span) -> bytes:
    """The same span as ``json_request`` (with ``span`` applied), as OTLP protobuf."""
    return otlp.decode_traces(json.dumps(json_request(**span)).encode(), "application/json").SerializeToString()


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_a_batch_sent_twice_is_stored_once(studio, encoding: str):
    child = json_request(spanId="0000000000000002", parentSpanId=SPAN_HEX, name="child")
    body = json_request()
    body["resourceSpans"][0]["scopeSpans"][0]["spans"] += child["resourceSpans"][0]["scopeSpans"][0]["spans"]
    if encoding == "json":
        content, headers = json.dumps(body).encode(), {"content-type": "application/json"}
    else:
        content = otlp.decode_traces(json.dumps(body).encode(), "application/json").SerializeToString()
        headers = {"content-type": "application/x-protobuf"}
    for _ in range(2):  # a retry after a lost acknowledgement
        response = local_http.post(f"{studio.url}/v1/traces", content=content, headers=headers)
        assert response.status_code == 200
        assert response.content in (b"", b"{}")  # the retry is no partial success: nothing was rejected
    assert counts(studio)[:2] == (2, 1)
    assert rows(studio, "SELECT count(DISTINCT (trace_id, span_id)) FROM spans") == [(2,)]


def test_the_same_span_in_either_encoding_is_one_row_and_the_latest_wins(studio):
    assert local_http.post(f"{studio.url}/v1/traces", content=proto_batch(name="first"),
                      headers={"content-type": "application/x-protobuf"}).status_code == 200
    first_created = rows(studio, "SELECT created_at FROM spans")[0][0]
    assert local_http.post(f"{studio.url}/v1/traces", json=json_request(name="second")).status_code == 200
    assert rows(studio, "SELECT name, created_at FROM spans") == [("second", first_created)]
    assert rows(studio, "SELECT name FROM traces") == [("second",)]


def test_a_log_batch_sent_twice_in_either_encoding_is_stored_once(studio):
    body = json.dumps(log_request()).encode()
    proto = otlp.decode_logs(body, "application/json").SerializeToString()
    for content, kind in ((body, "application/json"), (proto, "application/x-protobuf"), (body, "application/json")):
        assert local_http.post(f"{studio.url}/v1/logs", content=content,
                               headers={"content-type": kind}).status_code == 200
    ids = rows(studio, "SELECT log_id FROM logs ORDER BY timestamp")
    assert len(ids) == 2 and len({i for (i,) in ids}) == 2 and all(len(i) == 36 for (i,) in ids)


@pytest.mark.anyio
async def test_migrations_fold_rows_stored_twice_and_key_the_tables(tmp_path: Path):
    """0002 keys each table (rows stored twice folded), 0003 keeps a span's key as the digest
    ``span_key``: the same spans written again after both replace the migrated rows (the
    migration's md5_number and the writer's digest agree), no copies."""
    import duckdb

    from dev_server.storage.migrate import apply_duckdb, load_migrations

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    apply_duckdb(con, load_migrations("duckdb")[:1], "2025-01-01T00:00:00Z")  # the schema before 0002
    span_rows, trace_rows = sample_rows(2)
    older = [tuple(v - timedelta(hours=1) if c == "updated_at" else ("old" if c == "name" else v)
                   for c, v in zip(SPAN_COLUMNS, row, strict=True)) for row in span_rows]
    for table, columns, batch in (("spans", SPAN_COLUMNS, [*older, *span_rows]),
                                  ("traces", TRACE_COLUMNS, [*trace_rows, *trace_rows])):
        with con.appender(table, columns=list(columns)) as appender:
            appender.append_rows(batch)
    con.close()
    store = DuckDBStore(f"file:{path}")
    await store.open()
    assert await store.fetch_all("SELECT name FROM spans ORDER BY span_id") == [{"name": "s0"}, {"name": "s1"}]
    assert await store.fetch_all("SELECT count(*) AS n FROM traces") == [{"n": 1}]
    keys = await store.fetch_all("SELECT table_name, constraint_column_names AS cols FROM duckdb_constraints() "
                                 "WHERE constraint_type = 'PRIMARY KEY' AND table_name <> '_migrations' "
                                 "ORDER BY table_name")
    assert [(k["table_name"], k["cols"]) for k in keys] == [
        ("logs", ["log_id"]), ("spans", ["span_key"]), ("traces", ["trace_id"])]
    assert await ObservabilityWriter(store).write_spans(span_rows, trace_rows) == Written(2, 0)
    assert await store.fetch_all("SELECT name FROM spans ORDER BY span_id") == [{"name": "s0"}, {"name": "s1"}]
    assert await store.fetch_all("SELECT count(*) AS n FROM spans") == [{"n": 2}]
    await store.close()


def test_otlp_json_nested_deeper_than_the_limit_is_400(studio):
    value: dict = {"stringValue": "leaf"}
    for _ in range(otlp.MAX_JSON_DEPTH):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    body = json.dumps(json_request(attributes=[{"key": "deep", "value": value}])).encode()
    # plain: the app's input guard refuses it before the route; gzip passes the guard
    # untouched, so the receiver's own limit applies after inflating
    for content, headers in ((body, {}), (gzip.compress(body), {"content-encoding": "gzip"})):
        response = local_http.post(f"{studio.url}/v1/traces", content=content,
                              headers={"content-type": "application/json", **headers})
        assert response.status_code == 400 and "deeper" in response.json()["issues"][0]["message"]
    deepest = b'{"resourceSpans":' + b"[" * 50_000 + b"]" * 50_000 + b"}"  # past Python's own recursion limit
    response = local_http.post(f"{studio.url}/v1/traces",
                               content=gzip.compress(deepest),
                          headers={"content-type": "application/json", "content-encoding": "gzip"})
    assert response.status_code == 400 and response.json()["issues"][0]["field"] == "body"
    assert counts(studio) == (0, 0, 0)


def test_a_lone_surrogate_in_otlp_json_is_repaired_or_refused(studio):
    body = json.dumps(json_request(name="bad \ud800 name")).encode()  # json.dumps writes it as \\ud800
    # plain: the input guard repairs it to U+FFFD; gzip reaches the decoder, which refuses it
    response = local_http.post(f"{studio.url}/v1/traces",
                               content=gzip.compress(body),
                          headers={"content-type": "application/json", "content-encoding": "gzip"})
    assert response.status_code == 400 and counts(studio) == (0, 0, 0)
    response = local_http.post(f"{studio.url}/v1/traces", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200 and rows(studio, "SELECT name FROM spans") == [("bad \ufffd name",)]
