"""A retry never deletes turns (issue 25, item 1): ``dev_server.memory.turn_rules`` through a real
gateway process, two clients interleaving on one thread, the retried reply judged by the real
``ai`` package; and the rules themselves on a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from dev_server.factory import storage_for
from dev_server.kernel.clock import now_iso
from dev_server.kernel.errors import Conflict
from dev_server.kernel.messages import Message
from dev_server.memory.memory import Memory, MemoryOptions
from dev_server.memory.turn_rules import TurnIntent
from dev_server.settings import Settings
from dev_server.storage.conversations import ConversationStore
from tests.kit.builders import ui_message
from tests.kit.chat import chat_turn, judge, streamed_text
from tests.kit.local_http import local_http
from tests.kit.servers import serve, server_fixture
from tests.support import frames_of, sqlite_rows, ui_chunks, user_message

gateway = server_fixture("gateway", env={"DEV_SERVER_TELEMETRY": "false"}, models_ready=True)


def post(url: str, thread: str, messages: list[dict[str, Any]], **body: Any) -> httpx.Response:
    with local_http.stream("POST", f"{url}/api/chat", json={"id": thread, "conversationId": thread,
                                                       "messages": messages, **body}, timeout=30) as response:
        response.read()
        return response


def turn(url: str, thread: str, messages: list[dict[str, Any]], **body: Any) -> list[dict[str, Any]]:
    result = chat_turn(url, messages, body={"conversationId": thread, **body}, chat_id=thread, timeout=30)
    assert result["status"] == 200, result["error"]
    return result["chunks"]


def rows(db: Path, thread: str) -> list[tuple[str, str, str]]:
    return sqlite_rows(db, "SELECT id, role, content FROM messages WHERE thread_id = ? ORDER BY created_at, seq",
                       (thread,))


def interleave(url: str, thread: str) -> list[dict[str, Any]]:
    """Client A says a1; client B says b1 then b2 on the same thread; A's chunks."""
    first = turn(url, thread, [user_message(f"{thread}-a1", "my name is Ada")])
    b_history: list[dict[str, Any]] = []
    for mid, text in (("b1", "I live in Lisbon"), ("b2", "I have two cats")):
        b_history.append(user_message(f"{thread}-{mid}", text))
        chunks = turn(url, thread, b_history)
        b_history.append(ui_message(chunks[0]["messageId"], "assistant", streamed_text(chunks)))
    return first


def test_a_retry_of_an_answered_turn_deletes_nothing_and_answers_with_the_stored_reply(gateway) -> None:
    server, db = gateway, gateway.db
    first = interleave(server.url, "shared")
    before = rows(db, "shared")
    assert [r[1] for r in before] == ["user", "assistant"] * 3

    # A's connection dropped before it saw the reply: it sends a1 again, unchanged (useChat's
    # own transport, so the replayed stream is judged by the real SDK)
    retry = judge(server, [user_message("shared-a1", "my name is Ada")], body={"conversationId": "shared"},
                  chat_id="shared")
    assert retry["ok"], retry["error"]
    assert rows(db, "shared") == before  # 6 rows, unchanged
    reply_id, reply = before[1][0], json.loads(before[1][2])
    assert retry["message"]["id"] == reply_id == first[0]["messageId"]
    assert "".join(p.get("text", "") for p in retry["message"]["parts"] if p["type"] == "text") == reply["content"]
    assert [c["type"] for c in retry["chunks"]][-1] == "finish"


def test_a_retry_with_the_whole_history_of_either_client_writes_nothing(gateway) -> None:
    server, db = gateway, gateway.db
    interleave(server.url, "shared-2")
    before = rows(db, "shared-2")
    a_history = [user_message("shared-2-a1", "my name is Ada")]
    b_history = [user_message("shared-2-b1", "I live in Lisbon"),
                 {"id": before[3][0], "role": "assistant", "parts": [{"type": "text", "text": "..."}]},
                 user_message("shared-2-b2", "I have two cats")]
    for history in (a_history, b_history, a_history):
        chunks = turn(server.url, "shared-2", history)
        assert chunks[0]["type"] == "start" and chunks[-1]["type"] == "finish"
    assert rows(db, "shared-2") == before


def test_regenerate_without_naming_the_reply_after_another_clients_turn_is_a_409(gateway) -> None:
    server, db = gateway, gateway.db
    interleave(server.url, "shared-3")
    before = rows(db, "shared-3")
    response = post(server.url, "shared-3", [user_message("shared-3-a1", "my name is Ada")],
                    trigger="regenerate-message")
    assert response.status_code == 409 and response.json()["code"] == "THREAD_MOVED_ON"
    assert rows(db, "shared-3") == before


