"""Observational Memory's async buffering through a live gateway and the real ``ai`` package (issue 12).

Small thresholds (600 message tokens, buffering every 200) make the background observer
(the built-in local model) run every few turns; every ``data-om-*`` chunk passes the SDK's
own schema (``chat_client.mjs``). The record is read back through a studio on the same
data dir with ``@mastra/client-js`` (``awaitBufferStatus`` waits for the background work).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from app.om.tokens import count_messages
from app.storage.conversations import Message
from tests.kit.servers import running
from tests.support import run_node, sqlite_rows
from tests.test_om_gateway import FACT, turn

ASYNC_ENV = {"DEV_SERVER_TELEMETRY": "false", "DEV_SERVER_OM_MESSAGE_TOKENS": "600",
             "DEV_SERVER_OM_OBSERVATION_TOKENS": "5000", "DEV_SERVER_OM_BUFFER_TOKENS": "200"}
BUFFER_START = {"cycleId", "operationType", "startedAt", "tokensToBuffer", "recordId", "threadId", "threadIds",
                "config"}
BUFFER_END = {"cycleId", "operationType", "completedAt", "durationMs", "tokensBuffered", "bufferedTokens",
              "recordId", "threadId"}
ACTIVATION = {"cycleId", "operationType", "activatedAt", "chunksActivated", "tokensActivated",
              "observationTokens", "messagesActivated", "recordId", "threadId", "generationCount", "config",
              "triggeredBy"}


def parts(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [c["data"] for c in result["chunks"] if c["type"] == f"data-om-{kind}"]


def status(result: dict[str, Any]) -> dict[str, Any]:
    [found] = parts(result, "status")
    return found


def pending(result: dict[str, Any]) -> int:
    return status(result)["windows"]["active"]["messages"]["tokens"]


def record_row(db: Path, thread: str) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM mastra_observational_memory WHERE lookup_key = ?"
                           " ORDER BY generation_count DESC LIMIT 1", (f"thread:{thread}",)).fetchone()
        return dict(row)


def stored_messages(db: Path, thread: str) -> list[Message]:
    rows = sqlite_rows(db, "SELECT id, thread_id, resource_id, role, content, created_at FROM messages"
                           " WHERE thread_id = ? ORDER BY created_at, seq", (thread,))
    return [Message(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5]) for r in rows]


def await_buffer(studio_url: str, thread: str) -> dict[str, Any]:
    read = run_node("om_client.mjs", {"baseUrl": studio_url, "agentId": "chat-agent", "resourceId": "chat-agent",
                                      "threadId": thread})
    assert read["ok"], read.get("error")
    return read["buffer"]["record"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("om-async")


@pytest.fixture(scope="module")
def gateway(data: Path) -> Any:
    with running("gateway", data, ASYNC_ENV) as server:
        yield server


@pytest.fixture(scope="module")
def studio(data: Path, gateway: Any) -> Any:
    with running("studio", data, ASYNC_ENV) as server:
        yield server


def test_buffering_runs_at_the_intervals_and_activation_swaps_chunks_in(gateway: Any, studio: Any, data: Path) -> None:
    db = data / "dev-server.db"
    results, before = [], []
    for i in range(1, 10):
        before.append(await_buffer(studio.url, "async") if i > 1 else None)  # waits for the background observer
        results.append(turn(gateway, "async", f"a{i}", f"Turn {i}. {FACT}"))
    # buffering starts on the first turn whose window crosses bufferTokens (200), long before 600
    first = next(i for i, r in enumerate(results) if parts(r, "buffering-start"))
    assert first == next(i for i, r in enumerate(results) if pending(r) >= 200)
    starts = [p for r in results for p in parts(r, "buffering-start")]
    assert len(starts) >= 3
    assert all(BUFFER_START <= set(s) and s["operationType"] == "observation" for s in starts)
    assert all(s["cycleId"].startswith("buffer-obs-") and s["tokensToBuffer"] >= 100 for s in starts)
    assert status(results[first])["windows"]["buffered"]["observations"]["status"] == "running"
    # the end parts are kept on the replies (the local observer answers after the turn's own stream)
    stored = stored_messages(db, "async")
    ends = [p["data"] for m in stored for p in m.content["parts"] if p["type"] == "data-om-buffering-end"]
    ends += [p for r in results for p in parts(r, "buffering-end")]
    assert ends and all(BUFFER_END <= set(e) for e in ends)
    assert {e["cycleId"] for e in ends} <= {s["cycleId"] for s in starts}
    assert all(m.content.get("metadata", {}).get("mastra", {}).get("sealed") for m in stored[:first * 2])
    # the status reports the buffered window as the record holds it
    index = next(i for i, r in enumerate(before) if r and r["bufferedObservationChunks"])
    windows = status(results[index])["windows"]["buffered"]["observations"]
    assert windows["chunks"] >= len(before[index]["bufferedObservationChunks"]) and windows["observationTokens"] > 0
    # activation: the first turn at the threshold swaps the oldest chunks in, with no model call
    at = next(i for i, r in enumerate(results) if parts(r, "activation"))
    activations = parts(results[at], "activation")
    assert all(ACTIVATION <= set(a) and a["triggeredBy"] == "threshold" and a["chunksActivated"] == 1
               and a["operationType"] == "observation" for a in activations)
    assert not parts(results[at], "observation-start")  # no synchronous observer call
    chunks = before[at]["bufferedObservationChunks"]
    activated = [c for c in chunks if c["cycleId"] in {a["cycleId"] for a in activations}]
    assert activated == chunks[:len(activated)]  # the oldest, in order
    assert [a["tokensActivated"] for a in activations] == [c["messageTokens"] for c in activated]
    # what the model saw: the window at the turn's start minus the activated chunks' messages
    user_at = results_created_at(db, f"a{at + 1}")
    cursor = before[at]["lastObservedAt"]
    window = [m for m in stored_messages(db, "async") if m.created_at <= user_at and (cursor is None
                                                                                     or m.created_at > cursor)]
    taken = {mid for c in activated for mid in c["messageIds"]}
    assert taken and taken <= {m.id for m in window}
    assert pending(results[at]) == count_messages([m for m in window if m.id not in taken])
    # the retention floor (600 * (1 - 0.8) = 120 tokens) stays in the window
    assert pending(results[at]) >= 120
    after = before[at + 1]  # the record after that turn (and its buffering)
    assert "Ada Lovelace" in after["activeObservations"] and after["lastObservedAt"] == activated[-1]["lastObservedAt"]
    assert after["observationTokenCount"] == before[at]["observationTokenCount"] + sum(c["tokenCount"]
                                                                                        for c in activated)
    # the activation markers are kept on the reply
    reply = next(m for m in stored_messages(db, "async") if m.role == "assistant" and m.created_at > user_at)
    assert [p["data"]["cycleId"] for p in reply.content["parts"] if p["type"] == "data-om-activation"] == [
        a["cycleId"] for a in activations]


def results_created_at(db: Path, message_id: str) -> str:
    return sqlite_rows(db, "SELECT created_at FROM messages WHERE id = ?", (message_id,))[0][0]


def test_chunks_survive_a_restart_and_a_dead_processs_flag_is_taken_over(gateway: Any, studio: Any,
                                                                         data: Path) -> None:
    db = data / "dev-server.db"
    for i in range(1, 5):
        result = turn(gateway, "restart", f"r{i}", f"Turn {i}. {FACT}")
        record = await_buffer(studio.url, "restart")
        if record["bufferedObservationChunks"]:
            break
    assert record["bufferedObservationChunks"] and not parts(result, "activation")
    chunk_ids = [c["id"] for c in record["bufferedObservationChunks"]]
    gateway.stop()
    # a gateway killed mid-buffering leaves its flag behind, never renewed
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE mastra_observational_memory SET is_buffering_observation = '2026-01-01T00:00:00.000Z'"
                     " WHERE lookup_key = 'thread:restart'")
    gateway.start()
    gateway.wait_healthy()
    assert await_buffer(studio.url, "restart")["isBufferingObservation"] is True  # as stored: a flag is a flag
    # one long message takes the window over the threshold: the stored chunks activate at once
    result = turn(gateway, "restart", "r-long", " ".join([FACT] * 12))
    activations = parts(result, "activation")
    assert activations and activations[0]["triggeredBy"] == "threshold"
    after = await_buffer(studio.url, "restart")
    assert after["isBufferingObservation"] is False  # the turn found the dead flag and cleared it
    assert not {c["id"] for c in after["bufferedObservationChunks"] or []} & set(chunk_ids[:len(activations)])
    # and the next interval buffers again: the stale flag was taken over
    assert any(parts(turn(gateway, "restart", f"r-next{i}", f"More. {FACT}"), "buffering-start")
               for i in range(4))
    assert await_buffer(studio.url, "restart")["isBufferingObservation"] is False


def test_the_real_studio_shows_buffered_observations_and_chats_on_the_same_thread(gateway: Any, studio: Any,
                                                                                  data: Path) -> None:
    from tests.test_studio_ui import run_studio

    for i in range(1, 5):
        turn(gateway, "shown-async", f"sa{i}", f"Turn {i}. {FACT}")
        record = await_buffer(studio.url, "shown-async")
    assert record["bufferedObservationChunks"]
    # the Studio renders the stored buffering markers as a "Buffered observations" badge, and its
    # own turn on the thread runs OM in the studio process, on the same record
    result = run_studio(studio, threadId="shown-async", expectThreadText="Buffered observations",
                        sendText="What is my name?")
    assert "Your name is Ada Lovelace" in result["replyText"]
    after = await_buffer(studio.url, "shown-async")  # the studio's turn wrote the same record's window
    assert after["id"] == record["id"] and after["pendingMessageTokens"] > record["pendingMessageTokens"]
