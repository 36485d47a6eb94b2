"""The Studio's memory routes over real HTTP: Mastra's resource semantics without losing the
gateway's threads (issue 8.9), ownership on every write (9.2), typed bodies (8.13)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from dev_server.settings import Settings
from tests.kit.chat import chat_turn
from tests.kit.servers import in_process, server_fixture
from tests.support import sqlite_rows, user_message

studio = server_fixture("studio", scope="function", data="data_dir", inprocess=True, client=True)


def gateway_turn(url: str, agent_id: str, conversation: str, text: str) -> None:
    result = chat_turn(url, [user_message(f"{conversation}-u", text)],
                       body={"agentId": agent_id, "conversationId": conversation}, chat_id="c", timeout=30)
    assert result["status"] == 200


def test_literal_resources_and_each_agents_own_threads(settings: Settings, data_dir: Path):
    with in_process("gateway", settings) as gateway, in_process("studio", settings) as server, \
            httpx.Client(base_url=server.url, timeout=30) as studio:
        gateway_turn(gateway.url, "chat-agent", "front-chat", "hello chat")
        gateway_turn(gateway.url, "docs-agent", "front-docs", "hello docs")
        made = studio.post("/api/memory/threads?agentId=chat-agent",
                           json={"resourceId": "chat-agent", "threadId": "studio-chat"}).json()
        assert made["resourceId"] == "chat-agent"  # stored as given, not rewritten to ai-chat
        assert sqlite_rows(data_dir / "dev-server.db", "SELECT id, resource_id, agent_id FROM threads ORDER BY id") == [
            ("front-chat", "ai-chat", "chat-agent"), ("front-docs", "ai-chat", "docs-agent"),
            ("studio-chat", "chat-agent", "chat-agent")]

        def sidebar(agent_id: str) -> set[str]:
            body = studio.get("/api/memory/threads", params={"resourceId": agent_id, "agentId": agent_id}).json()
            assert body["total"] == len(body["threads"])
            return {t["id"] for t in body["threads"]}

        assert sidebar("chat-agent") == {"front-chat", "studio-chat"}
        assert sidebar("docs-agent") == {"front-docs"}
        scope = {"resourceId": "docs-agent", "agentId": "docs-agent"}
        assert studio.get("/api/memory/threads/front-chat", params=scope).status_code == 404
        assert studio.get("/api/memory/threads/front-docs/messages", params=scope).status_code == 200
        hits = studio.get("/api/memory/search", params={**scope, "searchQuery": "hello"}).json()["results"]
        assert {h["threadId"] for h in hits} == {"front-docs"}
        assert studio.get("/api/memory/threads", params={"resourceId": "ai-chat"}).json()["total"] == 2

        # the Studio continues the frontend's conversation with resource = agent id
        going_on = studio.post("/api/agents/chat-agent/generate", json={
            "messages": "and now?", "memory": {"thread": "front-chat", "resource": "chat-agent"}})
        assert going_on.status_code == 200, going_on.text
        assert sqlite_rows(data_dir / "dev-server.db", "SELECT DISTINCT resource_id FROM messages"
                                                       " WHERE thread_id = 'front-chat'") == [("ai-chat",)]
        assert studio.get("/api/memory/threads/front-chat/messages", params={"agentId": "chat-agent"}).json()[
            "total"] == 4
        other_agents = studio.post("/api/agents/chat-agent/generate", json={
            "messages": "hi", "memory": {"thread": "front-docs", "resource": "chat-agent"}})
        assert other_agents.status_code == 404

        assert studio.delete("/api/memory/threads/front-docs", params=scope).json() == {"result": "Thread deleted"}
        assert sidebar("docs-agent") == set()


def test_hostile_search_queries_are_answered(studio):
    studio.post("/api/memory/threads?agentId=chat-agent", json={"resourceId": "r1", "threadId": "t"})
    studio.post("/api/memory/save-messages?agentId=chat-agent", json={"messages": [
        {"id": "m1", "role": "user", "content": 'say "hi" (now) OR later*', "threadId": "t", "resourceId": "r1"}]})
    for text in ['"hi"', "(now) OR", "later*", '"', "NEAR(", "a", "AND"]:
        response = studio.get("/api/memory/search", params={"agentId": "chat-agent", "resourceId": "r1",
                                                             "searchQuery": text})
        assert response.status_code == 200, (text, response.text)
    found = studio.get("/api/memory/search", params={"agentId": "chat-agent", "resourceId": "r1",
                                                      "searchQuery": '"hi" (now)'}).json()
    assert [r["id"] for r in found["results"]] == ["m1"] and found["results"][0]["content"].startswith("say")


@pytest.mark.parametrize("item", [
    {"role": "user", "threadId": "t", "content": [1, 2]},
    {"role": "user", "threadId": "t", "content": {"format": 2, "parts": [{"type": "text", "text": 5}]}},
    {"role": "user", "threadId": "t", "parts": [{"text": "no type"}]},
    {"role": "robot", "threadId": "t", "content": "x"},
    {"role": "user", "threadId": 7, "content": "x"},
])
def test_save_messages_with_wrong_types_is_a_400_and_writes_nothing(studio, settings: Settings, item):
    response = studio.post("/api/memory/save-messages?agentId=chat-agent",
                           json={"messages": [{"id": "ok", "role": "user", "threadId": "t", "content": "fine"}, item]})
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "Invalid request body" and body["issues"][0]["field"].startswith("messages.1")
    assert sqlite_rows(settings.resolved_data_dir / "dev-server.db", "SELECT count(*) FROM messages") == [(0,)]


def test_a_thread_without_a_resource_is_refused_before_anything_is_stored(studio):
    """As Mastra's server answers it (and what bench/versus_mastra.py measures as the creation
    route's cost without its write): a 400 naming the field, no thread made."""
    refused = studio.post("/api/memory/threads?agentId=chat-agent", json={"threadId": "t-none", "title": "t"})
    assert refused.status_code == 400
    assert refused.json()["issues"] == [{"field": "resourceId", "message": "resourceId is required"}]
    assert studio.get("/api/memory/threads/t-none", params={"agentId": "chat-agent"}).status_code == 404


