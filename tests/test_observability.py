"""Traces and logs end to end: both processes running, spans over OTLP into the studio's DuckDB.

A chat through the gateway (exported over OTLP/HTTP) and one through the studio (written
directly) both appear in the Studio's trace query with Mastra's tree; logs of a run carry
its trace, span and thread; the gateway keeps answering while the studio is down and its
queued spans arrive once the studio is back.
"""

from __future__ import annotations

import time

import httpx
import pytest
from fastapi import FastAPI, Request

from tests.support import LiveApp, free_port, user_message

QUERY = "/api/observability/traces/query"


def chat_gateway(gateway, conversation: str, text: str = "my name is Ada") -> None:
    with httpx.stream("POST", f"{gateway.url}/api/chat", timeout=30,
                      json={"id": "c", "conversationId": conversation,
                            "messages": [user_message(f"{conversation}-{time.monotonic_ns()}", text)]}) as response:
        assert response.status_code == 200
        response.read()


def chat_studio(studio, thread: str) -> None:
    with httpx.stream("POST", f"{studio.url}/api/agents/chat-agent/stream", timeout=30,
                      json={"messages": [{"role": "user", "content": "hello from the studio"}],
                            "memory": {"thread": thread, "resource": "chat-agent"}}) as response:
        assert response.status_code == 200
        response.read()


def wait_for_traces(studio, predicate, *, where=None, timeout: float = 45.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    traces: list[dict] = []
    while time.monotonic() < deadline:
        body = {"page": {"limit": 100, "after": None}, **({"where": where} if where else {})}
        traces = httpx.post(f"{studio.url}{QUERY}", json=body, timeout=10).json()["traces"]
        if predicate(traces):
            return traces
        time.sleep(0.25)
    raise AssertionError(f"traces never matched; last: {traces}")


def eq(path: str, value: str) -> dict:
    return {"op": "eq", "left": {"path": path}, "right": {"literal": value}}


@pytest.fixture
def pair(start_server):
    studio_port = free_port()
    studio = start_server("studio", port=studio_port)
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(studio_port)})
    return gateway, studio


def test_runs_through_both_processes_become_traces_with_mastras_tree(pair):
    gateway, studio = pair
    chat_gateway(gateway, "obs-gateway")
    chat_studio(studio, "obs-studio")
    traces = wait_for_traces(studio, lambda ts: {t["threadId"] for t in ts} >= {"obs-gateway", "obs-studio"})
    by_thread = {t["threadId"]: t for t in traces}
    gateway_trace = by_thread["obs-gateway"]
    assert gateway_trace["name"] == "agent run: 'chat-agent'"
    assert (gateway_trace["entityType"], gateway_trace["entityId"], gateway_trace["status"]) == ("agent", "chat-agent",
                                                                                                "success")
    assert gateway_trace["resourceId"] == "ai-chat" and gateway_trace["inputPreview"] == "my name is Ada"
    assert gateway_trace["parentSpanId"] is None

    spans = httpx.get(f"{studio.url}/api/observability/traces/{gateway_trace['traceId']}").json()["spans"]
    by_id = {s["spanId"]: s for s in spans}
    root = by_id[gateway_trace["rootSpanId"]]
    assert root["spanType"] == "agent_run" and root["output"]["text"].startswith("[local model]")
    assert root["attributes"]["conversationId"] == "obs-gateway"
    children = [s for s in spans if s["parentSpanId"] == root["spanId"]]
    assert sorted(s["spanType"] for s in children) == ["memory_operation"] * 3 + ["model_generation"]
    generation = next(s for s in children if s["spanType"] == "model_generation")
    assert generation["attributes"]["streaming"] is True and generation["attributes"]["usage"]["outputTokens"] > 0
    assert generation["input"]["messages"][-1] == {"role": "user", "content": "my name is Ada"}
    step = next(s for s in spans if s["parentSpanId"] == generation["spanId"])
    assert step["spanType"] == "model_step" and step["attributes"]["finishReason"] == "stop"
    assert all(s["threadId"] == "obs-gateway" for s in spans)
    assert {s["serviceName"] for s in spans} == {"dev-server-gateway"}
    studio_spans = httpx.get(f"{studio.url}/api/observability/traces/{by_thread['obs-studio']['traceId']}").json()
    assert {s["serviceName"] for s in studio_spans["spans"]} == {"dev-server-studio"}

    only = wait_for_traces(studio, lambda ts: len(ts) == 1, where=eq("threadId", "obs-gateway"))
    assert only[0]["traceId"] == gateway_trace["traceId"]
    agent_tab = {"op": "and", "args": [eq("entityType", "agent"), {"spans": {"some": eq("entityId", "chat-agent")}}]}
    assert len(wait_for_traces(studio, lambda ts: len(ts) >= 2, where=agent_tab)) == 2
    none = httpx.post(f"{studio.url}{QUERY}", json={"where": {"spans": {"some": eq("entityId", "docs-agent")}}})
    assert none.json()["traces"] == []

    logs = httpx.get(f"{studio.url}/api/observability/logs", params={"traceId": gateway_trace["traceId"]}).json()
    messages = {entry["message"]: entry for entry in logs["logs"]}
    started = messages["agent run started"]
    assert started["spanId"] == root["spanId"] and started["threadId"] == "obs-gateway"
    assert started["level"] == "info" and "agent run finished" in messages


def test_the_gateway_keeps_chatting_while_the_studio_is_down(start_server):
    studio_port = free_port()
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(studio_port)})
    for i in range(3):
        chat_gateway(gateway, f"offline-{i}")  # no studio: chats still answer
    assert httpx.get(f"{gateway.url}/health").json()["telemetry"]["spans"]["queued"] >= 18

    studio = start_server("studio", port=studio_port)
    traces = wait_for_traces(studio, lambda ts: {f"offline-{i}" for i in range(3)} <= {t["threadId"] for t in ts})
    assert len(traces) == 3
    telemetry = httpx.get(f"{gateway.url}/health").json()["telemetry"]
    assert telemetry["spans"]["dropped"] == 0


def test_a_full_queue_drops_the_oldest_and_counts(start_server):
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(free_port()),
                                           "DEV_SERVER_TELEMETRY_QUEUE_SIZE": "100"})
    for i in range(20):  # 6 spans a turn: 120 > 100
        chat_gateway(gateway, f"flood-{i}")
    spans = httpx.get(f"{gateway.url}/health").json()["telemetry"]["spans"]
    assert spans["queued"] == 100 and spans["dropped"] == 20
    assert "export queue full" in gateway.output()


def test_the_standard_otlp_variable_points_the_gateway_elsewhere(start_server):
    received: list[bytes] = []
    collector = FastAPI()

    @collector.post("/v1/traces")
    async def traces(request: Request):
        received.append(await request.body())
        return {}

    @collector.post("/v1/logs")
    async def logs(request: Request):
        return {}

    with LiveApp(collector) as other:
        gateway = start_server("gateway", env={"OTEL_EXPORTER_OTLP_ENDPOINT": other.url})
        chat_gateway(gateway, "elsewhere")
        deadline = time.monotonic() + 20
        # the root span ends last, so it may come in a later batch than its children
        while not any(b"agent run: 'chat-agent'" in body for body in received) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert any(b"agent run: 'chat-agent'" in body for body in received), [len(b) for b in received]
