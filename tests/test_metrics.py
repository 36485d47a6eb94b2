"""Metrics routes end to end: spans arrive through the real OpenTelemetry SDK exporter (fixed
times, known usage) or from real agent turns, land in a real DuckDB file, and every metric
answer is checked against values computed here with our own SQL over the span rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from tests.kit.local_http import local_http
from tests.kit.servers import serve
from tests.kit.traces import observability_store, rows
from tests.support import wait_until

T0 = datetime(2025, 1, 1, 10, 0, tzinfo=UTC)
API = "/api/observability"
# (start offset, agent ms, thread, resource, agent name, status, model, provider, input, output)
RUNS = [(timedelta(0), 1000, "t1", "r1", "Chat Agent", "ok", "gpt-4o-mini", "openai", 10, 5),
        (timedelta(minutes=30), 3000, "t2", "r1", "Chat Agent", "error", "claude", "anthropic", 20, 7),
        (timedelta(hours=2), 2000, "t3", "r2", "Other Agent", "ok", "gpt-4o-mini", "openai", 30, 9)]


def ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1e9)


def seed(url: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "svc", "deployment.environment": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    tracer = provider.get_tracer("test")
    for offset, ms, thread, resource, name, status, model, prov, tokens_in, tokens_out in RUNS:
        start = T0 + offset
        common = {"mastra.entity_type": "agent", "mastra.entity_id": name.lower().replace(" ", "-"),
                  "mastra.entity_name": name, "mastra.thread_id": thread, "mastra.resource_id": resource}
        root = tracer.start_span("agent run", start_time=ns(start),
                                 attributes={**common, "mastra.span_type": "agent_run"})
        llm = tracer.start_span("llm", context=set_span_in_context(root), start_time=ns(start), attributes={
            **common, "mastra.span_type": "model_generation", "mastra.attributes": json.dumps(
                {"model": model, "provider": prov, "usage": {"inputTokens": tokens_in, "outputTokens": tokens_out}})})
        llm.end(end_time=ns(start + timedelta(milliseconds=ms / 2)))
        if status == "error":
            root.set_status(Status(StatusCode.ERROR, "boom"))
        root.end(end_time=ns(start + timedelta(milliseconds=ms)))
    provider.shutdown()


@pytest.fixture
def seeded(data_dir: Path):
    with serve("studio", data_dir, inprocess=True, settings={"telemetry": False}) as server:
        seed(server.url)
        server.sql = lambda q: rows(server, q)
        with httpx.Client(base_url=server.url + API) as client:
            server.client = client
            yield server


def post(server, route: str, **body) -> dict:
    response = server.client.post(f"/metrics/{route}", json=body)
    assert response.status_code == 200, response.text
    return response.json()


WINDOW = {"timestamp": {"start": "2025-01-01T00:00:00Z", "end": "2025-01-02T00:00:00Z"}}
TOKENS = "TRY_CAST(json_extract_string(attributes, '$.usage.{}') AS BIGINT)"
DURATION = "date_diff('millisecond', started_at, ended_at)"


def test_aggregate_matches_the_rows(seeded):
    (tin, tout), = seeded.sql(f"SELECT sum({TOKENS.format('inputTokens')}), sum({TOKENS.format('outputTokens')})"
                              " FROM spans WHERE span_type = 'model_generation'")
    assert (tin, tout) == (60, 21)
    total = post(seeded, "aggregate", name=["mastra_model_total_input_tokens", "mastra_model_total_output_tokens"],
                 aggregation="sum", filters=WINDOW)
    assert total == {"value": tin + tout, "estimatedCost": None, "costUnit": None, "previousValue": None,
                     "previousEstimatedCost": None, "changePercent": None, "costChangePercent": None}
    (avg, low, high, n), = seeded.sql(f"SELECT avg({DURATION}), min({DURATION}), max({DURATION}), count(*) FROM spans"
                                      " WHERE span_type = 'agent_run'")
    for aggregation, expected in (("avg", avg), ("min", low), ("max", high), ("count", n), ("last", 2000)):
        assert post(seeded, "aggregate", name=["mastra_agent_duration_ms"],
                    aggregation=aggregation)["value"] == expected
    distinct = post(seeded, "aggregate", name=["mastra_agent_duration_ms"], aggregation="count_distinct",
                    distinctColumn="resourceId")
    assert distinct["value"] == 2
    one = post(seeded, "aggregate", name=["mastra_model_total_input_tokens"], aggregation="sum",
               filters={"threadId": "t2", "environment": "test", "serviceName": "svc", "bogus": "x"})
    assert one["value"] == 20
    traces = [r[0] for r in seeded.sql("SELECT trace_id FROM traces WHERE thread_id IN ('t1', 't3')")]
    assert post(seeded, "aggregate", name=["mastra_model_total_input_tokens"], aggregation="sum",
                filters={"traceIds": traces})["value"] == 40
    for filters in ({"experimentId": "e1"}, {"model": "nope"}, {"timestamp": {"start": "2030-01-01T00:00:00Z"}}):
        assert post(seeded, "aggregate", name=["mastra_model_total_input_tokens"], aggregation="sum",
                    filters=filters)["value"] == 0
    for name in ("mastra_tool_duration_ms", "mastra_workflow_duration_ms", "mastra_model_input_cache_read_tokens"):
        assert post(seeded, "aggregate", name=[name], aggregation="count")["value"] == (
            3 if "cache" in name else 0)
        assert post(seeded, "aggregate", name=[name], aggregation="sum")["value"] == 0


def test_compare_period(seeded):
    window = {"timestamp": {"start": "2025-01-01T11:00:00Z", "end": "2025-01-01T13:00:00Z"}}
    runs = post(seeded, "aggregate", name=["mastra_agent_duration_ms"], aggregation="count", filters=window,
                comparePeriod="previous_period")
    assert (runs["value"], runs["previousValue"], runs["changePercent"]) == (1, 2, -50.0)
    tokens = post(seeded, "aggregate", name=["mastra_model_total_input_tokens"], aggregation="sum", filters=window,
                  comparePeriod="previous_period")
    assert (tokens["value"], tokens["previousValue"], tokens["changePercent"]) == (30, 30, 0.0)
    day = post(seeded, "aggregate", name=["mastra_agent_duration_ms"], aggregation="count", filters=window,
               comparePeriod="previous_day")
    assert (day["previousValue"], day["changePercent"]) == (0, None)


def test_breakdown(seeded):
    expected = seeded.sql(f"SELECT entity_name, sum({TOKENS.format('inputTokens')}) AS v FROM spans WHERE span_type ="
                          " 'model_generation' GROUP BY 1 ORDER BY v DESC, entity_name")  # ties: by name, as the route
    groups = post(seeded, "breakdown", name=["mastra_model_total_input_tokens"], groupBy=["entityName"],
                  aggregation="sum", orderDirection="DESC", filters=WINDOW)["groups"]
    assert [(g["dimensions"]["entityName"], g["value"]) for g in groups] == expected
    assert all(g["estimatedCost"] is None and g["costUnit"] is None for g in groups)
    models = post(seeded, "breakdown", name=["mastra_model_total_output_tokens"], groupBy=["model", "provider"],
                  aggregation="sum", orderDirection="ASC", limit=1)["groups"]
    assert models == [{"dimensions": {"model": "claude", "provider": "anthropic"}, "value": 7,
                       "estimatedCost": None, "costUnit": None}]
    status = post(seeded, "breakdown", name=["mastra_agent_duration_ms"], groupBy=["entityName", "status"],
                  aggregation="count")["groups"]
    assert sorted((g["dimensions"]["entityName"], g["dimensions"]["status"], g["value"]) for g in status) == [
        ("Chat Agent", "error", 1), ("Chat Agent", "ok", 1), ("Other Agent", "ok", 1)]
    threads = post(seeded, "breakdown", name=["mastra_agent_duration_ms"], groupBy=["resourceId"],
                   aggregation="count_distinct", distinctColumn="threadId")["groups"]
    assert [(g["dimensions"]["resourceId"], g["value"]) for g in threads] == [("r1", 2), ("r2", 1)]
    usage = post(seeded, "breakdown", name=["mastra_model_total_input_tokens", "mastra_model_total_output_tokens"],
                 groupBy=["traceId", "name"], aggregation="sum")["groups"]
    assert len(usage) == 6 and sum(g["value"] for g in usage) == 81
    roots = post(seeded, "breakdown", name=["mastra_model_total_input_tokens"], groupBy=["rootEntityName",
                 "parentEntityType"], aggregation="sum")["groups"]
    assert {(g["dimensions"]["rootEntityName"], g["dimensions"]["parentEntityType"], g["value"]) for g in roots} == {
        ("Chat Agent", "agent", 30), ("Other Agent", "agent", 30)}


def test_timeseries_and_percentiles(seeded):
    expected = seeded.sql(f"SELECT strftime(date_trunc('hour', ended_at AT TIME ZONE 'UTC'), '%Y-%m-%dT%H:%M:%S.000Z'),"
                          f" sum({TOKENS.format('inputTokens')}) FROM spans WHERE span_type = 'model_generation'"
                          " GROUP BY 1 ORDER BY 1")
    series = post(seeded, "timeseries", name=["mastra_model_total_input_tokens"], interval="1h", aggregation="sum",
                  filters=WINDOW)["series"]
    assert [s["name"] for s in series] == ["mastra_model_total_input_tokens"] and series[0]["costUnit"] is None
    assert [(p["timestamp"], p["value"]) for p in series[0]["points"]] == expected
    assert {p["timestamp"] for p in series[0]["points"]} == {"2025-01-01T10:00:00.000Z", "2025-01-01T12:00:00.000Z"}
    grouped = post(seeded, "timeseries", name=["mastra_agent_duration_ms"], interval="1d", aggregation="count",
                   groupBy=["entityName"])["series"]
    assert [(s["name"], [p["value"] for p in s["points"]]) for s in grouped] == [("Chat Agent", [2]),
                                                                                 ("Other Agent", [1])]
    empty = post(seeded, "timeseries", name=["mastra_tool_duration_ms"], interval="5m", aggregation="sum")
    assert empty == {"series": [{"name": "mastra_tool_duration_ms", "costUnit": None, "points": []}]}

    (p50, p95), = seeded.sql(f"SELECT quantile_cont({DURATION}, 0.5), quantile_cont({DURATION}, 0.95) FROM spans"
                             " WHERE span_type = 'agent_run'")
    body = post(seeded, "percentiles", name="mastra_agent_duration_ms", percentiles=[0.5, 0.95], interval="1d",
                filters=WINDOW)
    assert body == {"series": [
        {"percentile": 0.5, "points": [{"timestamp": "2025-01-01T00:00:00.000Z", "value": p50}]},
        {"percentile": 0.95, "points": [{"timestamp": "2025-01-01T00:00:00.000Z", "value": p95}]}]}
    assert (p50, p95) == pytest.approx((2000, 2900))
    hourly = post(seeded, "percentiles", name="mastra_agent_duration_ms", percentiles=[0.5], interval="1h")
    assert [(p["timestamp"][11:16], p["value"]) for p in hourly["series"][0]["points"]] == [("10:00", 2000),
                                                                                            ("12:00", 2000)]
    none = post(seeded, "percentiles", name="mastra_workflow_duration_ms", percentiles=[0.5], interval="1h")
    assert none == {"series": [{"percentile": 0.5, "points": []}]}


def test_discovery(seeded):
    names = seeded.client.get("/discovery/metric-names", params={"prefix": "mastra_model"}).json()["names"]
    assert "mastra_model_total_input_tokens" in names and "mastra_agent_duration_ms" not in names
    keys = seeded.client.get("/discovery/metric-label-keys", params={"metricName": "mastra_model_total_input_tokens"})
    assert {"entityName", "model", "provider", "threadId", "status"} <= set(keys.json()["keys"])
    agent_keys = seeded.client.get("/discovery/metric-label-keys", params={"metricName": "mastra_agent_duration_ms"})
    assert "model" not in agent_keys.json()["keys"]
    values = seeded.client.get("/discovery/metric-label-values", params={
        "metricName": "mastra_model_total_input_tokens", "labelKey": "model"}).json()
    assert values == {"values": ["claude", "gpt-4o-mini"]}
    prefixed = seeded.client.get("/discovery/metric-label-values", params={
        "metricName": "mastra_agent_duration_ms", "labelKey": "entityName", "prefix": "Oth"}).json()
    assert prefixed == {"values": ["Other Agent"]}
    assert seeded.client.get("/discovery/metric-label-keys", params={"metricName": "nope"}).status_code == 400


@pytest.mark.parametrize("route, body, field", [
    ("aggregate", {"name": ["nope"], "aggregation": "sum"}, "name.0"),
    ("aggregate", {"name": ["mastra_agent_duration_ms"], "aggregation": "median"}, "aggregation"),
    ("aggregate", {"name": ["mastra_agent_duration_ms"], "aggregation": "count_distinct"}, "distinctColumn"),
    ("aggregate", {"name": [], "aggregation": "sum"}, "name"),
    ("aggregate", {"name": ["mastra_agent_duration_ms"], "aggregation": "sum",
                   "filters": {"timestamp": {"start": "yesterday"}}}, "filters.timestamp.start"),
    ("breakdown", {"name": ["mastra_agent_duration_ms"], "aggregation": "sum", "groupBy": ["color"]}, "groupBy.0"),
    ("timeseries", {"name": ["mastra_agent_duration_ms"], "aggregation": "sum", "interval": "7m"}, "interval"),
    ("percentiles", {"name": "mastra_agent_duration_ms", "percentiles": [0.5, 1.5], "interval": "1h"}, "percentiles.1"),
    ("breakdown", {"name": ["mastra_agent_duration_ms"], "aggregation": "sum", "groupBy": ["threadId"],
                   "limit": 10 ** 40}, "limit"),
    ("aggregate", {"name": ["mastra_agent_duration_ms"], "aggregation": "sum", "filters": {"threadId": 5}},
     "filters.threadId"),
    ("aggregate", {"name": ["mastra_agent_duration_ms"], "aggregation": "sum", "filters": {"traceIds": "x"}},
     "filters.traceIds"),
])
def test_bad_input_is_400(seeded, route: str, body: dict, field: str):
    response = seeded.client.post(f"/metrics/{route}", content=json.dumps(body),
                                  headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"] and response.json()["issues"][0]["field"] == field


def test_unavailable_store_is_503(data_dir: Path):
    data_dir.mkdir(parents=True)
    (data_dir / "observability.duckdb").write_bytes(b"this is not a duckdb file" * 100)
    with serve("studio", data_dir, inprocess=True, settings={"telemetry": False}) as server:
        response = local_http.post(f"{server.url}{API}/metrics/aggregate",
                              json={"name": ["mastra_agent_duration_ms"], "aggregation": "count"})
        capabilities = local_http.get(f"{server.url}/api/system/packages").json()["observabilityStorageCapabilities"]
    assert response.status_code == 503 and "observability" in response.json()["error"]
    assert response.headers["retry-after"]
    assert capabilities == {"metrics": False, "logs": False, "traceQueryDiscovery": False}


def test_capabilities_when_the_store_is_open(seeded):
    capabilities = local_http.get(f"{seeded.url}/api/system/packages").json()["observabilityStorageCapabilities"]
    assert capabilities == {"metrics": True, "logs": True, "traceQueryDiscovery": True}


def test_metrics_are_scoped_to_the_callers_resource(data_dir: Path):
    from dev_server.auth import service_token

    with serve("studio", data_dir, inprocess=True, settings={"telemetry": False, "auth_tokens": "ta=alice,tb=bob"}) \
            as server:
        exporter = OTLPSpanExporter(endpoint=f"{server.url}/v1/traces",
                                    headers={"authorization": f"Bearer {service_token('ta=alice,tb=bob')}"})
        provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        span = provider.get_tracer("t").start_span("agent run", attributes={
            "mastra.span_type": "agent_run", "mastra.resource_id": "user:alice", "mastra.entity_name": "A"})
        span.end()
        provider.shutdown()
        body = {"name": ["mastra_agent_duration_ms"], "aggregation": "count"}
        counted = {token: local_http.post(f"{server.url}{API}/metrics/aggregate", json=body,
                                     headers={"authorization": f"Bearer {token}"}).json()["value"]
                   for token in ("ta", "tb")}
    assert counted == {"ta": 1, "tb": 0}


def test_real_agent_turns(data_dir: Path):
    with serve("studio", data_dir, inprocess=True) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        store = observability_store(server)
        usage = []
        for text, thread in (("hi", "t1"), ("hello there", "t1"), ("one two three four", "t2")):
            reply = client.post("/api/agents/chat-agent/generate",
                                json={"messages": text, "memory": {"thread": thread, "resource": "r"}})
            assert reply.status_code == 200, reply.text
            usage.append(reply.json()["usage"])
        sql = "SELECT count(*) FROM spans WHERE span_type = 'agent_run' AND ended_at IS NOT NULL"
        # exported through the span queue's timer
        wait_until(lambda: store.run_blocking(lambda con: con.execute(sql).fetchone()[0]) >= 3, 45, poll_s=0.1)
        rows = store.run_blocking(lambda con: con.execute(
            f"SELECT sum({TOKENS.format('inputTokens')}), sum({TOKENS.format('outputTokens')}) FROM spans"
            " WHERE span_type = 'model_generation'").fetchone())
        durations = store.run_blocking(lambda con: con.execute(
            "SELECT quantile_cont(date_diff('microsecond', started_at, ended_at) / 1000.0, 0.5), count(*) FROM spans"
            " WHERE span_type = 'agent_run'").fetchone())
        metric = lambda route, **body: client.post(f"{API}/metrics/{route}", json=body).json()  # noqa: E731
        tokens_in = metric("aggregate", name=["mastra_model_total_input_tokens"], aggregation="sum")["value"]
        tokens_out = metric("aggregate", name=["mastra_model_total_output_tokens"], aggregation="sum")["value"]
        assert (tokens_in, tokens_out) == rows == (sum(u["inputTokens"] for u in usage),
                                                   sum(u["outputTokens"] for u in usage))
        threads = metric("breakdown", name=["mastra_agent_duration_ms"], aggregation="count", groupBy=["threadId"])
        assert {(g["dimensions"]["threadId"], g["value"]) for g in threads["groups"]} == {("t1", 2), ("t2", 1)}
        p50 = metric("percentiles", name="mastra_agent_duration_ms", percentiles=[0.5], interval="1d")
        assert [p["value"] for p in p50["series"][0]["points"]] == pytest.approx([durations[0]])
        assert durations[1] == 3
        names = client.get(f"{API}/discovery/metric-label-values", params={
            "metricName": "mastra_model_total_input_tokens", "labelKey": "entityName"}).json()
        assert names == {"values": ["Chat Agent"]}
