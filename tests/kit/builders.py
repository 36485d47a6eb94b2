"""Builders for what tests send and seed: UI messages and their parts (as ``useChat`` sends
them), stored messages (``dev_server.storage.conversations.Message``, the v2 format the stores
keep) and threads."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dev_server.kernel.messages import Message, Thread
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.migrate import load_migrations
from tests.support import user_message

__all__ = ["user_message", "ui_message", "text_part", "file_part", "data_part", "tool_part", "stored_text",
           "stored_data", "stored_tool_invocation", "seed_threads"]


# -- UI messages (what a client posts to /api/chat) -------------------------------------------


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def file_part(media_type: str, url: str, filename: str | None = None) -> dict[str, Any]:
    return {"type": "file", "mediaType": media_type, "url": url, **({"filename": filename} if filename else {})}


def data_part(name: str, data: Any, part_id: str | None = None) -> dict[str, Any]:
    return {"type": f"data-{name}", **({"id": part_id} if part_id else {}), "data": data}


def tool_part(name: str, call_id: str, tool_input: Any, output: Any = None, *,
              state: str = "output-available") -> dict[str, Any]:
    """A static tool part as ``useChat`` keeps it (``tool-NAME``)."""
    return {"type": f"tool-{name}", "toolCallId": call_id, "state": state, "input": tool_input,
            **({"output": output} if output is not None else {})}


def ui_message(message_id: str, role: str, *parts: dict[str, Any] | str) -> dict[str, Any]:
    """A UI message; a bare string is a text part (``user_message`` is the one-text case)."""
    return {"id": message_id, "role": role, "parts": [text_part(p) if isinstance(p, str) else p for p in parts]}


# -- stored messages and threads ---------------------------------------------------------------


def minute_at(minute: int) -> str:
    return f"2026-01-01T10:{minute:02d}:00.000Z"


def stored_text(message_id: str, role: str, text: str, minute: int, thread: str = "t",
                resource: str = "r") -> Message:
    """A stored text message at 10:``minute`` on 2026-01-01."""
    return Message(message_id, thread, resource, role, {"format": 2, "parts": [text_part(text)], "content": text},
                   minute_at(minute))


def stored_data(message_id: str, minute: int, thread: str = "t") -> Message:
    """A stored assistant message of data parts only (an observation marker)."""
    parts = [{"type": "step-start"}, {"type": "data-om-observation-end", "data": {"cycleId": "c"}}]
    return Message(message_id, thread, "r", "assistant", {"format": 2, "parts": parts}, minute_at(minute))


def stored_tool_invocation(call_id: str, name: str, args: dict[str, Any], result: Any) -> dict[str, Any]:
    """A finished tool call as the stores keep it (a v2 ``tool-invocation`` part)."""
    return {"type": "tool-invocation", "toolInvocation": {"state": "result", "toolCallId": call_id, "toolName": name,
                                                          "args": args, "result": result}}


async def seed_threads(conversations: ConversationStore, messages: list[Message],
                       title: Callable[[str], str] = lambda thread_id: f"About {thread_id}",
                       agent_id: str | None = None) -> None:
    """Save each message's thread (in order of first appearance, titled ``title(id)``, of
    ``agent_id``), then the messages one by one."""
    for thread_id, resource_id in dict.fromkeys((m.thread_id, m.resource_id) for m in messages):
        await conversations.save_thread(Thread(thread_id, resource_id, title=title(thread_id), agent_id=agent_id))
    for message in messages:
        await conversations.append_messages(message.thread_id, [message])


def database_at_version(path: Path, last_version: int) -> None:
    """A database as an older release left it: the migrations up to ``last_version``."""
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE _migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                     " applied_at TEXT NOT NULL)")
        for migration in load_migrations("libsql"):
            if migration.version <= last_version:
                conn.executescript(migration.sql)
                conn.execute("INSERT INTO _migrations VALUES (?, ?, 'then')", (migration.version, migration.name))