def test_the_same_id_with_other_content_is_no_edit_unless_the_client_names_it(gateway) -> None:
    server, db = gateway, gateway.db
    interleave(server.url, "shared-4")
    before = rows(db, "shared-4")
    response = post(server.url, "shared-4", [user_message("shared-4-a1", "my name is Eve")])
    assert response.status_code == 409 and response.json()["code"] == "MESSAGE_ID_REUSED"
    assert rows(db, "shared-4") == before
    # the AI SDK's sendMessage({messageId}): an explicit edit, which does replace what followed
    edited = turn(server.url, "shared-4", [user_message("shared-4-a1", "my name is Eve")], messageId="shared-4-a1")
    after = rows(db, "shared-4")
    assert [r[0] for r in after] == ["shared-4-a1", edited[0]["messageId"]]
    assert json.loads(after[0][2])["content"] == "my name is Eve"


def test_regenerate_naming_a_message_that_is_not_after_the_anchor_is_a_409(gateway) -> None:
    server, db = gateway, gateway.db
    interleave(server.url, "shared-5")
    before = rows(db, "shared-5")
    response = post(server.url, "shared-5", [user_message("shared-5-b1", "I live in Lisbon")],
                    trigger="regenerate-message", messageId=before[1][0])  # a1's reply comes before b1
    assert response.status_code == 409 and response.json()["code"] == "REGENERATE_TARGET_NOT_FOUND"
    assert rows(db, "shared-5") == before


def test_a_retry_while_the_reply_still_streams_follows_it_on_another_replica(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, telemetry=False)
    db = tmp_path / "dev-server.db"
    with serve("gateway", tmp_path, inprocess=True, settings=settings) as first, \
            serve("gateway", tmp_path, inprocess=True, settings=settings) as second:
        message = user_message("slow-1", "tell me something long [[slower]]")
        body = {"id": "slow", "conversationId": "slow", "messages": [message]}
        with local_http.stream("POST", f"{first.url}/api/chat", json=body, timeout=30) as response:
            seen = frames_of(response, 4)  # then the connection drops
        retried = turn(second.url, "slow", [message])  # the other replica, at once
        stored = rows(db, "slow")
        assert [r[1] for r in stored] == ["user", "assistant"]  # one reply, not two
        reply = json.loads(stored[1][2])
        assert retried[0]["messageId"] == stored[1][0] and retried[-1]["type"] == "finish"
        assert ui_chunks(seen) == retried[:len(seen)]  # the same stream, from its start
        assert "".join(c.get("delta", "") for c in retried if c["type"] == "text-delta") == reply["content"]


# -- the rules on a real file --------------------------------------------------------------


def text(mid: str, body: str, role: str = "user", **metadata: Any) -> Message:
    content: dict[str, Any] = {"format": 2, "parts": [{"type": "text", "text": body}], "content": body}
    if metadata:
        content["metadata"] = metadata
    return Message(mid, "t", "r", role, content, now_iso())


@pytest.fixture
async def memory(settings: Settings):
    storage = storage_for("gateway", settings)
    await storage.open()
    memory = Memory(MemoryOptions(), ConversationStore(storage.default), agent_id="chat-agent")
    yield memory
    await storage.close()


async def stored_ids(memory: Memory) -> list[str]:
    return [m.id for m in await memory.store.recent_messages("t", None)]


@pytest.mark.anyio
async def test_a_retry_whose_reply_never_finished_is_answered_again(memory: Memory) -> None:
    thread = await memory.open_thread("t", "r")
    await memory.record_turn(thread, [text("u1", "hello")])
    await memory.save_reply(thread, text("r1", "half a rep", "assistant", interrupted=True))
    recorded = await memory.record_turn(thread, [text("u1", "hello")])
    assert recorded.replay is None and recorded.stored == []
    assert await stored_ids(memory) == ["u1"]  # the partial reply goes; a whole one will follow


@pytest.mark.anyio
async def test_a_retry_whose_reply_finished_replays_it_and_writes_nothing(memory: Memory) -> None:
    thread = await memory.open_thread("t", "r")
    await memory.record_turn(thread, [text("u1", "hello")])
    await memory.save_reply(thread, text("r1", "hi there", "assistant", finishReason="stop"))
    await memory.record_turn(thread, [text("u2", "more")])
    recorded = await memory.record_turn(thread, [text("u1", "hello")])
    assert recorded.replay is not None and recorded.replay.id == "r1" and recorded.stored == []
    assert await stored_ids(memory) == ["u1", "r1", "u2"]


@pytest.mark.anyio
async def test_an_edit_and_a_regenerate_naming_the_reply_replace_what_followed(memory: Memory) -> None:
    thread = await memory.open_thread("t", "r")
    await memory.record_turn(thread, [text("u1", "hello")])
    await memory.save_reply(thread, text("r1", "hi", "assistant"))
    await memory.record_turn(thread, [text("u2", "more")])
    await memory.record_turn(thread, [text("u1", "hello")], TurnIntent("regenerate-message", "r1"))
    assert await stored_ids(memory) == ["u1"]
    await memory.save_reply(thread, text("r2", "hi again", "assistant"))
    with pytest.raises(Conflict):
        await memory.record_turn(thread, [text("u1", "changed")])
    await memory.record_turn(thread, [text("u1", "changed")], TurnIntent("submit-message", "u1"))
    assert await stored_ids(memory) == ["u1"]
