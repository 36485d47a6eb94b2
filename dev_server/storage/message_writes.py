"""SQL steps that run inside a conversation store's write transaction.

Each is plain code taking the writer connection (``sqlite3``) of a ``LibSQLStore.run_write``
unit of work, so several of them compose into one transaction (``ConversationStore.record_turn``,
``save_messages``, ``clone_thread``) that commits or rolls back whole, in one thread hop.

Message batches are multi-row ``INSERT ... VALUES (...), (...)`` statements, not
``executemany``: the FTS5 index (migration 0003) is fed by a trigger, and FTS5 writes its
pending terms out at the end of every statement (and merges what it wrote), so 500
one-row statements took 22 ms here where one 500-row statement took 6-8 ms.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from dev_server.kernel.json_text import Encoder
from dev_server.storage.conversation_records import MESSAGE_COLUMNS

_INSERT_BATCH = 500  # 7 parameters a row: 3,500 a statement, well under SQLite's 32,766 limit
_ID_BATCH = 900
_MESSAGE_COLUMNS = "(id, thread_id, resource_id, role, type, content, created_at)"


# built once (json.dumps with options builds one a call); strict JSON, whatever numbers a part
# holds: an infinity is stored as null (SQLite's JSON functions refuse Infinity), dev_server.kernel.json_text
_COMPACT = Encoder(separators=(",", ":"))
_PLAIN = Encoder()


def content_json(content: dict[str, Any]) -> str:
    return _COMPACT.encode(content)


def stored_json(value: Any) -> str:
    """Any other JSON column's text (thread metadata, OM records), as ``json.dumps`` writes it."""
    return _PLAIN.encode(value)


def json_or_null(value: dict[str, Any] | None) -> str | None:
    return None if value is None else stored_json(value)


def ensure_threads(conn: sqlite3.Connection, threads: Sequence[Any], now: str) -> dict[str, Any]:
    """Create the threads that do not exist yet (stamped ``now``); returns every one of them as stored, by id."""
    conn.executemany(
        "INSERT OR IGNORE INTO threads (id, resource_id, title, metadata, created_at, updated_at, agent_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(t.id, t.resource_id, t.title, json_or_null(t.metadata), t.created_at or now, now, t.agent_id)
         for t in threads])
    ids = list({t.id for t in threads})
    rows = conn.execute(f"SELECT * FROM threads WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall()
    return {row["id"]: row for row in rows}


def locate(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[str, str, str | None, str]]:
    """Which of these message ids exist: id -> (thread id, its resource, its agent, the role)."""
    found: dict[str, tuple[str, str, str | None, str]] = {}
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _ID_BATCH):
        batch = unique[start:start + _ID_BATCH]
        rows = conn.execute(
            "SELECT m.id, m.thread_id, t.resource_id, t.agent_id, m.role FROM messages m"
            " JOIN threads t ON t.id = m.thread_id"
            f" WHERE m.id IN ({','.join('?' * len(batch))})", batch)
        found.update({r[0]: (r[1], r[2], r[3], r[4]) for r in rows})
    return found


def _rows(messages: Sequence[Any], thread_id: str | None) -> tuple[str, list[Any]]:
    """The ``VALUES`` list and parameters of a batch (its own thread id each when None)."""
    params: list[Any] = []
    for m in messages:
        params += [m.id, thread_id or m.thread_id, m.resource_id, m.role, m.type, content_json(m.content),
                   m.created_at]
    return ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(messages)), params


def touch_threads(conn: sqlite3.Connection, thread_ids: Iterable[str], now: str) -> None:
    """A thread that got a new message was updated ``now`` (the app's clock)."""
    ids = sorted(set(thread_ids))
    if ids:
        conn.execute(f"UPDATE threads SET updated_at = ? WHERE id IN ({', '.join('?' * len(ids))})", [now, *ids])


def insert_messages(conn: sqlite3.Connection, thread_id: str, messages: Sequence[Any], now: str) -> list[str]:
    """Insert the messages the database lacks (``INSERT OR IGNORE ... RETURNING``): the ids
    it returns are exactly the new ones. The thread's ``updated_at`` moves to ``now`` when
    any was new."""
    inserted: list[str] = []
    for start in range(0, len(messages), _INSERT_BATCH):
        values, params = _rows(messages[start:start + _INSERT_BATCH], thread_id)
        rows = conn.execute(f"INSERT OR IGNORE INTO messages {_MESSAGE_COLUMNS} VALUES {values} RETURNING id",
                            params).fetchall()
        inserted += [row[0] for row in rows]
    if inserted:
        touch_threads(conn, [thread_id], now)
    return inserted


def upsert_messages(conn: sqlite3.Connection, messages: Sequence[Any], now: str, stored_ids: Iterable[str]) -> None:
    """Insert, or bring up to date (and into its thread), each message. ``stored_ids``: those
    already in the database; the threads of the others were updated ``now``."""
    stored = set(stored_ids)
    touch_threads(conn, [m.thread_id for m in messages if m.id not in stored], now)
    for start in range(0, len(messages), _INSERT_BATCH):
        values, params = _rows(messages[start:start + _INSERT_BATCH], None)
        conn.execute(
            f"INSERT INTO messages {_MESSAGE_COLUMNS} VALUES {values} ON CONFLICT (id) DO UPDATE SET"
            " thread_id = excluded.thread_id, resource_id = excluded.resource_id, role = excluded.role,"
            " type = excluded.type, content = excluded.content", params)


def replace_message(conn: sqlite3.Connection, message: Any) -> int:
    cursor = conn.execute("UPDATE messages SET content = ?, role = ?, type = ? WHERE id = ?",
                          (content_json(message.content), message.role, message.type, message.id))
    return cursor.rowcount


def delete_after(conn: sqlite3.Connection, thread_id: str, message_id: str) -> int:
    """Delete every message of the thread that comes after the given one."""
    cursor = conn.execute(
        "DELETE FROM messages WHERE thread_id = ? AND (created_at, seq) >"
        " (SELECT created_at, seq FROM messages WHERE id = ?)", (thread_id, message_id))
    return cursor.rowcount


def message_and_following(conn: sqlite3.Connection, thread_id: str, message_id: str, limit: int) -> list[Any]:
    """The rows of a message of the thread and of the ``limit`` messages after it, in order."""
    return conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages"
        " WHERE thread_id = ? AND (created_at, seq) >= (SELECT created_at, seq FROM messages WHERE id = ?)"
        " ORDER BY created_at, seq LIMIT ?", (thread_id, message_id, limit + 1)).fetchall()


def replace_and_trim(conn: sqlite3.Connection, thread_id: str, message: Any) -> None:
    """Bring a stored message up to date and delete everything after it in its thread."""
    replace_message(conn, message)
    delete_after(conn, thread_id, message.id)


def add_parts_to_last_reply(conn: sqlite3.Connection, thread_id: str, parts: Sequence[dict[str, Any]]) -> bool:
    """Append ``parts`` to the thread's newest assistant message, one statement per part.
    False when the thread has no assistant message."""
    row = conn.execute("SELECT seq FROM messages WHERE thread_id = ? AND role = 'assistant'"
                       " ORDER BY created_at DESC, seq DESC LIMIT 1", (thread_id,)).fetchone()
    if row is None:
        return False
    for part in parts:
        conn.execute("UPDATE messages SET content = json_insert(content, '$.parts[#]', json(?)) WHERE seq = ?",
                     (stored_json(part), row[0]))
    return True
