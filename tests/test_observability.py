"""Traces and logs end to end: both processes running, spans over OTLP into the studio's DuckDB.

A chat through the gateway (exported over OTLP/HTTP) and one through the studio (written
directly) both appear in the Studio's trace query with Mastra's tree; logs of a run carry
its trace, span and thread; the gateway keeps answering while the studio is down and its
queued spans arrive once the studio is back.
"""

from __future__ import annotations

import base64
import json
import re
import time

import httpx
import pytest
from fastapi import FastAPI, Request

from tests.kit.chat import chat_and_drain
from tests.kit.local_http import local_http
from tests.kit.traces import QUERY, wait_for_traces
from tests.support import LiveApp, free_port, user_message, wait_until


def chat_studio(studio, thread: str) -> None:
    with local_http.stream("POST", f"{studio.url}/api/agents/chat-agent/stream", timeout=30,
                      json={"messages": [{"role": "user", "content": "hello from the studio"}],
                            "memory": {"thread": thread, "resource": "chat-agent"}}) as response:
        assert response.status_code == 200
        response.read()


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
    chat_and_drain(gateway, "obs-gateway")
    chat_studio(studio, "obs-studio")
    traces = wait_for_traces(studio, lambda ts: {t["threadId"] for t in ts} >= {"obs-gateway", "obs-studio"})
    by_thread = {t["threadId"]: t for t in traces}
    gateway_trace = by_thread["obs-gateway"]
    assert gateway_trace["name"] == "agent run: 'chat-agent'"
    assert (gateway_trace["entityType"], gateway_trace["entityId"], gateway_trace["status"]) == ("agent", "chat-agent",
                                                                                                "success")
    assert gateway_trace["resourceId"] == "ai-chat" and gateway_trace["inputPreview"] == "my name is Ada"
    assert gateway_trace["parentSpanId"] is None

    spans = local_http.get(f"{studio.url}/api/observability/traces/{gateway_trace['traceId']}").json()["spans"]
    by_id = {s["spanId"]: s for s in spans}
    root = by_id[gateway_trace["rootSpanId"]]
    assert root["spanType"] == "agent_run" and root["output"]["text"].startswith("[local model]")
    assert root["attributes"]["conversationId"] == "obs-gateway"
    children = [s for s in spans if s["parentSpanId"] == root["spanId"]]
    assert sorted(s["spanType"] for s in children) == ["memory_operation"] * 2 + ["model_generation"]
    assert sorted(s["name"] for s in children if s["spanType"] == "memory_operation") == [
        "memory: save messages", "memory: save reply"]
    generation = next(s for s in children if s["spanType"] == "model_generation")
    assert generation["attributes"]["streaming"] is True and generation["attributes"]["usage"]["outputTokens"] > 0
    assert generation["input"]["messages"][-1] == {"role": "user", "content": "my name is Ada"}
    step = next(s for s in spans if s["parentSpanId"] == generation["spanId"])
    assert step["spanType"] == "model_step" and step["attributes"]["finishReason"] == "stop"
    history = next(s for s in spans if s["parentSpanId"] == step["spanId"])
    # chat-agent's window is Observational Memory's processor (dev_server.om.processor)
    assert (history["spanType"], history["name"]) == ("processor_run", "input processor: observational-memory")
    assert all(s["threadId"] == "obs-gateway" for s in spans)
    assert {s["serviceName"] for s in spans} == {"dev-server-gateway"}
    studio_spans = local_http.get(f"{studio.url}/api/observability/traces/{by_thread['obs-studio']['traceId']}").json()
    assert {s["serviceName"] for s in studio_spans["spans"]} == {"dev-server-studio"}

    only = wait_for_traces(studio, lambda ts: len(ts) == 1, where=eq("threadId", "obs-gateway"))
    assert only[0]["traceId"] == gateway_trace["traceId"]
    agent_tab = {"op": "and", "args": [eq("entityType", "agent"), {"spans": {"some": eq("entityId", "chat-agent")}}]}
    assert len(wait_for_traces(studio, lambda ts: len(ts) >= 2, where=agent_tab)) == 2
    none = local_http.post(f"{studio.url}{QUERY}", json={"where": {"spans": {"some": eq("entityId", "docs-agent")}}})
    assert none.json()["traces"] == []

    # logs are exported apart from the spans (a queue of their own): they may land later
    wanted = {f"agent run {what}: chat-agent on thread obs-gateway" for what in ("started", "finished")}

    def logged() -> dict[str, dict]:
        logs = local_http.get(f"{studio.url}/api/observability/logs",
                              params={"traceId": gateway_trace["traceId"]}).json()
        return {entry["message"].split(",")[0]: entry for entry in logs["logs"]}  # without the time

    def both_logged() -> dict[str, dict] | None:
        found = logged()
        return found if wanted <= found.keys() else None

    messages = wait_until(both_logged, 45, poll_s=0.1, seen=logged)
    started = messages["agent run started: chat-agent on thread obs-gateway"]
    assert started["spanId"] == root["spanId"] and started["threadId"] == "obs-gateway"
    assert started["level"] == "info" and "agent run finished: chat-agent on thread obs-gateway" in messages
    assert re.fullmatch(r"agent run finished: chat-agent on thread obs-gateway, \d+ ms",
                        messages["agent run finished: chat-agent on thread obs-gateway"]["message"])


