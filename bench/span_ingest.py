"""Span ingest throughput and trace-list latency of the studio's observability store.

Ingest: the same OTLP protobuf batches of 512 spans (agent-run-shaped trees of 8 spans with
``mastra.*`` attributes and JSON input/output) go
  (a) over HTTP to ``POST /v1/traces`` of a studio in its own process, sent one after
      another on a keep-alive connection from this process (as a BatchSpanProcessor sends);
  (b) straight into a store through ``ObservabilityWriter`` (decode + map + write), and
      write-only with rows already mapped;
  (c) the same batches written a second time (every span already stored: a sender retrying
      batches whose acknowledgement was lost), which ingest turns into upserts.
Baseline, measured in the same run: DuckDB's raw appender inserting the same mapped rows
into the same schema (no decoding, no mapping, no transaction).
Queries: 1,000,000 spans (125,000 traces) filled by SQL; the Studio's trace-list first page
(``POST /api/observability/traces/query``) and the agent tab's filtered page
(``entityType = agent`` and ``spans.some entityId``), over HTTP, against the same SQL run
by a raw DuckDB connection in one process. Ratios are ours / baseline.
Run: .venv/bin/python bench/span_ingest.py [batches]   (default 100 batches = 51,200 spans)
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import Span  # noqa: E402

from dev_server.observability.otlp_mapping import spans_from_request  # noqa: E402
from dev_server.storage.duckdb_store import DuckDBStore  # noqa: E402
from dev_server.storage.migrate import apply_duckdb, load_migrations  # noqa: E402
from dev_server.storage.observability.columns import TRACE_COLUMNS  # noqa: E402
from dev_server.storage.observability.where import compile_where  # noqa: E402
from dev_server.storage.observability.writer import SPANS, ObservabilityWriter  # noqa: E402
from tests.support import free_port  # noqa: E402

BATCH, TREE, QUERY_SPANS = 512, 8, 1_000_000
TYPES = ("agent_run", "memory_operation", "model_generation", "model_step", "tool_call", "model_step", "generic",
         "memory_operation")
SERVER = """
import sys, uvicorn
from dev_server.api import otlp
from dev_server.factory import create_app
from dev_server.settings import Settings
options = {"telemetry": False} if "telemetry" in Settings.model_fields else {}
try:
    from dev_server.llm.base import ModelClientBase
except ImportError:  # a revision from before the model client's defaults
    ModelClientBase = object
class NoModel(ModelClientBase): pass  # no litellm warm-up competing for the CPU
app = create_app("studio", Settings(data_dir=sys.argv[1], **options), llm=NoModel())
if not any(getattr(r, "path", None) == "/v1/traces" for r in app.routes):
    app.include_router(otlp.router)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


def kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def make_batches(count: int) -> list[bytes]:
    now = time.time_ns()
    bodies, serial = [], 0
    for _ in range(count):
        request = ExportTraceServiceRequest()
        resource = request.resource_spans.add()
        resource.resource.attributes.append(kv("service.name", "dev-server-gateway"))
        spans = resource.scope_spans.add().spans
        for _ in range(BATCH // TREE):
            serial += 1
            trace_id = serial.to_bytes(16, "big")
            for j in range(TREE):
                attrs = [kv("mastra.span_type", TYPES[j]), kv("mastra.entity_type", "agent"),
                         kv("mastra.entity_id", f"agent-{serial % 20}"), kv("mastra.thread_id", f"t{serial % 500}"),
                         kv("mastra.resource_id", "ai-chat"), kv("mastra.run_id", f"run-{serial}"),
                         kv("mastra.attributes", json.dumps({"stepIndex": j, "usage": {"inputTokens": 12}})),
                         kv("mastra.input", json.dumps([{"role": "user", "content": f"question {serial} " * 8}])),
                         kv("mastra.output", json.dumps({"text": "answer " * 20})), kv("http.route", "/api/chat")]
                spans.append(Span(trace_id=trace_id, span_id=(serial * TREE + j + 1).to_bytes(8, "big"),
                                  parent_span_id=b"" if j == 0 else (serial * TREE + 1).to_bytes(8, "big"),
                                  name=f"{TYPES[j]} {j}", start_time_unix_nano=now + j * 1000,
                                  end_time_unix_nano=now + 10_000_000, attributes=attrs))
        bodies.append(request.SerializeToString())
    return bodies


def fresh_db(directory: Path, name: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(directory / name))
    apply_duckdb(con, load_migrations("duckdb"), datetime.now(UTC).isoformat())
    return con


def raw_appender(directory: Path, name: str, mapped: list[tuple[list, list]]) -> float:
    con = fresh_db(directory, name)
    keyed = [(SPANS.prepare(span_rows), trace_rows) for span_rows, trace_rows in mapped]  # keys made before the clock
    started = time.perf_counter()
    for span_rows, trace_rows in keyed:
        with con.appender("spans", columns=list(SPANS.written)) as appender:
            appender.append_rows(span_rows)
        with con.appender("traces", columns=list(TRACE_COLUMNS)) as appender:
            appender.append_rows(trace_rows)
    elapsed = time.perf_counter() - started
    con.close()
    return sum(len(s) for s, _ in mapped) / elapsed


async def through_writer(directory: Path, name: str, bodies: list[bytes], mapped: list | None,
                         passes: int = 1) -> float:
    """Rows/s of the last of ``passes`` writes of the batches (later passes are retries)."""
    store = DuckDBStore(f"file:{directory / name}")
    await store.open()
    writer = ObservabilityWriter(store)
    for _ in range(passes - 1):
        for span_rows, trace_rows in mapped:
            await writer.write_spans(span_rows, trace_rows)
    started = time.perf_counter()
    total = 0
    for i, body in enumerate(bodies):
        if mapped is None:
            request = ExportTraceServiceRequest.FromString(body)
            span_rows, trace_rows = spans_from_request(request, datetime.now(UTC))
        else:
            span_rows, trace_rows = mapped[i]
        total += len(span_rows)
        await writer.write_spans(span_rows, trace_rows)
    elapsed = time.perf_counter() - started
    await store.close()
    return total / elapsed


class Studio:
    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([sys.executable, "-c", SERVER, str(data_dir), str(self.port)], cwd=REPO,
                                        env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("studio did not start")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=30)


def over_http(directory: Path, bodies: list[bytes]) -> float:
    studio = Studio(directory / "http")
    try:
        with httpx.Client(base_url=studio.url, headers={"content-type": "application/x-protobuf"}) as client:
            client.post("/v1/traces", content=bodies[0]).raise_for_status()  # warm: first request, first append
            started = time.perf_counter()
            for body in bodies[1:]:
                client.post("/v1/traces", content=body).raise_for_status()
            elapsed = time.perf_counter() - started
    finally:
        studio.stop()
    return (len(bodies) - 1) * BATCH / elapsed


def fill_million(path: Path) -> None:
    con = fresh_db(path.parent, path.name)
    traces = QUERY_SPANS // TREE
    con.execute(f"""
        INSERT INTO spans (trace_id, span_id, parent_span_id, name, span_type, status, started_at, ended_at,
                           entity_type, entity_id, entity_name, run_id, thread_id, resource_id, service_name,
                           attributes, input, output, created_at, updated_at, span_key)
        SELECT printf('%032x', t), printf('%016x', t * 8 + j + 1),
               CASE WHEN j = 0 THEN NULL ELSE printf('%016x', t * 8 + 1) END,
               'span ' || j, ['agent_run','memory_operation','model_generation','model_step','tool_call','model_step',
               'generic','memory_operation'][j + 1], CASE WHEN t % 20 = 0 THEN 'error' ELSE 'success' END,
               TIMESTAMPTZ '2025-01-01 00:00:00+00' + to_milliseconds(t * 1000 + j),
               TIMESTAMPTZ '2025-01-01 00:00:00+00' + to_milliseconds(t * 1000 + 900),
               CASE WHEN j = 0 THEN 'agent' WHEN j = 4 THEN 'tool' ELSE 'agent' END,
               CASE WHEN j = 4 THEN 'weather' ELSE 'agent-' || (t % 20) END, 'Agent', 'run-' || t, 't' || (t % 500),
               'ai-chat', 'dev-server-gateway', '{{"stepIndex": 1}}', '[{{"role":"user","content":"hello"}}]',
               '{{"text":"hi"}}', now(), now(),
               md5_number(printf('%032x', t) || chr(31) || printf('%016x', t * 8 + j + 1))
        FROM range({traces}) r(t), range({TREE}) s(j)""")
    con.execute("""
        INSERT INTO traces SELECT trace_id, span_id, name, status, started_at, ended_at, entity_type, entity_id,
               entity_name, thread_id, resource_id, run_id, environment, service_name, metadata, 'hello', created_at
        FROM spans WHERE parent_span_id IS NULL""")
    con.close()


def p50(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


AGENT_TAB = {"op": "and", "args": [{"op": "eq", "left": {"path": "entityType"}, "right": {"literal": "agent"}},
                                   {"spans": {"some": {"op": "eq", "left": {"path": "entityId"},
                                                       "right": {"literal": "agent-7"}}}}]}


def queries(directory: Path, runs: int = 30) -> dict[str, tuple[float, float]]:
    path = directory / "query" / "observability.duckdb"
    path.parent.mkdir()
    fill_million(path)
    con = duckdb.connect(str(path))
    where_sql, values = compile_where(AGENT_TAB)
    sql = "SELECT * FROM traces t WHERE {} ORDER BY t.started_at DESC, t.trace_id DESC LIMIT 26"
    raw = {"first page": p50(lambda: con.execute(sql.format("TRUE")).fetchall(), runs),
           "agent tab (spans.some)": p50(lambda: con.execute(sql.format(where_sql), values).fetchall(), runs)}
    con.close()
    studio = Studio(path.parent)
    try:
        with httpx.Client(base_url=studio.url) as client:
            def post(body):
                response = client.post("/api/observability/traces/query", json=body)
                assert response.status_code == 200 and len(response.json()["traces"]) == 25, response.text
            ours = {"first page": p50(lambda: post({"page": {"limit": 25}}), runs),
                    "agent tab (spans.some)": p50(lambda: post({"page": {"limit": 25}, "where": AGENT_TAB}), runs)}
    finally:
        studio.stop()
    return {name: (ours[name], raw[name]) for name in raw}


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    began = time.perf_counter()
    bodies = make_batches(count)
    mapped = [spans_from_request(ExportTraceServiceRequest.FromString(b), datetime.now(UTC)) for b in bodies]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        first = raw_appender(directory, "raw1.duckdb", mapped)
        writer_only = asyncio.run(through_writer(directory, "writer2.duckdb", bodies, mapped))
        writer_full = asyncio.run(through_writer(directory, "writer.duckdb", bodies, None))
        retried = asyncio.run(through_writer(directory, "retried.duckdb", bodies, mapped, passes=2))
        baseline = max(first, raw_appender(directory, "raw2.duckdb", mapped))  # best of two: runs are noisy
        http = over_http(directory, bodies)
        print(f"span ingest, {count} batches x {BATCH} spans (rows/s; ratio = ours / raw appender baseline)")
        print(f"  baseline raw DuckDB appender     {baseline:>10,.0f}")
        for label, rate in (("writer, rows pre-mapped", writer_only), ("writer, decode + map + write", writer_full),
                            ("writer, same batches again", retried), ("HTTP /v1/traces (protobuf)", http)):
            print(f"  {label:<32} {rate:>10,.0f}   x{rate / baseline:.2f}")
        print(f"trace list at {QUERY_SPANS:,} spans ({QUERY_SPANS // TREE:,} traces), p50 ms; ratio = HTTP / raw query")
        for name, (ours, raw) in queries(directory).items():
            print(f"  {name:<24} ours {ours:7.2f}   raw {raw:7.2f}   x{ours / raw:.1f}")
    print(f"total bench time {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
