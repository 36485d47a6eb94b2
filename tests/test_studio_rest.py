"""The studio's Mastra REST API over real HTTP: shapes, encodings, bad input, isolation.

The real ``@mastra/client-js`` and the real Studio are judged in test_studio_client_js.py
and test_studio_ui.py; this file covers what those clients never send.
"""

from __future__ import annotations

import json

import httpx
import pytest

from dev_server.settings import Settings
from tests.kit.local_http import local_http
from tests.kit.servers import in_process, server_fixture
from tests.support import user_message

studio = server_fixture("studio", scope="function", data="data_dir", inprocess=True, client=True)


def make_thread(client: httpx.Client, thread_id: str, resource: str = "r1", **extra) -> dict:
    response = client.post("/api/memory/threads?agentId=chat-agent",
                           json={"resourceId": resource, "threadId": thread_id, **extra})
    assert response.status_code == 200, response.text
    return response.json()


def save(client: httpx.Client, thread_id: str, resource: str, count: int) -> list[str]:
    ids = [f"{thread_id}-m{i}" for i in range(count)]
    messages = [{"id": mid, "role": "user" if i % 2 == 0 else "assistant", "type": "text", "content": f"text {i}",
                 "threadId": thread_id, "resourceId": resource, "createdAt": f"2026-01-01T00:00:{i:02d}.000Z"}
                for i, mid in enumerate(ids)]
    response = client.post("/api/memory/save-messages?agentId=chat-agent", json={"messages": messages})
    assert response.status_code == 200, response.text
    return ids


def test_root_probe_and_shell_routes_answer(studio):
    assert studio.get("/").status_code == 200
    assert studio.get("/api/auth/capabilities").json() == {"enabled": False, "login": None}
    assert "calculator" in studio.get("/api/tools", params={"requestContext": "e30="}).json()
    for path, body in [("/api/workflows", {}), ("/api/processors", {}), ("/api/scores/scorers", {}),
                       ("/api/mcp/v0/servers", {"servers": [], "total_count": 0, "next": None}),
                       ("/api/workspaces", {"workspaces": []}), ("/api/agents/providers", {"providers": []}),
                       ("/api/editor/builder/settings", {"enabled": False, "modelPolicy": {"active": False}}),
                       ("/api/editor/builder/models/available", {"providers": []}),
                       ("/api/channels/platforms", []), ("/api/experiments/review-summary", {"counts": []}),
                       ("/api/agents/chat-agent/voice/speakers", [])]:
        response = studio.get(path, params={"requestContext": "e30="})
        assert response.status_code == 200 and response.json() == body, path
    packages = studio.get("/api/system/packages").json()
    assert packages["observabilityEnabled"] is True and packages["observabilityStorageCapabilities"]["metrics"] is True


@pytest.mark.parametrize(("path", "key", "per_page", "paged_apart"), [
    ("/api/datasets", "datasets", 10, True), ("/api/experiments", "experiments", 10, True),
    ("/api/stored/prompt-blocks", "promptBlocks", 100, False)])
def test_the_evaluation_and_prompt_lists_answer_mastras_empty_pages(studio, path, key, per_page, paged_apart):
    """Issue 30: the Studio's Datasets, Experiments, Review Queue, Evaluation, Prompts and
    Inbox pages load these; Mastra with no data answers an empty page echoing the paging."""

    def page(page: int, size: int) -> dict:
        paging = {"total": 0, "page": page, "perPage": size, "hasMore": False}
        return {key: [], "pagination": paging} if paged_apart else {key: [], **paging}

    assert studio.get(path, params={"requestContext": "e30="}).json() == page(0, per_page)
    assert studio.get(path, params={"page": "2", "perPage": "0"}).json() == page(2, 0)
    for bad in ({"page": "-1"}, {"perPage": "2.5"}, {"page": "x"}):
        response = studio.get(path, params=bad)
        assert response.status_code == 400, bad
        assert response.json()["error"] == "Invalid query parameters"
        assert response.json()["issues"][0]["field"] == next(iter(bad))


