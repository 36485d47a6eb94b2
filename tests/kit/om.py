"""Observational Memory in tests: the fact the local observer picks up, the small
thresholds that make it run in a few turns, and readers of what a turn streamed
(``data-om-*`` chunks) and of what it stored (the OM record, the thread's messages)."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from datetime import UTC, datetime, timedelta
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


# -- a long conversation, generated -------------------------------------------------------

_PROJECTS = ("Orion", "Juniper", "Atlas", "Kestrel", "Lumen", "Harbor", "Quill", "Tundra")
_THINGS = ("sister", "dentist", "landlord", "cat", "garden", "bike", "laptop", "piano")
_FIRST_DAY = datetime(2025, 1, 1, 8, tzinfo=UTC)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")


def generated_conversation(count: int, *, start: int = 0, thread: str = "t") -> list[Message]:
    """``count`` messages of a long, varied chat (about 39 tokens each on average): the user
    states facts, asks, confirms what worked and asks for a tool; the assistant answers in a
    few sentences or calls a tool. A new day every 200 messages; every statement carries its
    index, so no two are alike. ``start`` continues an earlier call's conversation."""
    messages = []
    for i in range(start, start + count):
        k, day, minute = i // 2, i // 200, (i % 200) * 3
        project, thing, weekday = _PROJECTS[k % 8], _THINGS[k % 7], _DAYS[k % 5]
        stamp = (_FIRST_DAY + timedelta(days=day, minutes=minute)).strftime("%Y-%m-%dT%H:%M:00.000Z")
        parts: list[dict[str, Any]] = []
        if i % 2 == 0:
            text = (f"My {thing} appointment number {k} moved to {weekday}, so the {project} review waits.",
                    f"Can you check whether build {k} of {project} still fails on {weekday}?",
                    f"For the {project} project I decided that release {k} ships without the {thing} feature; "
                    f"the team agreed on {weekday} and the client signed off, so please plan the remaining "
                    f"tickets around that and keep the changelog short.",
                    f"That fixed it, thanks: build {k} of {project} is green now.",
                    f"Use the tracker to list the open tickets of {project} sprint {k}.")[k % 5]
        elif k % 5 == 4:
            text = f"Sprint {k} of {project} has {k % 13} open tickets; the oldest is about the {thing} page."
            parts.append({"type": "tool-invocation", "toolInvocation": {
                "state": "result", "toolCallId": f"call-{k}", "toolName": "tracker",
                "args": {"project": project, "sprint": k}, "result": {"open": k % 13}}})
        else:
            text = (f"Noted: the {project} review waits for your {thing} appointment on {weekday}. "
                    f"I moved item {k} in the plan accordingly and kept the other dates. "
                    "Tell me if anything else changes.")
        parts.append({"type": "text", "text": text})
        messages.append(Message(f"g{i}", thread, "r", "user" if i % 2 == 0 else "assistant",
                                {"format": 2, "parts": parts, "content": text}, stamp))
    return messages


def generated_log(count: int) -> str:
    """An observation log of ``count`` observation lines as a model writes them: dated
    groups of 20, every priority, tool calls grouped under their task with a ✅ outcome."""
    lines = []
    for i in range(count):
        project, thing, weekday = _PROJECTS[i % 8], _THINGS[i % 7], _DAYS[i % 5]
        if i % 20 == 0:
            lines.append(f"Date: {(_FIRST_DAY + timedelta(days=i // 20)).strftime('%b %-d, %Y')}")
        time = f"({8 + i % 20 // 2:02d}:{i % 2 * 30:02d})"
        lines.append((f"* 🔴 {time} User stated the {project} release {i} ships on {weekday} without the {thing} page",
                      f"* 🟡 {time} User asked whether build {i} of {project} still fails on {weekday}",
                      f"* 🟢 {time} Assistant suggested moving item {i} of the {project} plan to {weekday}",
                      f"* 🟡 {time} Assistant listed the open tickets of {project} sprint {i}\n"
                      f"  * -> tracker: {i % 13} open, the oldest about the {thing} page",
                      f"  * ✅ {time} Ticket {i} of {project} closed; user confirmed the {thing} page works")[i % 5])
    return "\n".join(lines)
