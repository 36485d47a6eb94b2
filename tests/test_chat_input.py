"""Bad input, authentication and provider failures on POST /api/chat, over real HTTP.

Each case checks the 4xx JSON shape and that nothing was written.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest

from dev_server.factory import create_app
from dev_server.llm import LiteLLMClient
from dev_server.llm.scripted import Reply, ScriptedModel
from dev_server.settings import Settings
from tests.kit.local_http import local_http
from tests.support import REPO, LiveApp, run_node, sqlite_rows, user_message

GOOD = {"id": "c", "trigger": "submit-message", "messages": [user_message("u1", "hi")]}


@pytest.fixture
def live(settings: Settings):
    with LiveApp(create_app("gateway", settings)) as server:
        yield server


def counts(db: Path) -> tuple[int, int]:
    return (sqlite_rows(db, "SELECT count(*) FROM threads")[0][0],
            sqlite_rows(db, "SELECT count(*) FROM messages")[0][0])


BAD_BODIES = {
    "malformed json": (b'{"messages": [', 400, "body"),
    "not an object": (b"[1, 2]", 400, "body"),
    "missing messages": (json.dumps({"id": "c"}).encode(), 400, "messages"),
    "empty messages": (json.dumps({**GOOD, "messages": []}).encode(), 400, "messages"),
    "last not from user": (json.dumps({**GOOD, "messages": [
        user_message("u1", "hi"),
        {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "x"}]}]}).encode(),
        400, "messages"),
    "unknown role": (json.dumps({**GOOD, "messages": [{"id": "u", "role": "robot", "parts": []}]}).encode(), 400,
                     "messages.0.role"),
    "parts not a list": (json.dumps({**GOOD, "messages": [{"id": "u", "role": "user", "parts": "hi"}]}).encode(),
                         400, "messages.0.parts"),
    "text part without text": (json.dumps({**GOOD, "messages": [{"id": "u", "role": "user",
                                                                  "parts": [{"type": "text"}]}]}).encode(),
                               400, "messages.0.parts"),
    "unknown trigger": (json.dumps({**GOOD, "trigger": "resume"}).encode(), 400, "trigger"),
    "numeric conversationId": (json.dumps({**GOOD, "conversationId": 42}).encode(), 400, "conversationId"),
    "long conversationId": (json.dumps({**GOOD, "conversationId": "x" * 257}).encode(), 400, "conversationId"),
    "control chars in conversationId": (json.dumps({**GOOD, "conversationId": "a\nb"}).encode(), 400,
                                        "conversationId"),
    "non-string agentId": (json.dumps({**GOOD, "agentId": ["chat-agent"]}).encode(), 400, "agentId"),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_bad_bodies_are_400_with_issues_and_write_nothing(live, settings: Settings, case: str):
    body, status, field = BAD_BODIES[case]
    response = local_http.post(f"{live.url}/api/chat", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    payload = response.json()
    assert payload["error"] == "Invalid request body"
    assert any(issue["field"] == field for issue in payload["issues"]), payload
    assert counts(settings.resolved_data_dir / "dev-server.db") == (0, 0)


def test_unknown_agent_is_404(live, settings: Settings):
    response = local_http.post(f"{live.url}/api/chat", json={**GOOD, "agentId": "nobody", "conversationId": "x"})
    assert response.status_code == 404 and response.json() == {"error": "Agent with id nobody not found"}
    assert local_http.post(f"{live.url}/api/agents/nobody/chat", json=GOOD).status_code == 404
    assert counts(settings.resolved_data_dir / "dev-server.db") == (0, 0)


def test_oversized_body_is_413(data_dir: Path):
    settings = Settings(data_dir=data_dir, max_body_bytes=2048)
    with LiveApp(create_app("gateway", settings)) as live:
        big = {**GOOD, "messages": [user_message("u1", "x" * 5000)]}
        response = local_http.post(f"{live.url}/api/chat", json=big)
        assert response.status_code == 413 and response.json() == {"error": "Request body too large"}

        def chunked():
            yield json.dumps(big).encode()

        response = local_http.post(f"{live.url}/api/chat", content=chunked(),
                                   headers={"content-type": "application/json"})
        assert response.status_code == 413
        assert counts(data_dir / "dev-server.db") == (0, 0)


def test_sdk_surfaces_a_4xx_as_an_error(live):
    result = run_node("chat_client.mjs", {"api": f"{live.url}/api/chat", "messages": [user_message("u", "hi")],
                                          "body": {"conversationId": "x" * 300}})
    assert result["ok"] is False and "conversationId" in result["error"] and result["status"] == 400


@pytest.fixture
def authed(data_dir: Path):
    settings = Settings(data_dir=data_dir, auth_tokens="tok-alice=alice,tok-bob=bob")
    with LiveApp(create_app("gateway", settings)) as server:
        yield server


def chat(server, token: str | None, conversation: str, text: str, **extra) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    body = {**GOOD, "conversationId": conversation, "messages": [user_message(f"{conversation}-{text}", text)], **extra}
    return local_http.post(f"{server.url}/api/chat", json=body, headers=headers, timeout=30)


def test_auth_forces_the_resource_and_hides_foreign_threads(authed, data_dir: Path):
    db = data_dir / "dev-server.db"
    assert chat(authed, None, "conv-a", "hi").status_code == 401
    assert chat(authed, "wrong", "conv-a", "hi").status_code == 401

    response = chat(authed, "tok-alice", "conv-a", "my name is Alice", resourceId="user:bob", resource="user:bob")
    assert response.status_code == 200
    assert sqlite_rows(db, "SELECT resource_id FROM threads WHERE id = 'conv-a'") == [("user:alice",)]

    foreign = chat(authed, "tok-bob", "conv-a", "what is her name?")
    assert foreign.status_code == 404 and foreign.json() == {"error": "Thread not found"}
    assert sqlite_rows(db, "SELECT count(*) FROM messages WHERE thread_id = 'conv-a'") == [(2,)]
    assert chat(authed, "tok-bob", "conv-b", "hello").status_code == 200
    assert sqlite_rows(db, "SELECT resource_id FROM threads WHERE id = 'conv-b'") == [("user:bob",)]



def test_a_foreign_thread_id_is_refused_without_queueing_behind_the_owners_reply(authed, data_dir: Path):
    """Bob naming a thread while Alice's reply is streaming on it gets his 404 at once, not
    after her reply: the owner check runs before waiting on the thread's lock or lease."""
    assert chat(authed, "tok-alice", "conv-q", "hello").status_code == 200
    body = {**GOOD, "conversationId": "conv-q", "messages": [user_message("q-slow", "tell me a story [[slower]]")]}
    alice_done = threading.Event()
    with local_http.stream("POST", f"{authed.url}/api/chat", json=body, headers={"authorization": "Bearer tok-alice"},
                      timeout=60) as alice:
        assert alice.status_code == 200
        chunks = alice.iter_bytes()
        next(chunks)  # her turn holds the thread now

        def drain() -> None:
            for _ in chunks:
                pass
            alice_done.set()

        reader = threading.Thread(target=drain)
        reader.start()
        foreign = chat(authed, "tok-bob", "conv-q", "me too")
        bob_first = not alice_done.is_set()
        reader.join(60)
    assert foreign.status_code == 404 and foreign.json() == {"error": "Thread not found"}
    assert bob_first, "Bob's refusal waited for Alice's reply to finish"
    assert sqlite_rows(data_dir / "dev-server.db", "SELECT count(*) FROM messages WHERE thread_id = 'conv-q'") == [(4,)]