def test_prompt_blocks_and_experiments_refuse_a_filter_value_mastra_does_not_know(studio):
    assert studio.get("/api/stored/prompt-blocks", params={"status": "draft"}).status_code == 200
    assert studio.get("/api/experiments", params={"targetType": "agent"}).status_code == 200
    for path, field in (("/api/stored/prompt-blocks", "status"), ("/api/experiments", "targetType")):
        response = studio.get(path, params={field: "bogus"})
        assert response.status_code == 400 and response.json()["issues"][0]["field"] == field


@pytest.mark.parametrize(("environment", "is_dev"), [("development", True), ("production", False)])
def test_system_packages_report_the_studio_build_served(tmp_path, environment, is_dev):
    ui = tmp_path / "studio-ui"
    ui.mkdir()
    (ui / "VERSION").write_text("mastra@1.31.0\n")
    settings = Settings(data_dir=tmp_path / "data", studio_ui_dir=ui, environment=environment)
    with in_process("studio", settings) as server:
        body = local_http.get(f"{server.url}/api/system/packages", timeout=10).json()
        (ui / "VERSION").unlink()  # no build served: no Mastra package here
        without = local_http.get(f"{server.url}/api/system/packages", timeout=10).json()["packages"]
    # the Studio's version badge shows the first package's version, and only when isDev
    assert body["packages"] == [{"name": "mastra", "version": "1.31.0"}]
    assert body["isDev"] is is_dev and body["cmsEnabled"] is False
    assert without == []


def test_cors_reflects_origin_and_requested_headers(studio):
    preflight = studio.options("/api/agents", headers={"Origin": "http://localhost:3000",
                                                       "Access-Control-Request-Method": "GET",
                                                       "Access-Control-Request-Headers": "x-custom, authorization"})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert preflight.headers["access-control-allow-credentials"] == "true"
    assert preflight.headers["access-control-allow-headers"] == "x-custom, authorization"
    simple = studio.get("/api/agents", headers={"Origin": "http://localhost:3000"})
    assert simple.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "Origin" in simple.headers["vary"]


def test_agents_are_keyed_by_id_with_memory_support_flags(studio):
    agents = studio.get("/api/agents").json()
    assert set(agents) == {"chat-agent", "docs-agent", "orchestrator-agent"}
    assert agents["chat-agent"]["modelVersion"] == "v2" and agents["chat-agent"]["supportsMemory"] is True
    assert agents["orchestrator-agent"]["supportsMemory"] is False
    assert "id" not in studio.get("/api/agents/chat-agent").json()
    missing = studio.get("/api/agents/nope")
    assert missing.status_code == 404 and missing.json() == {"error": "Agent with id nope not found"}


@pytest.mark.parametrize("params", [
    {"orderBy": json.dumps({"field": "updatedAt", "direction": "ASC"})},
    {"orderBy[field]": "updatedAt", "orderBy[direction]": "ASC"},
])
def test_thread_list_accepts_json_and_bracket_order(studio, params):
    for i in range(3):
        make_thread(studio, f"order-{i}")
    listed = studio.get("/api/memory/threads", params={"resourceId": "r1", "agentId": "chat-agent", **params}).json()
    assert [t["id"] for t in listed["threads"]] == ["order-0", "order-1", "order-2"]
    newest_first = studio.get("/api/memory/threads", params={"resourceid": "r1", "perPage": 2}).json()
    assert [t["id"] for t in newest_first["threads"]] == ["order-2", "order-1"]
    assert (newest_first["total"], newest_first["hasMore"]) == (3, True)


def test_messages_window_is_chronological_and_cursor_pages(studio):
    make_thread(studio, "paged")
    ids = save(studio, "paged", "r1", 10)
    page = studio.get("/api/memory/threads/paged/messages",
                      params={"agentId": "chat-agent", "perPage": 4,
                              "orderBy": json.dumps({"field": "createdAt", "direction": "DESC"})}).json()
    assert [m["id"] for m in page["messages"]] == ids[6:]
    assert page["total"] == 10 and page["hasMore"] is True and page["messages"][0]["content"]["format"] == 2
    after = studio.get("/api/memory/threads/paged/messages", params={"after": ids[2], "perPage": 3}).json()
    assert [m["id"] for m in after["messages"]] == ids[3:6]
    before = studio.get("/api/memory/threads/paged/messages", params={"before": ids[2]}).json()
    assert [m["id"] for m in before["messages"]] == ids[:2]
    roles = studio.get("/api/memory/threads/paged/messages",
                       params={"filter": json.dumps({"roles": ["assistant"]}), "perPage": 100}).json()
    assert all(m["role"] == "assistant" for m in roles["messages"]) and roles["total"] == 5


