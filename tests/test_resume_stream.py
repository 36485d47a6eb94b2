"""Resumable chat streams (``GET /api/chat/{chatId}/stream``) on any replica.

Replicas are real uvicorn servers over one temp data dir (two apps = two processes' worth
of stores sharing the SQLite file, as N gateway replicas do); the model is the built-in
local one, whose ``[[slow]]`` trigger spaces its words 50 ms apart. The reload is judged by
the real ``ai`` package (``tests/js/resume_chat.mjs``: a Chat's own ``resumeStream``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.kit.chat import post_chat, recorded_through, resume, text_of
from tests.kit.local_http import local_http
from tests.kit.servers import InProcessServer, Servers
from tests.support import run_node, sqlite_rows, user_message

SLOW = "tell me something long [[slow]]"


@contextmanager
def replicas(data_dir: Path, count: int = 1, **settings) -> Iterator[list[InProcessServer]]:
    """``count`` in-process gateways on ``data_dir`` (telemetry off, then ``settings``)."""
    servers = Servers(data_dir)
    try:
        yield [servers.gateway(inprocess=True, settings={"telemetry": False, **settings}) for _ in range(count)]
    finally:
        servers.close()


def stored_reply(db: Path, thread_id: str) -> dict:
    deadline = time.monotonic() + 15
    while True:
        rows = sqlite_rows(db, "SELECT id, content FROM messages WHERE thread_id = ? AND role = 'assistant'",
                           (thread_id,))
        if rows and "interrupted" not in json.loads(rows[0][1])["metadata"]:
            return {**json.loads(rows[0][1]), "id": rows[0][0]}
        assert time.monotonic() < deadline, f"no finished reply in {thread_id}"
        time.sleep(0.05)


@pytest.mark.parametrize("with_partial", [False, True], ids=["page-without-reply", "page-with-partial-reply"])
def test_a_reload_mid_reply_resumes_on_another_replica_with_the_whole_reply_once(data_dir: Path, with_partial):
    with replicas(data_dir, 2) as (first, second):
        result = run_node("resume_chat.mjs", {"api": f"{first.url}/api/chat", "resumeApi": f"{second.url}/api/chat",
                                              "chatId": "reload", "text": SLOW, "body": {"conversationId": "reload"},
                                              "abortAfterChunks": 8, "withPartial": with_partial})
        reply = stored_reply(data_dir / "dev-server.db", "reload")

    assert result["error"] is None and result["status"] == "ready", result
    assert result["resumeStatus"] == 200
    assert any(c["type"] == "text-delta" for c in result["sentChunks"])  # it hung up mid-text
    assert result["resumedChunkTypes"][0] == "start" and result["resumedChunkTypes"][-1] == "finish"
    user, assistant = result["messages"]  # exactly one reply, after the user's message
    assert user["id"] == "reload-u1" and assistant["role"] == "assistant"
    [text] = [p["text"] for p in assistant["parts"] if p["type"] == "text"]
    assert text == reply["content"]  # the whole reply, as stored, once
    assert text.count("[local model]") == 1 and text.endswith(reply["content"][-20:])
    assert assistant["id"] == reply["id"]


def test_nothing_to_resume_answers_204_and_a_bad_last_event_id_400(data_dir: Path):
    with replicas(data_dir) as (server,):
        for path in ("/api/chat", "/api/agents/chat-agent/chat"):
            response, _ = resume(server.url, "never-streamed", path=path)
            assert response.status_code == 204
        post_chat(server.url, "done", "hello")  # read to the end: the stream is over
        assert resume(server.url, "done")[0].status_code == 204
        assert resume(server.url, "done", path="/api/agents/docs-agent/chat")[0].status_code == 204
        bad = local_http.get(f"{server.url}/api/chat/done/stream", headers={"Last-Event-ID": "seven"})
        assert bad.status_code == 400 and bad.json()["error"] == "Invalid Last-Event-ID header"
        assert local_http.get(f"{server.url}/api/agents/nobody/chat/done/stream").status_code == 404


def test_last_event_id_skips_the_frames_the_client_saw(data_dir: Path):
    with replicas(data_dir, 2) as (first, second):
        seen = post_chat(first.url, "cut", SLOW, read_frames=7)
        last_id = seen[-1][0]
        response, rest = resume(second.url, "cut", headers={"Last-Event-ID": str(last_id)})
        assert response.status_code == 200
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert response.headers["content-type"].startswith("text/event-stream")
        reply = stored_reply(data_dir / "dev-server.db", "cut")

        # After the end, a client that missed the tail still gets it; one that saw it all gets 204.
        tail, frames = resume(first.url, "cut", headers={"Last-Event-ID": str(rest[-3][0])})
        assert tail.status_code == 200 and frames == rest[-2:]
        assert resume(first.url, "cut", headers={"Last-Event-ID": str(rest[-1][0])})[0].status_code == 204

    ids = [frame_id for frame_id, _ in seen + rest]
    assert ids == list(range(1, len(ids) + 1))  # nothing repeated, nothing skipped
    assert rest[-1][1] == "[DONE]" and json.loads(rest[-2][1])["type"] == "finish"
    assert text_of(seen + rest) == reply["content"]


def test_a_finished_streams_chunks_are_deleted_after_the_retention(data_dir: Path):
    db = data_dir / "dev-server.db"
    with replicas(data_dir, stream_retention_s=0.3) as (server,):
        post_chat(server.url, "kept-briefly", "hello")
        assert sqlite_rows(db, "SELECT status FROM chat_streams WHERE chat_id = 'kept-briefly'") == [("finished",)]
        deadline = time.monotonic() + 10
        while sqlite_rows(db, "SELECT count(*) FROM stream_chunks")[0][0]:
            assert time.monotonic() < deadline, "the finished stream's chunks were never deleted"
            time.sleep(0.1)
        assert sqlite_rows(db, "SELECT count(*) FROM chat_streams") == [(0,)]


def test_with_auth_only_the_owner_resumes_and_only_on_its_agent(data_dir: Path):
    alice, bob = {"Authorization": "Bearer ta"}, {"Authorization": "Bearer tb"}
    with replicas(data_dir, 2, auth_tokens="ta=alice,tb=bob") as (first, second):
        seen = post_chat(first.url, "alices", SLOW, headers=alice, read_frames=4)
        stolen = local_http.get(f"{second.url}/api/chat/alices/stream", headers=bob)
        unknown = local_http.get(f"{second.url}/api/chat/nobodys/stream", headers=bob)
        assert stolen.status_code == unknown.status_code == 204  # a foreign id cannot be told from none
        assert local_http.get(f"{second.url}/api/chat/alices/stream").status_code == 401
        assert resume(second.url, "alices", path="/api/agents/docs-agent/chat", headers=alice)[0].status_code == 204
        response, rest = resume(second.url, "alices", path="/api/agents/chat-agent/chat",
                                headers={**alice, "Last-Event-ID": str(seen[-1][0])})
        assert response.status_code == 200 and rest[0][0] == seen[-1][0] + 1 and rest[-1][1] == "[DONE]"


def test_another_user_reusing_your_chat_id_does_not_shadow_your_stream(data_dir: Path):
    alice, bob = {"Authorization": "Bearer ta"}, {"Authorization": "Bearer tb"}
    with replicas(data_dir, 2, auth_tokens="ta=alice,tb=bob") as (first, second):
        seen = post_chat(first.url, "same-id", SLOW, headers=alice, read_frames=4)
        body = {"id": "same-id", "conversationId": "bobs-thread", "messages": [user_message("b-u", "hello from bob")]}
        bobs = local_http.post(f"{second.url}/api/chat", json=body, headers=bob, timeout=30)  # newer, same chat id
        assert bobs.status_code == 200 and bobs.text.rstrip().endswith("[DONE]")
        response, rest = resume(second.url, "same-id", headers={**alice, "Last-Event-ID": str(seen[-1][0])})
        assert response.status_code == 200 and rest[0][0] == seen[-1][0] + 1
        assert "bob" not in text_of(seen + rest) and rest[-1][1] == "[DONE]"
        response, replay = resume(first.url, "same-id", headers={**bob, "Last-Event-ID": "1"})
        assert response.status_code == 200 and "bob" in text_of(replay)


@pytest.mark.e2e
def test_a_replica_killed_mid_reply_ends_the_resumed_stream_with_an_error(data_dir: Path, servers: Servers):
    producer = servers.gateway(env={"DEV_SERVER_TELEMETRY": "false"})
    try:
        seen = post_chat(producer.url, "killed", "a long answer please [[slower]]", read_frames=6)
        recorded_through(lambda sql, params: sqlite_rows(data_dir / "dev-server.db", sql, params), "killed",
                         seen[-1][0])
    finally:
        producer.process.kill()
        producer.stop()
    with replicas(data_dir) as (survivor,):
        response, frames = resume(survivor.url, "killed")
    assert response.status_code == 200
    assert frames[:len(seen)] == seen  # the recorded part, replayed from the start
    assert json.loads(frames[-2][1]) == {"type": "error", "errorText": json.loads(frames[-2][1])["errorText"]}
    assert "interrupted" in json.loads(frames[-2][1])["errorText"] and frames[-1][1] == "[DONE]"


def test_with_resume_off_a_hang_up_interrupts_the_reply_and_nothing_is_recorded(data_dir: Path,
                                                                                caplog: pytest.LogCaptureFixture):
    """...and the hang-up is no error: the turn is closed once, by whoever gets there first
    (the response's close while the frame task still waits on the model)."""
    db = data_dir / "dev-server.db"
    with replicas(data_dir, stream_resume=False) as (server,):
        post_chat(server.url, "off", SLOW, read_frames=6)
        deadline = time.monotonic() + 10
        rows: list[tuple] = []
        while not rows:
            rows = sqlite_rows(db, "SELECT content FROM messages WHERE thread_id = 'off' AND role = 'assistant'")
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert json.loads(rows[0][0])["metadata"]["interrupted"] is True
        assert resume(server.url, "off")[0].status_code == 204
    assert sqlite_rows(db, "SELECT count(*) FROM chat_streams") == [(0,)]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.anyio
async def test_the_recorder_writes_frames_in_batches_not_one_transaction_each(tmp_path: Path):
    from dev_server.storage.libsql import LibSQLStore
    from dev_server.storage.stream_log import StreamLog, StreamOwner
    from dev_server.streaming.recorder import StreamRecorder

    store = LibSQLStore(f"file:{tmp_path / 'db.sqlite'}")
    await store.open()
    try:
        stream_log = StreamLog(store)
        recorder = StreamRecorder(stream_log, StreamOwner("c", "t", "chat-agent", "ai-chat"))
        recorder.start()
        for seq in range(1, 301):  # a fast model: every frame ready before the recorder runs
            recorder.add(seq, json.dumps({"type": "text-delta", "id": "x", "delta": f"w{seq} "}))
        await recorder.close()
        assert recorder.writes == 1
        row = await stream_log.latest("c", "ai-chat")
        assert row is not None and row.status == "finished" and await stream_log.last_seq(row.stream_id) == 300
        assert [seq for seq, _ in await stream_log.chunks_after(row.stream_id, 295)] == [296, 297, 298, 299, 300]
    finally:
        await store.close()


@pytest.mark.anyio
async def test_a_stream_that_ends_during_the_recorders_pause_is_closed_at_once(tmp_path: Path):
    """The recorder pauses between writes to gather frames; a stream's end must not wait the
    pause out (every instant reply waited 50 ms for it). With a pause of an hour, close()
    returns as soon as the last write is done, and that write holds every frame."""
    from dev_server.storage.libsql import LibSQLStore
    from dev_server.storage.stream_log import StreamLog, StreamOwner
    from dev_server.streaming.recorder import StreamRecorder

    store = LibSQLStore(f"file:{tmp_path / 'db.sqlite'}")
    await store.open()
    try:
        stream_log = StreamLog(store)
        recorder = StreamRecorder(stream_log, StreamOwner("c", "t", "chat-agent", "ai-chat"), flush_every_s=3600)
        recorder.start()
        recorder.add(1, json.dumps({"type": "start"}))
        while recorder.writes < 1:  # the first frame is written at once; then the pause begins
            await asyncio.sleep(0.01)
        recorder.add(2, json.dumps({"type": "finish"}))
        await asyncio.wait_for(recorder.close(), timeout=30)
        row = await stream_log.latest("c", "ai-chat")
        assert row is not None and row.status == "finished" and await stream_log.last_seq(row.stream_id) == 2
    finally:
        await store.close()
