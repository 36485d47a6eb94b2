"""The gateway's chat stream judged by the real ``ai`` npm package (DefaultChatTransport).

Every chunk is validated by the SDK's own ``uiMessageChunkSchema`` inside the transport; a
schema violation makes ``ok`` false. This is the module where the chat stream's own format
is judged (start, steps, text, finish, metadata, the raw SSE framing, errors, a hang-up,
resume's 204, regenerate and edits as the SDK sends them). Servers are real
``python -m dev_server gateway`` processes over a temp data dir; the model is the built-in local one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.kit.chat import judge, reply_text
from tests.kit.local_http import local_http
from tests.kit.servers import server_fixture
from tests.support import sqlite_rows, user_message


def send(server, messages, **options):
    """One turn made and judged by the real ``ai`` package (``tests.kit.chat.judge``)."""
    return judge(server, messages, chat_id="chat-1", **options)


# one gateway for the module (each test uses its own conversation ids)
gateway = server_fixture("gateway")


@pytest.fixture
def db(gateway) -> Path:
    return gateway.db


def test_two_turn_conversation_passes_the_sdk_schema_and_remembers(gateway, db: Path):
    first = send(gateway, [user_message("u1", "my name is Ada")], body={"conversationId": "conv-1"})
    assert first["ok"], first["error"]
    assert first["headers"]["x-vercel-ai-ui-message-stream"] == "v1"
    types = [c["type"] for c in first["chunks"]]
    # chat-agent has Observational Memory: its transient status part comes before each step (as Mastra's)
    assert types[:4] == ["start", "data-om-status", "start-step", "text-start"]
    assert types[-3:] == ["text-end", "finish-step", "finish"]
    start = first["chunks"][0]
    assert start["messageMetadata"]["local"] is True and start["messageMetadata"]["threadId"] == "conv-1"
    assert first["message"]["id"] == start["messageId"]

    # useChat sends the whole history back, including the assistant message it built
    history = [user_message("u1", "my name is Ada"), first["message"], user_message("u2", "what is my name?")]
    second = send(gateway, history, body={"conversationId": "conv-1"})
    assert second["ok"], second["error"]
    assert "Ada" in reply_text(second)

    rows = sqlite_rows(db,
                       "SELECT id, role FROM messages WHERE thread_id = 'conv-1' ORDER BY created_at, seq")
    assert [r[1] for r in rows] == ["user", "assistant", "user", "assistant"]
    assert [r[0] for r in rows] == ["u1", first["message"]["id"], "u2", second["message"]["id"]]
    assert sqlite_rows(db, "SELECT resource_id FROM threads WHERE id = 'conv-1'") == [("ai-chat",)]


def test_raw_stream_parses_with_parse_json_event_stream(gateway):
    result = send(gateway, [user_message("u1", "hello")], body={"conversationId": "raw-1"}, raw=True)
    assert result["ok"], result["error"]
    assert result["rawText"].rstrip().endswith("data: [DONE]")
    assert "null" not in result["rawText"]  # no optional field sent as null


def test_history_comes_from_storage_across_a_restart(start_server, data_dir: Path):
    before = start_server("gateway")
    assert send(before, [user_message("u1", "my name is Grace")], body={"conversationId": "conv-r"})["ok"]
    assert before.stop() == 0

    after = start_server("gateway")
    # only the new message: everything earlier must come from the database
    result = send(after, [user_message("u2", "what did I say earlier?")], body={"conversationId": "conv-r"})
    assert result["ok"], result["error"]
    assert '"my name is Grace"' in reply_text(result)


def test_without_conversation_id_each_turn_gets_a_fresh_thread(gateway, db: Path):
    first = send(gateway, [user_message("a1", "my name is Linus")])
    second = send(gateway, [user_message("a2", "what is my name?")])
    assert first["ok"] and second["ok"]
    threads = [first["chunks"][0]["messageMetadata"]["threadId"], second["chunks"][0]["messageMetadata"]["threadId"]]
    assert threads[0] != threads[1] and all(t.startswith("mastra_thread_") for t in threads)
    for thread, message in zip(threads, ("a1", "a2"), strict=True):
        assert sqlite_rows(db, "SELECT thread_id FROM messages WHERE id = ?", (message,)) == [(thread,)]
    assert "Linus" not in reply_text(second)


def test_re_sent_history_is_not_stored_twice(gateway, db: Path):
    history = [user_message("h1", "one")]
    for i in range(2, 5):
        result = send(gateway, history, body={"conversationId": "dup"})
        assert result["ok"]
        history = [*history, result["message"], user_message(f"h{i}", f"turn {i}")]
    ids = [r[0] for r in sqlite_rows(db, "SELECT id FROM messages WHERE thread_id = 'dup'")]
    assert len(ids) == len(set(ids)) == 6


def test_agent_without_memory_stores_nothing(gateway, db: Path):
    result = send(gateway, [user_message("o1", "route this")],
                  body={"conversationId": "orchestrated", "agentId": "orchestrator-agent"})
    assert result["ok"], result["error"]
    assert "threadId" not in result["chunks"][0]["messageMetadata"]
    assert sqlite_rows(db, "SELECT count(*) FROM threads WHERE id = 'orchestrated'") == [(0,)]
    assert sqlite_rows(db, "SELECT count(*) FROM messages WHERE id = 'o1'") == [(0,)]


def test_agent_route_and_body_agent_id_pick_the_agent(gateway, db: Path):
    result = judge(gateway, [user_message("d1", "hi")], api="/api/agents/docs-agent/chat",
                   body={"conversationId": "docs-1"}, chat_id="c")
    assert result["ok"] and result["chunks"][0]["messageMetadata"]["agentId"] == "docs-agent"


def test_regenerate_replaces_the_last_assistant_message(gateway, db: Path):
    first = send(gateway, [user_message("g1", "hello")], body={"conversationId": "regen"})
    again = send(gateway, [user_message("g1", "hello")], body={"conversationId": "regen"},
                 trigger="regenerate-message", message_id=first["message"]["id"])
    assert again["ok"], again["error"]
    rows = sqlite_rows(db, "SELECT id, role FROM messages WHERE thread_id = 'regen'")
    assert [r[1] for r in rows] == ["user", "assistant"]
    assert rows[1][0] == again["message"]["id"] != first["message"]["id"]


def test_editing_an_earlier_user_message_drops_what_came_after_it(gateway, db: Path):
    first = send(gateway, [user_message("e1", "my name is Bob")], body={"conversationId": "edit"})
    history = [user_message("e1", "my name is Bob"), first["message"], user_message("e2", "more")]
    assert send(gateway, history, body={"conversationId": "edit"})["ok"]
    edited = send(gateway, [user_message("e1", "my name is Alice")], body={"conversationId": "edit"},
                  message_id="e1")
    assert edited["ok"]
    rows = sqlite_rows(db,
                       "SELECT id, content FROM messages WHERE thread_id = 'edit' ORDER BY created_at, seq")
    assert [r[0] for r in rows] == ["e1", edited["message"]["id"]]
    assert json.loads(rows[0][1])["content"] == "my name is Alice"


def test_a_client_that_hangs_up_does_not_stop_the_reply(gateway, db: Path):
    # The stream is recorded for a resume (tests/test_resume_stream.py), so the turn runs to
    # its end; with DEV_SERVER_STREAM_RESUME=false a hang-up interrupts it (tested there too).
    result = send(gateway, [user_message("s1", "tell me something long [[slow]]")],
                  body={"conversationId": "cut"}, abort_after=5)
    assert result["aborted"]
    import time

    full = send(gateway, [user_message("s2", "tell me something long [[slow]]")], body={"conversationId": "cut-full"})
    deadline = time.monotonic() + 10
    reply = None
    while time.monotonic() < deadline:
        rows = sqlite_rows(db, "SELECT role, content FROM messages WHERE thread_id = 'cut' ORDER BY created_at, seq")
        reply = json.loads(rows[1][1]) if len(rows) == 2 else None
        if reply is not None and "interrupted" not in reply["metadata"]:
            break
        time.sleep(0.1)
    assert [r[0] for r in rows] == ["user", "assistant"]
    assert "interrupted" not in reply["metadata"] and reply["metadata"]["finishReason"] == "stop"
    assert reply["content"] == reply_text(full)


def test_crash_mid_stream_is_an_error_chunk_and_keeps_the_users_message(gateway, db: Path):
    result = send(gateway, [user_message("f1", "this will break [[fail]]")], body={"conversationId": "crash"})
    assert result["ok"], result["error"]  # an error chunk is valid protocol
    assert result["errorChunks"] and [c["type"] for c in result["chunks"]][-3:] == ["error", "finish-step", "finish"]
    assert result["chunks"][-1] == {"type": "finish", "finishReason": "error"}  # as the SDK's own server ends it
    rows = sqlite_rows(db,
                       "SELECT id, role, content FROM messages WHERE thread_id = 'crash' ORDER BY created_at, seq")
    assert rows[0][:2] == ("f1", "user")
    assert len(rows) == 2 and json.loads(rows[1][2])["metadata"]["error"]["kind"] == "connection"


def test_resume_answers_204_on_both_chat_routes_as_the_sdk_expects(gateway):
    for api in ("/api/chat", "/api/agents/docs-agent/chat"):
        result = judge(gateway, api=api, reconnect=True, chat_id="c-1")
        assert result["ok"], result["error"]
        assert result["status"] == 204 and result["reconnected"] is False, api
    assert local_http.get(f"{gateway.url}/api/agents/nobody/chat/c-1/stream").status_code == 404