def test_a_generations_span_records_its_input_within_the_configured_bound(start_server):
    """A long thread's model input is the whole window: the span keeps the system messages and
    the newest messages, and says how many it left out (DEV_SERVER_TRACE_INPUT_CHARS, docs/studio.md S4)."""
    studio_port = free_port()
    studio = start_server("studio", port=studio_port)
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(studio_port),
                                           "DEV_SERVER_TRACE_INPUT_CHARS": "600"})
    for index in range(6):
        chat_and_drain(gateway, "obs-bounded", f"message {index}: " + "words of a long conversation " * 4)
    traces = wait_for_traces(studio, lambda ts: sum(t["threadId"] == "obs-bounded" for t in ts) == 6)
    last = max((t for t in traces if t["threadId"] == "obs-bounded"), key=lambda t: t["startedAt"])
    spans = local_http.get(f"{studio.url}/api/observability/traces/{last['traceId']}").json()["spans"]
    recorded = next(s for s in spans if s["spanType"] == "model_generation")["input"]["messages"]
    assert recorded[0]["role"] == "system" and recorded[-1]["content"].startswith("message 5: ")
    [marker] = [m for m in recorded if "not recorded in this trace" in str(m["content"])]
    assert re.match(r"\[\d+ earlier messages \([\d,]+ characters\)", marker["content"])
    assert sum(len(str(m["content"])) for m in recorded) < 1_200


def test_the_gateway_keeps_chatting_while_the_studio_is_down(start_server):
    studio_port = free_port()
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(studio_port)})
    for i in range(3):
        chat_and_drain(gateway, f"offline-{i}")  # no studio: chats still answer
    assert local_http.get(f"{gateway.url}/health").json()["telemetry"]["spans"]["queued"] >= 18

    studio = start_server("studio", port=studio_port)
    traces = wait_for_traces(studio, lambda ts: {f"offline-{i}" for i in range(3)} <= {t["threadId"] for t in ts})
    assert len(traces) == 3
    telemetry = local_http.get(f"{gateway.url}/health").json()["telemetry"]
    assert telemetry["spans"]["dropped"] == 0


def test_a_full_queue_drops_the_oldest_and_counts(start_server):
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(free_port()),
                                           "DEV_SERVER_TELEMETRY_QUEUE_SIZE": "100"})
    for i in range(20):  # 6 spans a turn: 120 > 100
        chat_and_drain(gateway, f"flood-{i}")
    spans = local_http.get(f"{gateway.url}/health").json()["telemetry"]["spans"]
    assert spans["queued"] == 100 and spans["dropped"] == 20
    assert "export queue full" in gateway.output()


def test_the_queue_is_bounded_in_megabytes_too_so_large_spans_cannot_pile_up(start_server):
    """Issue 25: a long thread's spans are large (a model generation's input is the whole
    prompt), so a bound on the count alone let the queue grow by hundreds of megabytes."""
    gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_PORT": str(free_port()),
                                           "DEV_SERVER_TELEMETRY_QUEUE_MB": "1"})
    for i in range(8):  # each turn's agent run and model generation carry the 100 KB message
        chat_and_drain(gateway, f"large-{i}", "x" * 100_000)
    spans = local_http.get(f"{gateway.url}/health").json()["telemetry"]["spans"]
    assert 0 < spans["queuedBytes"] <= 2**20 and spans["dropped"] > 0 and spans["queued"] < 8 * 6
    assert spans["exported"] == 0 and spans["exportSeconds"] >= 0


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
        chat_and_drain(gateway, "elsewhere")
        deadline = time.monotonic() + 20
        # the root span ends last, so it may come in a later batch than its children
        while not any(b"agent run: 'chat-agent'" in body for body in received) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert any(b"agent run: 'chat-agent'" in body for body in received), [len(b) for b in received]