BAD_REQUESTS = [
    ("GET", "/api/memory/threads?page=-1", 400, "page"),
    ("GET", "/api/memory/threads?perPage=5000", 400, "perPage"),
    ("GET", "/api/memory/threads?perPage=ten", 400, "perPage"),
    ("GET", "/api/memory/threads?orderBy={bad json", 400, "orderBy"),
    ("GET", "/api/memory/threads?orderBy[field]=title", 400, "orderBy.field"),
    ("GET", "/api/memory/threads?orderBy[direction]=UP", 400, "orderBy.direction"),
    ("GET", "/api/memory/threads?metadata=[1]", 400, "metadata"),
    ("GET", "/api/memory/threads/none-such", 404, None),
    ("GET", "/api/memory/threads/none-such/messages", 404, None),
    ("DELETE", "/api/memory/threads/none-such?agentId=chat-agent", 404, None),
    ("PATCH", "/api/memory/threads/none-such?agentId=chat-agent", 404, None),
    ("GET", "/api/memory/status", 400, "agentId"),
    ("GET", "/api/memory/search?agentId=chat-agent&resourceId=r1", 400, "searchQuery"),
    ("GET", "/api/memory/search?agentId=chat-agent&searchQuery=x&resourceId=r1&limit=0", 400, "limit"),
    ("GET", "/api/memory/observational-memory?agentId=docs-agent", 400, None),  # docs-agent has no OM
    ("POST", "/api/memory/threads?agentId=nope", 404, None),
    ("POST", "/api/agents/nope/stream", 404, None),
    ("GET", "/api/observability/traces?perPage=500", 400, "perPage"),
    ("GET", "/api/observability/traces?direction=sideways", 400, "direction"),
    ("GET", "/api/observability/logs?timestamp={oops", 400, "timestamp"),
    ("GET", "/api/observability/traces/none-such", 404, None),
    ("GET", "/api/logs", 400, "transportId"),
]


@pytest.mark.parametrize("method, path, status, field", BAD_REQUESTS)
def test_bad_requests_get_mastra_shaped_4xx(studio, method, path, status, field):
    response = studio.request(method, path, content=b"{}" if method in ("POST", "PATCH") else None,
                              headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["error"], str)
    if field:
        assert any(issue["field"] == field for issue in body["issues"]), body


BAD_BODIES = [
    ("/api/agents/chat-agent/stream", b"{not json", "body"),
    ("/api/agents/chat-agent/generate", json.dumps({"messages": []}).encode(), "messages"),
    ("/api/agents/chat-agent/generate", json.dumps({"messages": "hi", "memory": {"thread": ""}}).encode(),
     "memory.thread"),
    ("/api/agents/chat-agent/generate", json.dumps({"messages": [{"role": "robot", "content": "x"}]}).encode(),
     "messages.0.role"),
    ("/api/agents/chat-agent/generate", json.dumps({"messages": [{"role": "user", "content": 5}]}).encode(),
     "messages.0.content"),
    ("/api/agents/chat-agent/send-message", json.dumps({"message": "hi"}).encode(), "threadId"),
    ("/api/memory/threads?agentId=chat-agent", json.dumps({"title": 3, "resourceId": "r"}).encode(), "title"),
    ("/api/memory/threads?agentId=chat-agent", json.dumps({"title": "x"}).encode(), "resourceId"),
    ("/api/memory/save-messages?agentId=chat-agent", json.dumps({"messages": "x"}).encode(), "messages"),
    ("/api/memory/save-messages?agentId=chat-agent", json.dumps({"messages": [{"role": "user"}]}).encode(),
     "messages.0.threadId"),
    ("/api/memory/messages/delete", json.dumps({"messageIds": [1, 2]}).encode(), "messageIds"),
    ("/api/observability/traces/query", b"[1]", "body"),
]


