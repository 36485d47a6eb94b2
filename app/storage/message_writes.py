"""SQL steps that run inside a conversation store's write transaction.

Each takes the writer connection of an open ``LibSQLStore.write()`` block, so several of
them compose into one unit of work (``ConversationStore.record_turn``, ``save_messages``,
``clone_thread``) and commit or roll back together. Batches are multi-row statements or
``executemany``: one thread hop each, however many messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import aiosqlite

from app.clock import now_iso

_INSERT_BATCH = 500  # 7 parameters a row, well under SQLite's 32,766 limit
_ID_BATCH = 900


def content_json(content: dict[str, Any]) -> str:
    return json.dumps(content, separators=(",", ":"))


def json_or_null(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value)


async def ensure_threads(conn: aiosqlite.Connection, threads: Sequence[Any]) -> dict[str, Any]:
    """Create the threads that do not exist yet (first statement: it opens the transaction);
    returns every one of them as stored, by id."""
    now = now_iso()
    await conn.executemany(
        "INSERT OR IGNORE INTO threads (id, resource_id, title, metadata, created_at, updated_at, agent_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(t.id, t.resource_id, t.title, json_or_null(t.metadata), t.created_at or now, now, t.agent_id)
         for t in threads])
    ids = list({t.id for t in threads})
    rows = await conn.execute_fetchall(f"SELECT * FROM threads WHERE id IN ({','.join('?' * len(ids))})", ids)
    return {row["id"]: row for row in rows}


async def locate(conn: aiosqlite.Connection, ids: Sequence[str]) -> dict[str, tuple[str, str, str | None, str]]:
    """Which of these message ids exist: id -> (thread id, its resource, its agent, the role)."""
    found: dict[str, tuple[str, str, str | None, str]] = {}
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _ID_BATCH):
        batch = unique[start:start + _ID_BATCH]
        rows = await conn.execute_fetchall(
            "SELECT m.id, m.thread_id, t.resource_id, t.agent_id, m.role FROM messages m JOIN threads t ON t.id = m.thread_id"
            f" WHERE m.id IN ({','.join('?' * len(batch))})", batch)
        found.update({r[0]: (r[1], r[2], r[3], r[4]) for r in rows})
    return found


async def insert_messages(conn: aiosqlite.Connection, thread_id: str, messages: Sequence[Any]) -> list[str]:
    """Insert the messages the database lacks (``INSERT OR IGNORE ... RETURNING``): the ids
    it returns are exactly the new ones."""
    inserted: list[str] = []
    for start in range(0, len(messages), _INSERT_BATCH):
        batch = messages[start:start + _INSERT_BATCH]
        params: list[Any] = []
        for m in batch:
            params += [m.id, thread_id, m.resource_id, m.role, m.type, content_json(m.content), m.created_at]
        rows = await conn.execute_fetchall(
            "INSERT OR IGNORE INTO messages (id, thread_id, resource_id, role, type, content, created_at)"
            f" VALUES {', '.join(['(?, ?, ?, ?, ?, ?, ?)'] * len(batch))} RETURNING id", params)
        inserted += [row[0] for row in rows]
    return inserted


async def upsert_messages(conn: aiosqlite.Connection, messages: Sequence[Any]) -> None:
    """Insert, or bring up to date (and into its thread), each message: one ``executemany``."""
    await conn.executemany(
        "INSERT INTO messages (id, thread_id, resource_id, role, type, content, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET thread_id = excluded.thread_id,"
        " resource_id = excluded.resource_id, role = excluded.role, type = excluded.type,"
        " content = excluded.content",
        [(m.id, m.thread_id, m.resource_id, m.role, m.type, content_json(m.content), m.created_at)
         for m in messages])


async def replace_and_trim(conn: aiosqlite.Connection, thread_id: str, message: Any) -> None:
    """Bring a stored message up to date and delete everything after it in its thread."""
    await conn.execute("UPDATE messages SET content = ?, role = ?, type = ? WHERE id = ?",
                       (content_json(message.content), message.role, message.type, message.id))
    await conn.execute(
        "DELETE FROM messages WHERE thread_id = ? AND (created_at, seq) >"
        " (SELECT created_at, seq FROM messages WHERE id = ?)", (thread_id, message.id))