def test_transfer_moves_a_thread(studio):
    studio.post("/api/memory/threads?agentId=chat-agent", json={"resourceId": "r1", "threadId": "t"})
    moved = studio.post("/api/memory/threads/t/transfer", json={"resourceId": "r2"}).json()
    assert moved["resourceId"] == "r2"
    assert studio.post("/api/memory/threads/t/transfer", json={}).status_code == 400


@pytest.fixture
def two_users(data_dir: Path):
    settings = Settings(data_dir=data_dir, auth_tokens="ta=alice,tb=bob")
    with in_process("studio", settings) as server, \
            httpx.Client(base_url=server.url, headers={"authorization": "Bearer ta"}, timeout=30) as alice, \
            httpx.Client(base_url=server.url, headers={"authorization": "Bearer tb"}, timeout=30) as bob:
        yield alice, bob, data_dir / "dev-server.db"


def snapshot(db: Path) -> tuple:
    return (sqlite_rows(db, "SELECT * FROM threads ORDER BY id"),
            sqlite_rows(db, "SELECT * FROM messages ORDER BY seq"))


def test_creating_a_thread_over_another_users_id_writes_nothing(two_users):
    alice, bob, db = two_users
    first = alice.post("/api/memory/threads?agentId=chat-agent", json={"threadId": "a1", "title": "hers"}).json()
    before = snapshot(db)
    taken = bob.post("/api/memory/threads?agentId=chat-agent", json={"threadId": "a1", "title": "his"})
    assert taken.status_code == 400 and "already exists" in taken.text
    assert snapshot(db) == before
    again = alice.post("/api/memory/threads?agentId=chat-agent", json={"threadId": "a1", "title": "renamed"}).json()
    assert (again["title"], again["createdAt"], again["resourceId"]) == ("renamed", first["createdAt"], "user:alice")
    assert again["updatedAt"] >= first["updatedAt"]


def test_no_write_reaches_another_users_thread_or_message(two_users):
    alice, bob, db = two_users
    assert alice.post("/api/memory/threads?agentId=chat-agent", json={"threadId": "a1"}).status_code == 200
    saved = alice.post("/api/memory/save-messages?agentId=chat-agent", json={"messages": [
        {"id": "alice-m", "role": "user", "content": "alice's secret", "threadId": "a1"}]})
    assert saved.status_code == 200, saved.text
    assert bob.post("/api/memory/threads?agentId=chat-agent", json={"threadId": "b1"}).status_code == 200
    before = snapshot(db)

    # bob, into his own thread, with alice's message id
    overwrite = bob.post("/api/memory/save-messages?agentId=chat-agent", json={"messages": [
        {"id": "b-new", "role": "user", "content": "mine", "threadId": "b1"},
        {"id": "alice-m", "role": "user", "content": "overwritten by bob", "threadId": "b1"}]})
    assert overwrite.status_code == 404 and overwrite.json() == {"error": "Message not found"}
    # bob, into alice's thread (it does not exist for him)
    into_hers = bob.post("/api/memory/save-messages?agentId=chat-agent", json={"messages": [
        {"id": "b-2", "role": "user", "content": "hi", "threadId": "a1"}]})
    assert into_hers.status_code == 404
    for method, path, body in [
        ("POST", "/api/memory/messages/delete", {"messageIds": ["alice-m"]}),
        ("POST", "/api/memory/messages/delete", {"messageIds": [{"id": "b-none"}, {"id": "alice-m"}]}),
        ("POST", "/api/memory/threads/a1/clone?agentId=chat-agent", {"newThreadId": "stolen"}),
        ("POST", "/api/memory/threads/a1/transfer", {"resourceId": "user:bob"}),
        ("POST", "/api/memory/threads/a1/working-memory?agentId=chat-agent", {"workingMemory": "x"}),
        ("GET", "/api/memory/threads/a1?resourceId=user:alice", None),
        ("GET", "/api/memory/threads/a1?resourceId=chat-agent&agentId=chat-agent", None),
        ("PATCH", "/api/memory/threads/a1", {"title": "bob was here"}),
        ("DELETE", "/api/memory/threads/a1?agentId=chat-agent", None),
    ]:
        response = bob.request(method, path, json=body)
        assert response.status_code == 404, (path, response.text)
    wm = bob.get("/api/memory/threads/a1/working-memory", params={"agentId": "chat-agent"}).json()
    assert wm["threadExists"] is False and wm["workingMemory"] is None
    assert bob.get("/api/memory/threads", params={"resourceId": "chat-agent", "agentId": "chat-agent"}).json()[
        "threads"] == [{**bob.get("/api/memory/threads/b1").json()}]
    assert snapshot(db) == before
    assert alice.get("/api/memory/threads/a1/messages").json()["messages"][0]["content"]["content"] == "alice's secret"