@pytest.mark.parametrize("path, body, field", BAD_BODIES)
def test_bad_bodies_get_400_with_the_field(studio, settings: Settings, path, body, field):
    response = studio.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert any(issue["field"] == field for issue in response.json()["issues"]), response.json()
    assert studio.get("/api/memory/threads").json()["total"] == 0


def test_trace_query_bad_predicates_and_cursor(studio):
    bad_op = studio.post("/api/observability/traces/query", json={"where": {"op": "regex"}})
    assert bad_op.status_code == 422 and bad_op.json()["code"] == "TRACE_QUERY_INVALID"
    bad_field = studio.post("/api/observability/traces/query",
                            json={"where": {"op": "eq", "left": {"path": "password"}, "right": {"literal": 1}}})
    assert bad_field.status_code == 422
    bad_cursor = studio.post("/api/observability/traces/query", json={"page": {"limit": 5, "after": "!!"}})
    assert bad_cursor.status_code == 400 and bad_cursor.json()["code"] == "TRACE_QUERY_CURSOR_MALFORMED"
    ok = studio.post("/api/observability/traces/query", json={
        "timeRange": {"from": "2026-01-01T00:00:00Z", "to": "2030-01-01T00:00:00Z"},
        "orderBy": [{"field": "startedAt", "direction": "desc"}], "page": {"limit": 25, "after": None},
        "where": {"op": "and", "args": [
            {"op": "eq", "left": {"path": "entityType"}, "right": {"literal": "agent"}},
            {"spans": {"some": {"op": "eq", "left": {"path": "entityId"}, "right": {"literal": "chat-agent"}}}}]}})
    assert ok.status_code == 200 and ok.json() == {"traces": [], "page": {"next": None}}


def test_working_memory_answers_for_unknown_threads_and_refuses_when_disabled(studio):
    missing = studio.get("/api/memory/threads/not-yet/working-memory", params={"agentId": "chat-agent"})
    assert missing.status_code == 200 and missing.json()["threadExists"] is False
    make_thread(studio, "wm")
    assert studio.get("/api/memory/threads/wm/working-memory").json()["threadExists"] is True
    refused = studio.post("/api/memory/threads/wm/working-memory?agentId=chat-agent", json={"workingMemory": "x"})
    assert refused.status_code == 400


def test_search_clone_and_delete(studio):
    make_thread(studio, "s1", title="first")
    save(studio, "s1", "r1", 4)
    hits = studio.get("/api/memory/search", params={"agentId": "chat-agent", "resourceId": "r1",
                                                    "searchQuery": "TEXT 3"}).json()
    assert [r["id"] for r in hits["results"]] == ["s1-m3"] and hits["results"][0]["threadTitle"] == "first"
    cloned = studio.post("/api/memory/threads/s1/clone?agentId=chat-agent", json={"title": "fork"}).json()
    assert cloned["thread"]["title"] == "fork" and len(cloned["clonedMessages"]) == 4
    deleted = studio.post("/api/memory/messages/delete?agentId=chat-agent", json={"messageIds": [{"id": "s1-m0"}]})
    assert deleted.json() == {"success": True, "message": "1 message deleted successfully"}
    assert studio.delete("/api/memory/threads/s1?agentId=chat-agent").json() == {"result": "Thread deleted"}
    assert studio.get("/api/memory/threads/s1/messages").status_code == 404


def test_the_agent_id_is_an_alias_of_the_agents_resource(studio):
    """The Studio asks with resourceId = agentId; gateway threads live in ``ai-chat``."""
    make_thread(studio, "from-gateway", resource="ai-chat")
    listed = studio.get("/api/memory/threads", params={"resourceId": "chat-agent", "agentId": "chat-agent"}).json()
    assert [t["id"] for t in listed["threads"]] == ["from-gateway"]
    assert studio.get("/api/memory/threads/from-gateway",
                      params={"resourceId": "chat-agent", "agentId": "chat-agent"}).status_code == 200