def test_otlp_targets_follow_the_standard_variables_read_from_the_env_file_too(tmp_path):
    """An OTEL_EXPORTER_OTLP_* value in the .env counts like one in the environment (the
    exporters alone would read only the environment, and post to localhost:4318)."""
    from dev_server.auth import service_token
    from dev_server.settings import Settings, otlp_target

    env_file = tmp_path / ".env"
    env_file.write_text("OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318/\n"
                        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=http://logs:4318/custom/logs\n")
    settings = Settings.load(env_file=env_file)
    assert otlp_target(settings, "traces") == ("http://collector:4318/v1/traces", None)
    assert otlp_target(settings, "logs") == ("http://logs:4318/custom/logs", None)
    studio = Settings(studio_url="http://studio:4111/", auth_tokens="ta=alice")
    assert otlp_target(studio, "logs") == ("http://studio:4111/v1/logs",
                                           {"Authorization": f"Bearer {service_token('ta=alice')}"})
    assert otlp_target(Settings(studio_port=4999), "traces") == ("http://127.0.0.1:4999/v1/traces", None)


def test_with_auth_the_gateway_reaches_its_studio_url_with_the_service_token(start_server):
    """Docker compose: the studio is not on localhost; DEV_SERVER_STUDIO_URL names it, and the
    gateway's exporter still authenticates as the service principal there."""
    from dev_server.auth import service_token

    tokens = "ta=alice"
    seen: list[str | None] = []
    studio = FastAPI()

    @studio.post("/v1/traces")
    async def traces(request: Request):
        seen.append(request.headers.get("authorization"))
        return {}

    @studio.post("/v1/logs")
    async def logs(request: Request):
        return {}

    with LiveApp(studio) as other:
        gateway = start_server("gateway", env={"DEV_SERVER_STUDIO_URL": other.url + "/",
                                               "DEV_SERVER_AUTH_TOKENS": tokens})
        with local_http.stream("POST", f"{gateway.url}/api/chat", timeout=30, headers={"authorization": "Bearer ta"},
                          json={"id": "c", "conversationId": "via-url",
                                "messages": [user_message("via-url-1", "hello")]}) as response:
            assert response.status_code == 200
            response.read()
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            time.sleep(0.1)
    assert seen and set(seen) == {f"Bearer {service_token(tokens)}"}


# ---------------------------------------------------------------- the trace query contract

def otlp_span(trace: str, span: str, start_s: int, *, parent: str = "", ms: int = 100, **mastra: str) -> dict:
    return {"traceId": trace, "spanId": span, "parentSpanId": parent, "name": mastra.pop("name", "agent run"),
            "startTimeUnixNano": str(start_s * 10 ** 9), "endTimeUnixNano": str(start_s * 10 ** 9 + ms * 10 ** 6),
            "attributes": [{"key": f"mastra.{k}", "value": {"stringValue": v}} for k, v in mastra.items()]}


T0 = 1_735_725_600  # 2025-01-01T10:00:00Z
WINDOW = {"from": "2025-01-01T00:00:00Z", "to": "2025-01-02T00:00:00Z"}
TRACES = [  # (trace id, start, entity, metadata, model of its generation span, generation ms)
    ("a1" * 16, T0, "Chat Agent", {"region": "eu-west-1", "n": 1}, "gpt-4o-mini", 50),
    ("a2" * 16, T0 + 60, "Chat Agent", {"region": "eu-west-1"}, "claude", 900),
    ("a3" * 16, T0 + 120, "Docs Agent", {"region": "us-west-2", "tier": "gold"}, "gpt-4o-mini", 10),
]


@pytest.fixture(scope="module")
def queried(tmp_path_factory: pytest.TempPathFactory):
    from dev_server.factory import create_app
    from dev_server.settings import Settings

    app = create_app("studio", Settings(data_dir=tmp_path_factory.mktemp("query") / "data", telemetry=False))
    with LiveApp(app) as server:
        spans = []
        for i, (trace, start, entity, metadata, model, ms) in enumerate(TRACES):
            root, child = f"{i + 1:016x}", f"{i + 101:016x}"
            spans.append(otlp_span(trace, root, start, span_type="agent_run", entity_type="agent",
                                   entity_name=entity, thread_id=f"q{i}", metadata=json.dumps(metadata)))
            spans.append(otlp_span(trace, child, start, parent=root, ms=ms, name="llm", span_type="model_generation",
                                   entity_name=entity, attributes=json.dumps({"model": model})))
        body = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": spans}]}]}
        assert local_http.post(f"{server.url}/v1/traces", json=body).status_code == 200
        with httpx.Client(base_url=f"{server.url}/api/observability") as client:
            yield client


def query(client, body: dict | bytes) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()  # keeps lone surrogates escaped
    return client.post("/traces/query", content=content, headers={"content-type": "application/json"})


def found(client, where: dict, **body) -> list[str]:
    response = query(client, {"timeRange": WINDOW, "where": where, **body})
    assert response.status_code == 200, response.text
    return [t["traceId"][:4] for t in response.json()["traces"]]


def test_where_semantics_over_every_kind_of_field(queried):
    assert found(queried, eq("entityName", "Chat Agent")) == ["a2a2", "a1a1"]
    assert found(queried, {"op": "ne", "left": {"path": "metadata.tier"}, "right": {"literal": "gold"}}) == [
        "a2a2", "a1a1"]  # a missing value satisfies ne
    assert found(queried, eq("metadata.region", "us-west-2")) == ["a3a3"]
    assert found(queried, {"op": "exists", "path": "metadata.n"}) == []  # not a string: missing
    slow = {"op": "gt", "left": {"path": "durationMs"}, "right": {"literal": 500}}
    assert found(queried, {"spans": {"some": slow}}) == ["a2a2"]
    assert found(queried, {"spans": {"none": eq("model", "gpt-4o-mini")}}) == ["a2a2"]
    after = {"op": "gte", "left": {"path": "startedAt"}, "right": {"literal": "2025-01-01T10:01:00Z"}}
    assert found(queried, after) == ["a3a3", "a2a2"]
    assert found(queried, {"op": "notIn", "value": {"path": "entityName"}, "set": ["Docs Agent"]}) == ["a2a2", "a1a1"]
    assert found(queried, {"op": "includes", "path": "entityName", "value": "docs"}) == ["a3a3"]
    assert found(queried, {"scores": {"some": {"op": "lt", "left": {"path": "score"},
                                               "right": {"literal": 0.5}}}}) == []
    assert len(found(queried, {"feedback": {"none": {"op": "exists", "path": "comment"}}})) == 3


def test_the_cursor_pages_in_either_order_and_refuses_foreign_cursors(queried):
    for field, direction, expected in (("startedAt", "desc", ["a3", "a2", "a1"]),
                                       ("endedAt", "asc", ["a1", "a2", "a3"])):
        seen, after = [], None
        while True:
            body = {"timeRange": WINDOW, "orderBy": [{"field": field, "direction": direction}],
                    "page": {"limit": 2, "after": after}}
            page = query(queried, body).json()
            seen += [t["traceId"][:2] for t in page["traces"]]
            after = page["page"]["next"]
            if after is None:
                break
            cursor = after
        assert seen == expected
    conflict = query(queried, {"timeRange": WINDOW, "page": {"limit": 2, "after": cursor}})  # an asc cursor, desc query
    assert conflict.status_code == 409 and conflict.json()["code"] == "TRACE_QUERY_CURSOR_CONFLICT"
    for bad in ("not-a-real-cursor", base64.urlsafe_b64encode(b'["startedAt","desc","\\ud800",1]').decode()):
        response = query(queried, {"timeRange": WINDOW, "page": {"limit": 2, "after": bad}})
        assert response.status_code == 400 and response.json()["code"] == "TRACE_QUERY_CURSOR_MALFORMED"


def nested(depth: int) -> dict:
    pred = eq("status", "success")
    for _ in range(depth - 1):
        pred = {"op": "not", "arg": pred}
    return pred


HOSTILE = [  # body, the path of the field at fault
    ({"timeRange": {"from": 5}}, ["timeRange", "from"]),
    ({"timeRange": {"from": "yesterday"}}, ["timeRange", "from"]),
    ({"timeRange": "today"}, ["timeRange"]),
    ({"page": {"limit": "25"}}, ["page", "limit"]),
    ({"page": {"limit": 10 ** 40}}, ["page", "limit"]),
    ({"page": {"limit": 0}}, ["page", "limit"]),
    ({"page": {"limit": 25, "after": 7}}, ["page", "after"]),
    ({"page": {"limit": 25, "after": ["x"]}}, ["page", "after"]),
    ({"orderBy": {"field": "startedAt"}}, ["orderBy"]),
    ({"orderBy": [{"field": "name", "direction": "asc"}]}, ["orderBy", 0, "field"]),
    ({"orderBy": [{"field": "startedAt", "direction": 1}]}, ["orderBy", 0, "direction"]),
    ({"where": [1]}, ["where"]),
    ({"where": "status"}, ["where"]),
    ({"where": {"op": "eq", "left": {"path": 5}, "right": {"literal": "x"}}}, ["where", "left", "path"]),
    ({"where": {"op": "eq", "left": {"path": ["status"]}, "right": {"literal": "x"}}}, ["where", "left", "path"]),
    ({"where": {"op": "eq", "left": {"path": "nope"}, "right": {"literal": "x"}}}, ["where", "left", "path"]),
    ({"where": {"op": "exists", "path": {"path": "status"}}}, ["where", "path"]),
    ({"where": {"op": "eq", "left": {"path": "status"}, "right": {"literal": 5}}}, ["where", "right", "literal"]),
    ({"where": {"op": "eq", "left": {"path": "status"}, "right": {"literal": None}}}, ["where", "right", "literal"]),
    ({"where": {"op": "gt", "left": {"path": "startedAt"}, "right": {"literal": "yesterday"}}},
     ["where", "right", "literal"]),
    ({"where": {"spans": {"some": {"op": "gt", "left": {"path": "durationMs"}, "right": {"literal": "9"}}}}},
     ["where", "spans", "some", "right", "literal"]),
    ({"where": {"spans": {"some": {"op": "gt", "left": {"path": "durationMs"}, "right": {"literal": 2 ** 64}}}}},
     ["where", "spans", "some", "right", "literal"]),
    ({"where": {"op": "lt", "left": {"path": "status"}, "right": {"literal": "x"}}}, ["where", "left", "path"]),
    ({"where": {"op": "in", "value": {"path": "status"}, "set": ["a", 1]}}, ["where", "set", 1]),
    ({"where": {"op": "in", "value": {"path": "status"}, "set": []}}, ["where", "set"]),
    ({"where": {"op": "like", "left": {"path": "status"}, "right": {"literal": "x"}}}, ["where", "op"]),
    ({"where": {"op": "and", "args": []}}, ["where", "args"]),
    ({"where": {"op": "eq", "left": {"path": "status"}, "right": {"literal": "x" * 4097}}},
     ["where", "right", "literal"]),
    ({"where": {"op": "eq", "left": {"path": "metadata." + "k" * 120}, "right": {"literal": "x"}}},
     ["where", "left", "path"]),
    ({"where": {"spans": {"some": {"spans": {"some": eq("status", "x")}}}}}, ["where", "spans", "some"]),
    ({"where": nested(13)}, ["where", *["arg"] * 12]),
]


@pytest.mark.parametrize("body, path", HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_hostile_trace_queries_are_422_naming_the_field(queried, body: dict, path: list):
    response = query(queried, body)
    assert response.status_code == 422, response.text
    answer = response.json()
    assert answer["code"] == "TRACE_QUERY_INVALID" and answer["message"]
    assert answer["issues"][0]["path"] == path and answer["issues"][0]["message"]


def test_a_body_that_is_not_json_is_400_and_a_deep_one_is_refused(queried):
    for body in (b'{"where": ', b"[1]", b'"query"'):
        response = query(queried, body)
        assert response.status_code == 400 and response.json()["issues"][0]["field"] == "body"
    deep = b'{"where": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert 400 <= query(queried, deep).status_code < 500
    assert query(queried, {"where": nested(12)}).status_code == 200


def discover(client, route: str, **body) -> httpx.Response:
    return client.post(f"/traces/query/{route}", content=json.dumps({"timeRange": WINDOW, **body}),
                       headers={"content-type": "application/json"})


def test_query_fields_lists_the_registry_and_observed_metadata(queried):
    trace = discover(queried, "fields", predicateScope="trace").json()
    paths = [f["path"] for f in trace["canonicalFields"]]
    assert paths[:9] == ["traceId", "threadId", "resourceId", "startedAt", "endedAt", "entityName", "entityType",
                         "environment", "status"]
    assert {"path": "startedAt", "valueKind": "timestamp", "valueSuggestions": False,
            "operators": ["eq", "ne", "in", "notIn", "exists", "notExists", "lt", "lte", "gt", "gte"]
            } in trace["canonicalFields"]
    assert [(f["path"], f["occurrences"]) for f in trace["observedFields"]] == [
        ("metadata.region", 3), ("metadata.tier", 1)]  # "n" is a number: not a string field
    assert trace["observedFieldsTruncated"] is False
    one = discover(queried, "fields", predicateScope="trace", limit=1).json()
    assert [f["path"] for f in one["observedFields"]] == ["metadata.region"] and one["observedFieldsTruncated"]
    spans = discover(queried, "fields", predicateScope="spans", search="MOD").json()
    assert [f["path"] for f in spans["canonicalFields"]] == ["model"] and spans["observedFields"] == []
    assert discover(queried, "fields", predicateScope="scores").json()["canonicalFields"][0]["path"] == "scorerId"


def test_query_values_counts_and_ranks_suggestable_fields(queried):
    values = discover(queried, "values", predicateScope="trace", path="entityName").json()
    assert values == {"values": [{"value": "Chat Agent", "count": 2}, {"value": "Docs Agent", "count": 1}],
                      "valuesTruncated": False}
    models = discover(queried, "values", predicateScope="spans", path="model", limit=1).json()
    assert models == {"values": [{"value": "gpt-4o-mini", "count": 2}], "valuesTruncated": True}
    region = discover(queried, "values", predicateScope="trace", path="metadata.region", search="US").json()
    assert region["values"] == [{"value": "us-west-2", "count": 1}]
    before = {"from": "2024-01-01T00:00:00Z", "to": "2024-01-02T00:00:00Z"}
    empty = queried.post("/traces/query/values", json={"timeRange": before, "predicateScope": "trace",
                                                        "path": "entityName"}).json()
    assert empty == {"values": [], "valuesTruncated": False}


@pytest.mark.parametrize("route, body, path", [
    ("values", {"predicateScope": "trace", "path": "traceId"}, ["path"]),
    ("values", {"predicateScope": "trace", "path": 5}, ["path"]),
    ("values", {"predicateScope": "trace"}, ["path"]),
    ("fields", {"predicateScope": "everything"}, ["predicateScope"]),
    ("fields", {"predicateScope": "trace", "limit": 101}, ["limit"]),
    ("fields", {"predicateScope": "trace", "limit": 10 ** 30}, ["limit"]),
    ("fields", {"predicateScope": "trace", "search": "x" * 257}, ["search"]),
    ("fields", {"predicateScope": "trace", "timeRange": {"from": "2025-01-02T00:00:00Z", "to": "2025-01-01T00:00:00Z"}},
     ["timeRange"]),
    ("fields", {"predicateScope": "trace", "timeRange": {"from": "2025-01-01T00:00:00Z", "to": "2025-03-01T00:00:00Z"}},
     ["timeRange"]),
    ("fields", {"predicateScope": "trace", "timeRange": None}, ["timeRange"]),
])
def test_bad_discovery_requests_are_422_naming_the_field(queried, route: str, body: dict, path: list):
    response = discover(queried, route, **body)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "TRACE_QUERY_INVALID" and response.json()["issues"][0]["path"] == path


@pytest.mark.parametrize("route, params, field", [
    ("/traces", {"page": str(10 ** 30)}, "page"),
    ("/traces/light", {"page": str(2 ** 63)}, "page"),
    ("/traces", {"perPage": str(10 ** 30)}, "perPage"),
    ("/logs", {"page": str(2 ** 64)}, "page"),
    ("/scores", {"page": "1" + "0" * 4000}, "page"),  # thousands of digits
    ("/discovery/metric-label-values", {"metricName": "mastra_agent_duration_ms", "labelKey": "entityName",
                                        "limit": str(10 ** 30)}, "limit"),
])
def test_paging_integers_beyond_64_bits_are_400(queried, route: str, params: dict, field: str):
    response = queried.get(route, params=params)
    assert response.status_code == 400, response.text
    assert response.json()["issues"][0]["field"] == field


def test_lone_surrogates_never_reach_duckdb(queried):
    # the app's input guard repairs them in a body (U+FFFD); what it cannot see (inside a
    # cursor's base64) the trace query refuses itself, see the cursor test above
    literal = {"op": "eq", "left": {"path": "entityName"}, "right": {"literal": "Chat \ud800"}}
    assert found(queried, literal) == []
    assert found(queried, {"op": "eq", "left": {"path": "metadata.\udc00"}, "right": {"literal": "x"}}) == []
    response = discover(queried, "values", predicateScope="trace", path="entityName", search="\ud800")
    assert response.status_code == 200 and response.json()["values"] == []
