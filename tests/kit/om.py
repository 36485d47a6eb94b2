"""Observational Memory in tests: the fact the local observer picks up, the small
thresholds that make it run in a few turns, and readers of what a turn streamed
(``data-om-*`` chunks) and of what it stored (the OM record, the thread's messages)."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from dev_server.kernel.messages import Message
from tests.kit.servers import DB_NAME
from tests.support import run_node, sqlite_rows

FACT = "My name is Ada Lovelace and I am planning a hiking trip to the Alps with my two kids next summer."
# observe at 300 message tokens, reflect at 400 observation tokens, no async buffering
OM_ENV = {"DEV_SERVER_TELEMETRY": "false", "DEV_SERVER_OM_MESSAGE_TOKENS": "300",
          "DEV_SERVER_OM_OBSERVATION_TOKENS": "400", "DEV_SERVER_OM_BUFFER_TOKENS": "false"}
# observe at 600, buffer in the background every 200 tokens
ASYNC_ENV = {"DEV_SERVER_TELEMETRY": "false", "DEV_SERVER_OM_MESSAGE_TOKENS": "600",
             "DEV_SERVER_OM_OBSERVATION_TOKENS": "5000", "DEV_SERVER_OM_BUFFER_TOKENS": "200"}
HEX16 = re.compile(r"^[0-9a-f]{16}$")  # an observation group's id


# -- what a turn streamed (a ``tests.kit.chat`` result) -----------------------------------------


def om_chunks(result: dict[str, Any], kind: str = "") -> list[dict[str, Any]]:
    """The turn's ``data-om-*`` chunks whose type starts with ``data-om-{kind}``."""
    return [c for c in result["chunks"] if c["type"].startswith(f"data-om-{kind}")]


def parts(result: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The ``data`` of the turn's ``data-om-{kind}`` chunks."""
    return [c["data"] for c in result["chunks"] if c["type"] == f"data-om-{kind}"]


def status(result: dict[str, Any]) -> dict[str, Any]:
    """The turn's one ``data-om-status``."""
    [found] = parts(result, "status")
    return found


def pending(result: dict[str, Any]) -> int:
    """Unobserved message tokens at the turn's start (its status)."""
    return status(result)["windows"]["active"]["messages"]["tokens"]


# -- what is stored -------------------------------------------------------------------------


def record_row(db: Path, thread: str) -> dict[str, Any]:
    """The thread's newest OM record row."""
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM mastra_observational_memory WHERE lookup_key = ?"
                           " ORDER BY generation_count DESC LIMIT 1", (f"thread:{thread}",)).fetchone()
        return dict(row)


def settled(db: Path, thread: str, timeout: float = 30.0) -> dict[str, Any]:
    """The record once no background observer or reflector holds it."""
    deadline = time.monotonic() + timeout
    while True:
        row = record_row(db, thread)
        if not row["is_buffering_observation"] and not row["is_buffering_reflection"]:
            return row
        assert time.monotonic() < deadline, "background work did not finish"
        time.sleep(0.05)


def stored_messages(db: Path, thread: str) -> list[Message]:
    rows = sqlite_rows(db, "SELECT id, thread_id, resource_id, role, content, created_at FROM messages"
                           " WHERE thread_id = ? ORDER BY created_at, seq", (thread,))
    return [Message(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5]) for r in rows]


def thread_om(data: Path, thread: str) -> tuple[str, dict[str, Any]]:
    """The thread's title and the OM part of its metadata."""
    with sqlite3.connect(data / DB_NAME) as conn:
        title, metadata = conn.execute("SELECT title, metadata FROM threads WHERE id = ?", (thread,)).fetchone()
    return title, json.loads(metadata)["mastra"]["om"]


def await_buffer(studio_url: str, thread: str) -> dict[str, Any]:
    """The record as ``@mastra/client-js`` reads it once background work is done
    (``awaitBufferStatus``)."""
    read = run_node("om_client.mjs", {"baseUrl": studio_url, "agentId": "chat-agent", "resourceId": "chat-agent",
                                      "threadId": thread})
    assert read["ok"], read.get("error")
    return read["buffer"]["record"]