def test_split_brain_gateway_writes_are_readable_on_the_studio_at_once(settings: Settings):
    with in_process("gateway", settings) as gateway, in_process("studio", settings) as studio:
        with local_http.stream("POST", f"{gateway.url}/api/chat", timeout=30,
                          json={"id": "c", "conversationId": "shared-1",
                                "messages": [user_message("g1", "hello from the frontend")]}) as response:
            assert response.status_code == 200
            response.read()
        listed = local_http.get(f"{studio.url}/api/memory/threads",
                           params={"resourceId": "chat-agent", "agentId": "chat-agent"}).json()
        assert "shared-1" in [t["id"] for t in listed["threads"]]
        messages = local_http.get(f"{studio.url}/api/memory/threads/shared-1/messages",
                             params={"agentId": "chat-agent"}).json()["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant"]
        # (chat-agent's Observational Memory stores each part with its token estimate, as Mastra does)
        [part] = messages[0]["content"]["parts"]
        assert (part["type"], part["text"]) == ("text", "hello from the frontend")
        assert part["providerMetadata"]["mastra"]["tokenEstimate"]["tokens"] == 5


@pytest.fixture
def authed(data_dir):
    settings = Settings(data_dir=data_dir, auth_tokens="tok-a=alice,tok-b=bob")
    with in_process("studio", settings) as server:
        yield server


def test_with_auth_every_route_stays_inside_the_principals_resource(authed):
    with httpx.Client(base_url=authed.url, headers={"authorization": "Bearer tok-a"}, timeout=30) as alice, \
            httpx.Client(base_url=authed.url, headers={"authorization": "Bearer tok-b"}, timeout=30) as bob:
        check_isolation(authed, alice, bob)


def check_isolation(authed, alice: httpx.Client, bob: httpx.Client) -> None:
    assert local_http.get(f"{authed.url}/api/memory/threads").status_code == 401
    assert local_http.get(f"{authed.url}/api/auth/capabilities").status_code == 401  # only /health and files are public
    assert alice.get("/api/auth/capabilities").json()["enabled"] is True

    made = alice.post("/api/memory/threads?agentId=chat-agent", json={"resourceId": "user:bob", "threadId": "a1"})
    assert made.json()["resourceId"] == "user:alice"  # a spoofed resource is ignored
    save(alice, "a1", "user:bob", 2)
    assert alice.post("/api/agents/chat-agent/generate",
                      json={"messages": "hi", "memory": {"thread": "a2", "resource": "user:bob"}}).status_code == 200

    assert bob.get("/api/memory/threads").json()["threads"] == []  # no resource: still only his own
    assert bob.get("/api/memory/threads", params={"resourceId": "user:alice"}).json()["threads"] == []
    for method, path in [("GET", "/api/memory/threads/a1"), ("GET", "/api/memory/threads/a1/messages"),
                         ("DELETE", "/api/memory/threads/a1"), ("PATCH", "/api/memory/threads/a1"),
                         ("POST", "/api/memory/threads/a1/clone")]:
        response = bob.request(method, path, json={})
        assert response.status_code == 404 and response.json() == {"error": "Thread not found"}, path
    assert bob.get("/api/memory/threads/a1/working-memory").json()["threadExists"] is False
    assert bob.post("/api/memory/messages/delete", json={"messageIds": ["a1-m0"]}).status_code == 404
    assert bob.get("/api/memory/search", params={"agentId": "chat-agent", "searchQuery": "text",
                                                 "resourceId": "user:alice"}).json()["results"] == []
    stolen = bob.post("/api/agents/chat-agent/stream", json={"messages": "hi", "memory": {"thread": "a1"}})
    assert stolen.status_code == 404
    mine = alice.get("/api/memory/threads").json()
    assert sorted(t["id"] for t in mine["threads"]) == ["a1", "a2"]
    assert len(alice.get("/api/memory/threads/a1/messages").json()["messages"]) == 2
