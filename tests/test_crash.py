"""kill -9 mid-stream keeps what was streamed (issue 9.6).

A real gateway process streams a slow local-model reply (``[[slower]]``: 250 ms a piece,
checkpointed every 0.3 s); after some text arrived it gets a real SIGKILL. The restarted
gateway must find the partial reply stored after the user's message, marked interrupted,
and the next turn's context must include it. The killed process's lease on the thread is
left behind; it expires (1 s here) and the next turn takes it over. Several rounds on one
thread, then a normal turn that counts everything it was given.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.kit.local_http import local_http
from tests.support import sqlite_rows, user_message

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("CRASH_ROUNDS", "4"))  # more for a measurement run
WINDOW = 10  # chat-agent's lastMessages
ENV = {"DEV_SERVER_TURN_LEASE_S": "1", "DEV_SERVER_CHECKPOINT_INTERVAL_S": "0.3", "DEV_SERVER_TELEMETRY": "false"}
THREAD = "crashy"


def stream_until_deltas(server, message_id: str, text: str, deltas: int) -> str:
    """POST a turn and read its stream until ``deltas`` text deltas arrived; their text."""
    received: list[str] = []
    body = {"id": "c", "conversationId": THREAD, "messages": [user_message(message_id, text)]}
    with local_http.stream("POST", f"{server.url}/api/chat", json=body, timeout=60) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                if chunk["type"] == "text-delta":
                    received.append(chunk["delta"])
                    if len(received) == deltas:
                        server.process.kill()  # SIGKILL, while the reply is still streaming
                        server.process.wait()
                        break
    return "".join(received)


def stored(db: Path) -> list[tuple[str, str, dict]]:
    rows = sqlite_rows(db, "SELECT id, role, content FROM messages WHERE thread_id = ? ORDER BY created_at, seq",
                       (THREAD,))
    return [(mid, role, json.loads(content)) for mid, role, content in rows]


def test_partial_replies_survive_kill_9_and_the_next_turn_sees_them(start_server, data_dir: Path):
    db = data_dir / "dev-server.db"
    kept = 0
    for round_ in range(ROUNDS):
        gateway = start_server("gateway", env=ENV)
        received = stream_until_deltas(gateway, f"u{round_}", f"round {round_} [[slower]]", deltas=3 + round_ % 3)
        assert sqlite_rows(db, "SELECT count(*) FROM thread_leases WHERE thread_id = ?", (THREAD,)) == [(1,)]
        rows = stored(db)
        assert len(rows) == 2 * (round_ + 1), rows
        (user_id, user_role, _), (_, reply_role, reply) = rows[-2:]
        assert (user_id, user_role, reply_role) == (f"u{round_}", "user", "assistant")
        assert reply["metadata"]["interrupted"] is True
        partial = reply["content"]
        # checkpointed before its piece was sent: one is a prefix of the other
        assert partial.startswith("[local model]") and (partial.startswith(received) or received.startswith(partial))
        kept += 1

    gateway = start_server("gateway", env=ENV)  # the last killed process's lease expires, then is taken over
    final = local_http.post(f"{gateway.url}/api/chat", timeout=60,
                       json={"id": "c", "conversationId": THREAD, "messages": [user_message("last", "and now?")]})
    assert final.status_code == 200
    rows = stored(db)
    assert [role for _, role, _ in rows] == ["user", "assistant"] * (ROUNDS + 1)  # never two users in a row
    assert len({mid for mid, _, _ in rows}) == len(rows)  # the final save replaced checkpoints, no duplicates
    last = rows[-1][2]
    assert "interrupted" not in last["metadata"]
    assert re.search(r"I can see (\d+) earlier messages", last["content"]).group(1) == str(min(2 * ROUNDS, WINDOW))
    assert kept == ROUNDS
    assert sqlite_rows(db, "SELECT count(*) FROM thread_leases") == [(0,)]


def test_a_completed_reply_replaces_its_checkpoints(start_server, data_dir: Path):
    db = data_dir / "dev-server.db"
    gateway = start_server("gateway", env=ENV)
    response = local_http.post(f"{gateway.url}/api/chat", timeout=60,
                          json={"conversationId": THREAD, "messages": [user_message("whole", "slowly [[slower]]")]})
    assert response.status_code == 200 and "[DONE]" in response.text
    rows = stored(db)
    assert [role for _, role, _ in rows] == ["user", "assistant"]
    reply = rows[1][2]
    assert "interrupted" not in reply["metadata"] and reply["metadata"]["finishReason"] == "stop"
    assert reply["content"].endswith("in this conversation. I was also given system instructions.")


KILL_ROUNDS = int(os.environ.get("CRASH_KILL_ROUNDS", "20"))
# the default checkpoint interval (1 s): a reply killed within its first second has no
# checkpoint, only its recorded frames
SALVAGE_ENV = {"DEV_SERVER_TURN_LEASE_S": "1", "DEV_SERVER_STREAM_DEAD_AFTER_S": "0.5",
               "DEV_SERVER_TELEMETRY": "false"}


def test_a_reply_killed_at_a_random_point_after_its_first_text_keeps_that_text(start_server, data_dir: Path):
    import random
    import time

    db = data_dir / "dev-server.db"
    chooser = random.Random(25)
    kept = 0
    gateway = start_server("gateway", env=SALVAGE_ENV)
    for round_ in range(KILL_ROUNDS):
        first, received = "", []
        body = {"id": f"k{round_}", "conversationId": "killed-early",
                "messages": [user_message(f"k{round_}", f"round {round_} [[slower]]")]}
        with local_http.stream("POST", f"{gateway.url}/api/chat", json=body, timeout=60) as response:
            assert response.status_code == 200, response.read()
            delay = chooser.uniform(0.0, 0.9)  # within the first second: before any checkpoint
            lines = response.iter_lines()
            for line in lines:
                if line.startswith("data: {") and json.loads(line[6:])["type"] == "text-delta":
                    first = json.loads(line[6:])["delta"]
                    received.append(first)
                    break
            time.sleep(delay)
            gateway.process.kill()
            gateway.process.wait()
        assert first, "no text arrived before the kill"
        gateway = start_server("gateway", env=SALVAGE_ENV)  # its chores rebuild the reply
        deadline = time.monotonic() + 20
        while True:
            rows = sqlite_rows(db, "SELECT role, content FROM messages WHERE thread_id = 'killed-early'"
                               " ORDER BY created_at, seq")
            # an empty checkpoint may stand there first (the model's first event came late)
            if len(rows) == 2 * (round_ + 1) and json.loads(rows[-1][1])["content"]:
                break
            assert time.monotonic() < deadline, f"round {round_}: the killed reply was not rebuilt: {rows[-2:]}"
            time.sleep(0.05)
        role, content = rows[-1][0], json.loads(rows[-1][1])
        assert role == "assistant" and content["metadata"]["interrupted"] is True
        assert content["content"].startswith(first), (first, content["content"])
        kept += 1
    assert kept == KILL_ROUNDS
    roles = [r[0] for r in sqlite_rows(db, "SELECT role FROM messages WHERE thread_id = 'killed-early'"
                                           " ORDER BY created_at, seq")]
    assert roles == ["user", "assistant"] * KILL_ROUNDS