# How litellm's exceptions become these kinds (and that a key in them is never repeated) is
# tests/test_llm.py's subject; here the route's answer to each kind, scripted at the seam.
@pytest.mark.parametrize("kind, status", [("rate_limit", 429), ("auth", 502), ("timeout", 504), ("connection", 502)])
def test_provider_errors_before_streaming_are_json_and_keep_the_users_message(data_dir: Path, kind: str, status: int):
    llm = ScriptedModel([Reply(error=kind)], local=False)
    with LiveApp(create_app("gateway", Settings(data_dir=data_dir), llm=llm)) as live:
        response = local_http.post(f"{live.url}/api/chat", json={**GOOD, "conversationId": "p1"}, timeout=30)
    assert response.status_code == status, response.text
    assert response.json()["kind"] == kind and "sk-secret" not in response.text
    assert sqlite_rows(data_dir / "dev-server.db", "SELECT id, role FROM messages") == [("u1", "user")]


def test_a_provider_model_streams_through_litellm_with_a_key(data_dir: Path):
    llm = LiteLLMClient(environ={"OPENAI_API_KEY": "sk-test"}, extra_kwargs={"mock_response": "Hello from openai"})
    with LiveApp(create_app("gateway", Settings(data_dir=data_dir), llm=llm)) as live:
        result = run_node("chat_client.mjs", {"api": f"{live.url}/api/chat", "messages": [user_message("u", "hi")],
                                              "body": {"conversationId": "k1"}})
    assert result["ok"], result["error"]
    assert result["chunks"][0]["messageMetadata"]["local"] is False
    assert "".join(p.get("text", "") for p in result["message"]["parts"]) == "Hello from openai"


def test_openapi_documents_the_chat_body_as_default_chat_transport_sends_it(settings: Settings):
    schema = create_app("gateway", settings).openapi()
    for path in ("/api/chat", "/api/agents/{agent_id}/chat"):
        body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/ChatRequest"}
    chat_request = schema["components"]["schemas"]["ChatRequest"]
    assert set(chat_request["properties"]) == {"id", "messages", "trigger", "messageId", "conversationId", "agentId"}
    assert chat_request["required"] == ["messages"]
    assert set(schema["components"]["schemas"]["UIMessage"]["required"]) == {"id", "role", "parts"}
    assert "/api/agents/{agent_id}/chat/{chat_id}/stream" in schema["paths"]
    studio = create_app("studio", settings).openapi()
    for route, model in (("stream", "AgentRunBody"), ("generate", "AgentRunBody"),
                         ("send-message", "SendMessageBody"), ("threads/subscribe", "ThreadRef"),
                         ("threads/abort", "AbortBody")):
        body = studio["paths"][f"/api/agents/{{agent_id}}/{route}"]["post"]["requestBody"]
        assert body["content"]["application/json"]["schema"] == {"$ref": f"#/components/schemas/{model}"}, route


def test_streaming_never_imports_the_agents_layer():
    import ast

    for module in (REPO / "dev_server" / "streaming").glob("*.py"):
        tree = ast.parse(module.read_text())
        imported = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
        imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        assert not [name for name in imported if name.startswith("dev_server.agents")], module
