"""Semantic recall (issue 13) through a live gateway: real uvicorn (in this process), real
SQLite files, the real local embedder (all-MiniLM-L6-v2 on onnxruntime) and the local model,
whose answers show what memory fed it; the last turn of a recall goes through the real
``ai`` package."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dev_server.factory import create_app
from dev_server.settings import Settings
from tests.kit.chat import reply_text, turn
from tests.kit.local_http import local_http
from tests.kit.servers import serving
from tests.support import LiveApp, sqlite_rows, user_message

FACT = "My name is Ada Lovelace and I live in London."


@contextmanager
def gateway(data: Path, role: str = "gateway", **settings: Any) -> Iterator[LiveApp]:
    options = {"telemetry": False, "om_enabled": False, "semantic_recall": "chat-agent", **settings}
    with LiveApp(create_app(role, Settings(data_dir=data, **options))) as server:
        yield server


def chat(server: LiveApp, thread: str, message_id: str, text: str, token: str | None = None,
         agent: str | None = None) -> str:
    """One turn over plain HTTP (the seeding turns), with chat-agent or ``agent``; returns the reply's text."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    body = {"id": thread, "conversationId": thread, "messages": [user_message(message_id, text)],
            "trigger": "submit-message"}
    path = f"/api/agents/{agent}/chat" if agent else "/api/chat"
    response = local_http.post(f"{server.url}{path}", json=body, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    return "".join(e.get("delta", "") for e in events if e.get("type") == "text-delta")


def recall_health(server: LiveApp) -> dict[str, Any]:
    return local_http.get(f"{server.url}/health", timeout=10).json()["semanticRecall"]


def indexed(server: LiveApp, at_least: int = 1, timeout: float = 60.0) -> dict[str, Any]:
    """``/health``'s recall report once the queue is empty and ``at_least`` vectors exist."""
    deadline = time.monotonic() + timeout
    while True:
        health = recall_health(server)
        index = health.get("index", {})
        if health.get("ready") and index.get("backlog") == 0 and index.get("vectors", 0) >= at_least:
            return health
        assert time.monotonic() < deadline, f"the index did not catch up: {health}"
        time.sleep(0.1)


def filler(i: int) -> str:
    return f"Gardening note {i}: tomatoes want full sun, deep watering and a stake by midsummer."


def test_a_fact_200_messages_back_is_recalled_and_the_reply_shows_it(tmp_path: Path) -> None:
    with gateway(tmp_path) as server:
        chat(server, "long", "m0", FACT)
        for i in range(1, 100):
            chat(server, "long", f"m{i}", filler(i))
        health = indexed(server, 200)
        assert health["embedder"]["answeredBy"] == "local/all-MiniLM-L6-v2-int8"
        assert health["embedder"]["local"] is True and health["embedder"]["dimensions"] == 384
        result = turn(server, "long", "ask", "What is my name?")  # the real `ai` client
        assert "Your name is Ada Lovelace" in reply_text(result)
    with gateway(tmp_path, semantic_recall=None) as server:  # the same question without recall
        result = turn(server, "long", "ask-again", "What is my name?")
        assert "Ada" not in reply_text(result)


def test_resource_scope_recalls_another_thread_and_thread_scope_does_not(tmp_path: Path) -> None:
    with gateway(tmp_path) as server:  # resource scope, Mastra's default
        chat(server, "first", "f1", "My name is Grace Hopper.")
        for i in range(3):
            chat(server, "first", f"f-fill-{i}", filler(i))
        indexed(server, 8)
        assert "Your name is Grace Hopper" in chat(server, "second", "s1", "What is my name?")
    with gateway(tmp_path, semantic_recall="chat-agent:thread") as server:
        indexed(server, 10)
        assert "Grace" not in chat(server, "third", "t1", "What is my name?")
        assert "Your name is Grace Hopper" in chat(server, "first", "f-ask", "What is my name?")


def test_the_other_threads_excerpts_are_in_mastras_form(tmp_path: Path) -> None:
    from dev_server.kernel.messages import Message
    from dev_server.recall.format import other_threads_message

    messages = [Message("a", "t-old", "r", "user", {"content": "My name is Grace Hopper."}, "2026-03-04T15:07:00.000Z"),
                Message("b", "t-old", "r", "assistant", {"parts": [{"type": "text", "text": "Noted."}]},
                        "2026-03-05T09:30:00.000Z")]
    assert other_threads_message(messages, "t-now") == (
        "The following messages were remembered from a different conversation:\n"
        "<remembered_from_other_conversation>\n"
        "\nthe following messages are from 2026, Mar, 4\n"
        "Message from previous conversation at 3:07 PM: User: My name is Grace Hopper.\n"
        "\nthe following messages are from 2026, Mar, 5\n"
        "Message from previous conversation at 9:30 AM: Assistant: Noted.\n"
        "<end_remembered_from_other_conversation>")


def test_recall_never_crosses_the_principals_resource_under_auth(tmp_path: Path) -> None:
    with gateway(tmp_path, auth_tokens="ta=alice,tb=bob") as server:
        chat(server, "alice-1", "a1", "My name is Ada Lovelace.", token="ta")
        chat(server, "bob-1", "b1", "Gardening is my hobby.", token="tb")
        indexed(server, 4)
        assert "Your name is Ada Lovelace" in chat(server, "alice-2", "a2", "What is my name?", token="ta")
        bob = chat(server, "bob-2", "b2", "What is my name?", token="tb")
        assert "Ada" not in bob and "Lovelace" not in bob


def test_enabling_recall_on_an_existing_database_backfills_it(tmp_path: Path) -> None:
    with gateway(tmp_path, semantic_recall=None) as server:
        assert recall_health(server) == {"enabled": False, "embedder": None}
        for i in range(6):
            chat(server, "old", f"o{i}", filler(i) if i else FACT)
    with gateway(tmp_path) as server:
        health = indexed(server, 12)
        assert health["index"]["backfill"]["queued"] >= 0 and health["index"]["vectors"] == 12
        assert "Your name is Ada Lovelace" in chat(server, "new", "n1", "What is my name?")


def vector_rows(db: Path, message_id: str) -> list[tuple]:
    return sqlite3.connect(db).execute(
        "SELECT v.text_hash, v.vector IS NOT NULL FROM message_vectors v JOIN messages m ON m.seq = v.message_seq"
        " WHERE m.id = ?", (message_id,)).fetchall()


def search(server: LiveApp, text: str, resource: str = "ai-chat", limit: int = 1) -> dict[str, Any]:
    """The Studio's search: with ``limit`` 1, the single nearest message."""
    response = local_http.get(f"{server.url}/api/memory/search", params={
        "agentId": "chat-agent", "searchQuery": text, "resourceId": resource, "limit": limit}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_studio_search_by_meaning_and_edits_and_deletes_keep_the_index_consistent(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    with gateway(tmp_path) as gw:
        chat(gw, "notes", "n1", FACT)
        chat(gw, "notes", "n2", filler(1))
        indexed(gw, 4)
    with gateway(tmp_path, role="studio") as studio:
        indexed(studio, 4)  # until its embedder has loaded, a search answers by keyword (searchType "text")
        found = search(studio, "what is the user called?")
        assert found["searchType"] == "semantic" and "Ada Lovelace" in found["results"][0]["content"]
        assert {"id", "role", "content", "createdAt", "threadId", "threadTitle"} <= set(found["results"][0])
        before = vector_rows(db, "n1")
        edited = {"messages": [{"id": "n1", "threadId": "notes", "resourceId": "ai-chat", "role": "user",
                                "content": {"format": 2, "parts": [{"type": "text", "text": "I adore kayaking."}],
                                            "content": "I adore kayaking."}, "createdAt": "2026-01-01T00:00:00.000Z"}],
                  "agentId": "chat-agent"}
        assert local_http.post(f"{studio.url}/api/memory/save-messages?agentId=chat-agent", json=edited,
                          timeout=30).status_code == 200
        indexed(studio, 4)
        assert vector_rows(db, "n1") != before
        assert search(studio, "paddling a boat on a river")["results"][0]["id"] == "n1"
        deleted = local_http.post(f"{studio.url}/api/memory/messages/delete?agentId=chat-agent",
                             json={"messageIds": ["n1"]}, timeout=30)
        assert deleted.status_code == 200
        assert vector_rows(db, "n1") == []
        assert "n1" not in [r["id"] for r in search(studio, "paddling a boat on a river")["results"]]
        config = local_http.get(f"{studio.url}/api/memory/config", params={"agentId": "chat-agent"}).json()["config"]
        assert config["semanticRecall"] == {"topK": 4, "messageRange": {"before": 1, "after": 1}, "scope": "resource"}
        assert config["embedder"]["model"] == "openai/text-embedding-3-small"
        assert config["embedder"]["answeredBy"] == "local/all-MiniLM-L6-v2-int8"


def test_a_missing_vector_table_is_rebuilt_from_the_messages(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"
    with gateway(tmp_path) as server:
        chat(server, "t", "m1", FACT)
        indexed(server, 2)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE message_vectors")
    with gateway(tmp_path) as server:
        health = indexed(server, 2)
        assert health["index"]["backfill"]["rebuilt"] is True
        assert "Your name is Ada Lovelace" in chat(server, "t2", "m2", "What is my name?")
    with sqlite3.connect(db) as conn:  # the delete trigger works again on the rebuilt table
        conn.execute("DELETE FROM messages WHERE id = 'm1'")
        assert conn.execute("SELECT count(*) FROM message_vectors v JOIN messages m ON m.seq = v.message_seq"
                            " WHERE m.id = 'm1'").fetchone()[0] == 0


def test_settings_name_the_bad_recall_option() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="semanticRecall.topK"):
        Settings(semantic_recall="chat-agent", semantic_recall_options={"topK": 0})
    with pytest.raises(ValidationError, match="semanticRecall.messageRange.around"):
        Settings(semantic_recall_options={"messageRange": {"around": 2}})
    with pytest.raises(ValidationError, match="thread|resource"):
        Settings(semantic_recall="chat-agent:everywhere")
    assert Settings(semantic_recall="chat-agent:thread", semantic_recall_options={"topK": 6}).semantic_recall_agents \
        == {"chat-agent": {"topK": 6, "scope": "thread"}}


def test_a_provider_embedder_that_goes_down_costs_recall_not_turns_and_loses_nothing(data_dir: Path) -> None:
    from tests.fake_provider import FakeProvider

    with FakeProvider() as fake:
        env = {"OPENAI_API_KEY": "sk-fake", "OPENAI_API_BASE": fake.base_url, "DEV_SERVER_MODEL_RETRIES": "0",
               "DEV_SERVER_SEMANTIC_RECALL": "chat-agent", "DEV_SERVER_OM_ENABLED": "false",
               "DEV_SERVER_TELEMETRY": "false"}
        with serving("gateway", data_dir, env) as server:
            chat(server, "t", "m1", "Kayaking on the river at dawn.")
            health = indexed(server, 2)
            assert health["embedder"] == {"model": "openai/text-embedding-3-small", "local": False,
                                          "answeredBy": "openai/text-embedding-3-small", "dimensions": 8,
                                          "key": "openai/text-embedding-3-small"}
            assert "Kayaking on the river at dawn." in fake.embedding_inputs
            fake.embeddings_down = True
            assert chat(server, "t", "m2", "Paddling a canoe is fun.")  # answered, without recall
            down = recall_health(server)
            assert down["queries"]["failures"] >= 1 and "provider returned an error" in down["queries"]["lastError"]
            deadline = time.monotonic() + 30
            while recall_health(server)["index"]["failures"] == 0:
                assert time.monotonic() < deadline, "the indexer never tried during the outage"
                time.sleep(0.1)
            assert recall_health(server)["index"]["backlog"] >= 1  # kept for a retry
            fake.embeddings_down = False
            assert indexed(server, 4, timeout=90)["index"]["vectors"] == 4


def test_only_the_messages_of_agents_with_recall_reach_the_embedding_provider(data_dir: Path) -> None:
    from tests.fake_provider import FakeProvider

    secret = "The vault code is swordfish."
    with FakeProvider() as fake:
        env = {"OPENAI_API_KEY": "sk-fake", "OPENAI_API_BASE": fake.base_url,
               "DEV_SERVER_SEMANTIC_RECALL": "chat-agent", "DEV_SERVER_OM_ENABLED": "false",
               "DEV_SERVER_TELEMETRY": "false"}
        with serving("gateway", data_dir, env) as server:
            chat(server, "docs-thread", "d1", secret, agent="docs-agent")  # docs-agent: no semantic recall
            chat(server, "chat-thread", "c1", "Kayaking on the river at dawn.")
            health = indexed(server, 2)
            chat(server, "docs-thread", "d2", "And the spare key is under the mat.", agent="docs-agent")
            deadline = time.monotonic() + 30
            while recall_health(server)["index"]["skipped"] < 4 or recall_health(server)["index"]["backlog"]:
                assert time.monotonic() < deadline, recall_health(server)
                time.sleep(0.1)
        assert "Kayaking on the river at dawn." in fake.embedding_inputs
        assert not [text for text in fake.embedding_inputs if "swordfish" in text or "spare key" in text]
    assert health["index"]["vectors"] == 2  # chat-agent's message and its reply
    rows = sqlite_rows(data_dir / "dev-server.db", "SELECT DISTINCT thread_id FROM message_vectors")
    assert rows == [("chat-thread",)]


def test_turning_recall_off_for_an_agent_leaves_its_old_vectors_unsearched(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {"DEV_SERVER_OM_ENABLED": "false", "DEV_SERVER_TELEMETRY": "false"}
    both = {**env, "DEV_SERVER_SEMANTIC_RECALL": "chat-agent,docs-agent"}
    with serving("gateway", data, both) as server:
        chat(server, "docs-1", "d1", "My name is Grace Hopper.", agent="docs-agent")
        indexed(server, 2)
    with serving("gateway", data, {**env, "DEV_SERVER_SEMANTIC_RECALL": "chat-agent"}) as server:
        chat(server, "docs-1", "d2", "I also like sailing.", agent="docs-agent")  # not embedded now
        assert "Grace" not in chat(server, "chat-1", "c1", "What is my name?")  # one resource (ai-chat), but off
        health = indexed(server, 4)
        assert health["index"]["skipped"] == 2 and health["index"]["vectors"] == 4  # docs-1's two, chat-1's two
    with serving("gateway", data, both) as server:  # on again: the same vectors are searched
        indexed(server, 4)
        assert "Your name is Grace Hopper" in chat(server, "chat-2", "c2", "What is my name?")


async def _recalled(tmp_path: Path, options: dict[str, Any], query: str) -> list[str]:
    """The ids the recall processor puts before the window, on a 30-message thread whose
    message 10 is the only one about a name (real SQLite file, real local embedder)."""
    from dev_server.kernel.messages import Message, Thread
    from dev_server.kernel.processors import StepContext
    from dev_server.llm.embeddings import local_embedder
    from dev_server.memory.memory import Memory, MemoryOptions
    from dev_server.recall.service import SemanticIndex
    from dev_server.storage.conversations import ConversationStore
    from dev_server.storage.libsql import LibSQLStore

    db = LibSQLStore(f"file:{tmp_path / 'recall.db'}")
    await db.open()
    try:
        store = ConversationStore(db)
        index = SemanticIndex(db, local_embedder(), agents=frozenset({"chat-agent"}))
        memory = Memory(MemoryOptions(last_messages=4, semantic_recall=options), store, agent_id="chat-agent",
                        agent_resource="ai-chat", semantic_index=index)
        thread = Thread("range", "ai-chat")
        await store.ensure_thread(thread.id, thread.resource_id, agent_id="chat-agent")
        texts = [FACT if i == 10 else filler(i) for i in range(30)] + [query]
        await store.append_messages(thread.id, [
            Message(f"r{i:02d}", thread.id, "ai-chat", "user" if i % 2 == 0 else "assistant",
                    {"format": 2, "parts": [{"type": "text", "text": t}], "content": t},
                    f"2026-01-01T00:{i:02d}:00.000Z") for i, t in enumerate(texts)])
        assert await index.ready()
        await index.indexer.settled()
        step = StepContext("chat-agent", "run", "", thread, "ai-chat")
        step.begin_step(0)
        turns = [processor.start_turn(step) for processor in memory.processors]
        for turn in turns:
            await turn.before_step(step)
        recalled = turns[1].recalled.messages
        assert [m["content"] for m in step.history[:len(recalled)]] == [m.content["content"] for m in recalled]
        await index.stop()
        return [m.id for m in recalled]
    finally:
        await db.close()


@pytest.mark.anyio
async def test_message_range_brings_the_neighbours_of_each_hit_and_skips_the_window(tmp_path: Path) -> None:
    one = await _recalled(tmp_path / "a", {"topK": 1, "messageRange": 1}, "What is my name?")
    assert one == ["r09", "r10", "r11"]
    wide = await _recalled(tmp_path / "b", {"topK": 1, "messageRange": {"before": 0, "after": 3}}, "What is my name?")
    assert wide == ["r10", "r11", "r12", "r13"]
    near_end = await _recalled(tmp_path / "c", {"topK": 2, "messageRange": 0, "scope": "thread"},
                               "Gardening note 28: tomatoes want full sun, deep watering and a stake by midsummer.")
    assert not {"r27", "r28", "r29", "r30"} & set(near_end)  # the window's messages are never recalled twice
    assert len(near_end) == 2


def test_client_js_searches_by_meaning_and_a_clone_is_indexed_without_embedding_again(tmp_path: Path) -> None:
    from tests.support import run_node

    with gateway(tmp_path) as gw:
        chat(gw, "source", "s1", "I adore kayaking on mountain lakes.")
        chat(gw, "source", "s2", filler(1))
        indexed(gw, 4)
    with gateway(tmp_path, role="studio") as studio:
        embedded_before = indexed(studio, 4)["index"]["embedded"]  # its embedder loaded: a search is by meaning
        ops = [{"op": "search", "agentId": "chat-agent", "resourceId": "ai-chat", "searchQuery": "paddling a boat"},
               {"op": "clone", "agentId": "chat-agent", "threadId": "source", "newThreadId": "copy"}]
        found, cloned = run_node("working_memory_client.mjs", {"baseUrl": studio.url, "ops": ops})["results"]
        value = found["value"]
        assert (value["searchType"], value["searchScope"]) == ("semantic", "resource")  # client-js sends no limit
        best = max(value["results"], key=lambda r: r["score"])
        assert best["content"] == "I adore kayaking on mountain lakes."
        assert best["context"]["after"][0]["role"] == "assistant"
        assert len(cloned["value"]["clonedMessages"]) == 4
        health = indexed(studio, 8)
        assert health["index"]["embedded"] == embedded_before + 4 and health["index"]["reused"] >= 4
        in_copy = run_node("working_memory_client.mjs", {"baseUrl": studio.url, "ops": [
            {"op": "search", "agentId": "chat-agent", "resourceId": "ai-chat", "threadId": "copy",
             "searchQuery": "paddling a boat"}]})["results"][0]["value"]
        assert in_copy["searchScope"] == "thread" and {r["threadId"] for r in in_copy["results"]} == {"copy"}


def test_a_new_embedder_re_embeds_everything_and_corrupt_vectors_are_replaced(tmp_path: Path) -> None:
    from tests.fake_provider import FakeProvider

    data = tmp_path / "data"
    db = data / "dev-server.db"
    env = {"DEV_SERVER_SEMANTIC_RECALL": "chat-agent", "DEV_SERVER_OM_ENABLED": "false",
           "DEV_SERVER_TELEMETRY": "false"}
    with serving("gateway", data, env) as local:
        chat(local, "t", "m1", FACT)
        indexed(local, 2)
    with sqlite3.connect(db) as conn:
        assert {r[0] for r in conn.execute("SELECT model FROM message_vectors")} == {"local/all-MiniLM-L6-v2-int8:384"}
    with FakeProvider() as fake:
        keyed = {**env, "OPENAI_API_KEY": "sk-fake", "OPENAI_API_BASE": fake.base_url}
        with serving("gateway", data, keyed) as provider:
            health = indexed(provider, 2)
            assert health["index"]["backfill"]["queued"] == 2
            assert health["embedder"]["answeredBy"] == "openai/text-embedding-3-small"
    with sqlite3.connect(db) as conn:  # no vector of the old model is left to meet a query of the new one
        assert {r[0] for r in conn.execute("SELECT model FROM message_vectors")} == {"openai/text-embedding-3-small"}
        conn.execute("UPDATE message_vectors SET model = 'local/all-MiniLM-L6-v2-int8:384', vector = x'00ff'")
    with serving("gateway", data, env) as local:
        health = indexed(local, 2)
        assert health["index"]["backfill"]["corrupt"] == 2 and health["index"]["vectors"] == 2
        assert "Your name is Ada Lovelace" in chat(local, "t2", "m2", "What is my name?")


def test_a_regenerated_reply_replaces_the_old_ones_vectors(tmp_path: Path) -> None:
    db = tmp_path / "dev-server.db"

    def replies() -> list[str]:
        return [r[0] for r in sqlite3.connect(db).execute(
            "SELECT id FROM messages WHERE thread_id = 'regen' AND role = 'assistant'")]

    with gateway(tmp_path) as server:
        chat(server, "regen", "u1", FACT)
        indexed(server, 2)
        [first] = replies()
        assert vector_rows(db, first)
        body = {"id": "regen", "conversationId": "regen", "messages": [user_message("u1", FACT)],
                "trigger": "regenerate-message"}
        assert local_http.post(f"{server.url}/api/chat", json=body, timeout=60).status_code == 200
        indexed(server, 2)
        [second] = replies()
        assert second != first and vector_rows(db, first) == [] and vector_rows(db, second)
        count = sqlite3.connect(db).execute("SELECT count(*) FROM message_vectors").fetchone()[0]
        assert count == 2


def test_om_retrieval_with_vectors_uses_the_same_index_through_the_gateway(tmp_path: Path) -> None:
    with gateway(tmp_path, semantic_recall=None, om_enabled=True,
                 om_options={"retrieval": {"vector": True}}) as server:
        chat(server, "om", "k1", "I adore kayaking on mountain lakes.")
        chat(server, "om", "k2", filler(2))
        health = indexed(server, 4)
        assert health["enabled"] is True and health["embedder"]["local"] is True
        reply = chat(server, "om", "k3", 'call recall with {"mode": "search", "query": "paddling a boat"}')
        assert '"searchMode": "vector"' in reply, reply
        first = reply.index("### Result 1")
        assert reply.index("source: message k1", first) < reply.index("### Result 2")


def test_top_k_gives_k_messages_even_when_long_messages_crowd_the_best_pieces() -> None:
    import numpy as np

    from dev_server.recall.matrix import _Copy
    from dev_server.storage.message_vectors import VectorRow

    rng = np.random.default_rng(7)
    query = np.ones(8, dtype=np.float32) / np.sqrt(8)
    rows, row_id = [], 0
    for seq in range(60):  # messages 0-2 have 16 pieces each, all close to the query
        for _ in range(16 if seq < 3 else 1):
            vector = query + rng.normal(0, 0.01 if seq < 3 else 1.0, 8).astype(np.float32)
            row_id += 1
            rows.append(VectorRow(row_id, seq, "t", (vector / np.linalg.norm(vector)).astype("<f4").tobytes()))
    copy = _Copy(8)
    copy.append(rows)
    found = copy.top(query, 4, None, set())
    assert [seq for seq, _ in found][:3] == sorted([0, 1, 2], key=lambda s: -dict(found)[s]) and len(found) == 4
    assert len({seq for seq, _ in copy.top(query, 10, "t", {0})}) == 10 and 0 not in dict(copy.top(query, 10, "t", {0}))
