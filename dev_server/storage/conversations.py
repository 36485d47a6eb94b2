"""Threads and messages on the default store; the only module that writes their SQL.

Messages are kept whole (Mastra's content format 2, as JSON) and never trimmed: what a
model sees is chosen by the memory layer. A message id is unique across the database, and
saving is insert-or-ignore by id, so a client that re-sends the history (``useChat`` does,
every turn) never duplicates a row. ``(created_at, seq)`` is a total order within a thread:
``seq`` is the insertion order and breaks ties.

A unit of work is one ``BEGIN IMMEDIATE`` transaction on the writer connection (or its part
of one, when writes queued together: group commit), run as one plain function on its
thread (``LibSQLStore.run_write``): a turn's writes (``record_turn``), a clone, a
``save-messages`` batch, a guarded delete. The lock is taken before anything is read, so
what a unit checks is what it writes against; a failure anywhere rolls it all back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from dev_server.kernel import ids
from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, now_iso
from dev_server.kernel.messages import Message, Thread
from dev_server.storage import message_writes as writes
from dev_server.storage.conversation_records import (
    MESSAGE_COLUMNS,
    MessageNotVisible,
    ThreadExists,
    ThreadNotVisible,
    message_from_row,
    thread_from_row,
)
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.message_window import MessageWindows

OrderField = Literal["createdAt", "updatedAt"]
Direction = Literal["ASC", "DESC"]
_THREAD_COLUMNS = {"createdAt": "created_at", "updatedAt": "updated_at"}


@dataclass
class TurnWrites:
    """What a turn stores, decided from what the thread already holds (``Memory``'s rules):
    ``replace`` is a known message brought up to date, everything after it deleted;
    ``replay`` is the stored reply a retried turn is answered with (it writes nothing)."""

    replace: Message | None = None
    append: list[Message] = field(default_factory=list)
    replay: Message | None = None


# following(id of a message of this thread) -> (that message as stored, the few after it)
Following = Callable[[str], tuple[Message, list[Message]]]
# plan(stored thread, {message id: (thread id, stored role)} of the incoming ids already
# stored, here or elsewhere, following) -> writes
TurnPlan = Callable[[Thread, dict[str, tuple[str, str]], Following], TurnWrites]
FOLLOWING_LIMIT = 8  # enough to see the anchor's reply and whether another turn came after it

_MESSAGE_SELECT = f"SELECT {MESSAGE_COLUMNS} FROM messages"


class ConversationStore:
    def __init__(self, db: LibSQLStore, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.clock = clock  # what the stores and features built on this one read the time from
        self.windows = MessageWindows(db)

    # -- threads -------------------------------------------------------------------------

    async def get_thread(self, thread_id: str) -> Thread | None:
        row = await self.db.fetch_one("SELECT * FROM threads WHERE id = ?", (thread_id,))
        return thread_from_row(row) if row else None

    async def ensure_thread(self, thread_id: str, resource_id: str, title: str = "",
                            metadata: dict[str, Any] | None = None, agent_id: str | None = None) -> Thread:
        """The thread with this id, created for ``resource_id`` if it does not exist yet.

        The caller checks ownership: an existing thread keeps its own resource.
        """
        new = Thread(thread_id, resource_id, title, metadata, agent_id=agent_id)
        now = now_iso(self.clock)
        stored = await self.db.run_write(lambda conn: writes.ensure_threads(conn, [new], now))
        return thread_from_row(stored[thread_id])

    async def save_thread(self, thread: Thread, *, unless_owned_by_other_than: str | None = None) -> Thread:
        """Create or overwrite a thread (Studio's create: an existing id is replaced, keeping
        its ``created_at``); returns it as stored. With ``unless_owned_by_other_than``, an
        existing thread of another resource is left alone and ``ThreadExists`` raised: one
        statement, so no other write comes between the check and the write."""
        now = now_iso(self.clock)
        owner = unless_owned_by_other_than
        params = (thread.id, thread.resource_id, thread.title, writes.json_or_null(thread.metadata),
                  thread.created_at or now, now, thread.agent_id, owner, owner)

        def work(conn: sqlite3.Connection) -> Any:
            rows = conn.execute(
                "INSERT INTO threads (id, resource_id, title, metadata, created_at, updated_at, agent_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET resource_id = excluded.resource_id,"
                " title = excluded.title, metadata = excluded.metadata, updated_at = excluded.updated_at,"
                " agent_id = coalesce(excluded.agent_id, threads.agent_id)"
                " WHERE ? IS NULL OR threads.resource_id = ? RETURNING *", params).fetchall()
            if not rows:
                raise ThreadExists(thread.id)
            return rows[0]

        return thread_from_row(await self.db.run_write(work))

    async def update_thread(self, thread_id: str, *, title: str | None = None,
                            metadata: dict[str, Any] | None = None,
                            resource_id: str | None = None) -> Thread | None:
        """Change the given fields; returns the thread as stored (None if it does not exist)."""
        sets, params = ["updated_at = ?"], [now_iso(self.clock)]
        for column, value in (("title", title), ("resource_id", resource_id)):
            if value is not None:
                sets.append(f"{column} = ?")
                params.append(value)
        if metadata is not None:
            sets.append("metadata = ?")
            params.append(writes.stored_json(metadata))
        sql = f"UPDATE threads SET {', '.join(sets)} WHERE id = ? RETURNING *"
        rows = await self.db.run_write(lambda conn: conn.execute(sql, (*params, thread_id)).fetchall())
        return thread_from_row(rows[0]) if rows else None

    async def set_title_if_untitled(self, thread_id: str, resource_id: str, title: str,
                                    placeholder_prefix: str) -> bool:
        """Title a thread that has none yet (empty, or a ``placeholder_prefix`` placeholder),
        in ``resource_id`` only; a missing thread stays missing. ``updated_at`` is left as it
        is: a title is not activity. True when a row was written."""
        params = (title, thread_id, resource_id, len(placeholder_prefix), placeholder_prefix)
        return await self.db.run_write(lambda conn: conn.execute(
            "UPDATE threads SET title = ? WHERE id = ? AND resource_id = ?"
            " AND (title IS NULL OR title = '' OR substr(title, 1, ?) = ?)", params).rowcount > 0)

    async def delete_thread(self, thread_id: str) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM messages WHERE thread_id = ?", (thread_id,))
            return conn.execute("DELETE FROM threads WHERE id = ?", (thread_id,)).rowcount > 0

        return await self.db.run_write(work)

    async def list_threads(self, *, resource_id: str | None = None, metadata: dict[str, Any] | None = None,
                           order_by: OrderField = "createdAt", direction: Direction = "DESC",
                           page: int = 0, per_page: int | None = 100,
                           agent_alias: tuple[str, str] | None = None) -> tuple[list[Thread], int]:
        """``agent_alias = (agent id, the agent's own resource)``: besides ``resource_id``, the
        threads that agent holds in its own resource (the gateway's conversations)."""
        where, params = [], []
        if resource_id is not None and agent_alias is not None:
            where.append("(resource_id = ? OR (resource_id = ? AND agent_id = ?))")
            params += [resource_id, agent_alias[1], agent_alias[0]]
        elif resource_id is not None:
            where.append("resource_id = ?")
            params.append(resource_id)
        for key, value in (metadata or {}).items():
            where.append("json_extract(metadata, ?) = json_extract(?, '$')")
            params += [f'$."{key}"', writes.stored_json(value)]
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        total_row = await self.db.fetch_one(f"SELECT count(*) FROM threads{clause}", params)
        column = _THREAD_COLUMNS[order_by]
        sql = f"SELECT * FROM threads{clause} ORDER BY {column} {direction}, id {direction}"
        if per_page is not None:
            sql += " LIMIT ? OFFSET ?"
            params = [*params, per_page, page * per_page]
        rows = await self.db.fetch_all(sql, params)
        return [thread_from_row(r) for r in rows], total_row[0]

    # -- messages ------------------------------------------------------------------------

    async def append_messages(self, thread_id: str, messages: Sequence[Message]) -> list[str]:
        """Insert the messages the database does not have yet; returns the ids inserted.
        The thread's ``updated_at`` moves to the clock's now when any was new."""
        now = now_iso(self.clock)
        return await self.db.run_write(lambda conn: writes.insert_messages(conn, thread_id, messages, now))

    async def add_parts_to_last_reply(self, thread_id: str, parts: Sequence[dict[str, Any]]) -> bool:
        """Append ``parts`` to the thread's newest assistant message; False when it has none."""
        return await self.db.run_write(lambda conn: writes.add_parts_to_last_reply(conn, thread_id, parts))

    async def record_turn(self, thread: Thread, incoming: Sequence[Message],
                          plan: TurnPlan) -> tuple[Thread, TurnWrites]:
        """A turn's writes as one transaction: ensure the thread, find which incoming ids it
        (or another thread) already holds, let ``plan`` decide (and check ownership: it may
        raise, which rolls everything back; it may read a stored message and the ones after
        it), replace the anchor and drop what followed it, append the rest. Returns the
        thread as stored and the plan's writes; ``append`` holds only the ids inserted.

        ``plan`` runs on the writer thread, inside the transaction: plain code, no awaits."""
        now = now_iso(self.clock)

        def work(conn: sqlite3.Connection) -> tuple[Thread, TurnWrites]:
            stored = thread_from_row(writes.ensure_threads(conn, [thread], now)[thread.id])
            ids = [m.id for m in incoming]
            found = writes.locate(conn, ids + [f"{i}@{thread.id}" for i in ids])

            def following(message_id: str) -> tuple[Message, list[Message]]:
                rows = writes.message_and_following(conn, stored.id, message_id, FOLLOWING_LIMIT)
                return message_from_row(rows[0]), [message_from_row(r) for r in rows[1:]]

            turn = plan(stored, {mid: (owner, role) for mid, (owner, _, _, role) in found.items()}, following)
            if turn.replace is not None:
                writes.replace_and_trim(conn, stored.id, turn.replace)
            inserted = set(writes.insert_messages(conn, stored.id, turn.append, now))
            return stored, TurnWrites(turn.replace, [m for m in turn.append if m.id in inserted], turn.replay)

        return await self.db.run_write(work)

    async def save_messages(self, threads: Sequence[Thread], messages: Sequence[Message]) -> None:
        """Studio's save-messages as one transaction: create the missing threads, then insert
        or update every message. A thread of another resource (``ThreadNotVisible``) or a
        message id stored under another resource (``MessageNotVisible``) writes nothing."""
        owner_of = {t.id: t.resource_id for t in threads}
        target = {m.id: owner_of[m.thread_id] for m in messages}
        now = now_iso(self.clock)

        def work(conn: sqlite3.Connection) -> None:
            stored = writes.ensure_threads(conn, threads, now)
            for thread in threads:
                if stored[thread.id]["resource_id"] != thread.resource_id:
                    raise ThreadNotVisible(thread.id)
            located = writes.locate(conn, list(target))
            for mid, (_, resource, _, _) in located.items():
                if target[mid] != resource:
                    raise MessageNotVisible(mid)
            writes.upsert_messages(conn, messages, now, located)

        await self.db.run_write(work)

    async def salvage_reply(self, thread_id: str, reply: Message, answered_id: str) -> bool:
        """Store a reply rebuilt after a crash (``dev_server.agents.salvage``) right after the user
        message it answers, in one transaction; False when it is not needed: that message is
        gone (edited away), another answer already follows it, or the reply is stored with
        at least as much text (a checkpoint, or the final save). A reply says which message
        it answers (``metadata.answers``): a retry answered after other turns came is found
        wherever it stands."""
        def work(conn: sqlite3.Connection) -> bool:
            stored = conn.execute(f"{_MESSAGE_SELECT} WHERE id = ?", (reply.id,)).fetchone()
            if stored is not None:
                if (len(message_from_row(stored).content.get("content") or "")
                        >= len(reply.content.get("content") or "")):
                    return False
                return writes.replace_message(conn, reply) > 0
            rows = writes.message_and_following(conn, thread_id, answered_id, 1)
            if not rows or rows[0]["role"] != "user" or (len(rows) > 1 and rows[1]["role"] == "assistant"):
                return False
            if conn.execute("SELECT 1 FROM messages WHERE thread_id = ? AND role = 'assistant'"
                            " AND json_extract(content, '$.metadata.answers') = ? LIMIT 1",
                            (thread_id, answered_id)).fetchone() is not None:
                return False
            reply.created_at = rows[0]["created_at"]  # sorts right after it (seq breaks the tie)
            return bool(writes.insert_messages(conn, thread_id, [reply], now_iso(self.clock)))

        return await self.db.run_write(work)

    async def replace_message(self, message: Message) -> None:
        await self.db.run_write(lambda conn: writes.replace_message(conn, message))

    async def get_message(self, message_id: str) -> Message | None:
        row = await self.db.fetch_one(f"{_MESSAGE_SELECT} WHERE id = ?", (message_id,))
        return message_from_row(row) if row else None

    async def delete_after(self, thread_id: str, message_id: str) -> int:
        """Delete every message of the thread that comes after the given one."""
        return await self.db.run_write(lambda conn: writes.delete_after(conn, thread_id, message_id))

    async def recent_messages(self, thread_id: str, limit: int | None) -> list[Message]:
        """The newest ``limit`` messages of a thread (all when None), oldest first."""
        if limit is None:
            rows = await self.db.fetch_all(
                f"{_MESSAGE_SELECT} WHERE thread_id = ? ORDER BY created_at, seq", (thread_id,))
            return [message_from_row(r) for r in rows]
        rows = await self.db.fetch_all(
            f"{_MESSAGE_SELECT} WHERE thread_id = ? ORDER BY created_at DESC, seq DESC LIMIT ?",
            (thread_id, limit))
        return [message_from_row(r) for r in reversed(rows)]

    async def messages_since(self, thread_id: str, since: str | None) -> list[Message]:
        """The thread's messages created at or after ``since`` (all when None), oldest first:
        Observational Memory's unobserved candidates (ties at the cursor are kept for its
        observed-id check)."""
        if since is None:
            return await self.recent_messages(thread_id, None)
        rows = await self.db.fetch_all(
            f"{_MESSAGE_SELECT} WHERE thread_id = ? AND created_at >= ? ORDER BY created_at, seq", (thread_id, since))
        return [message_from_row(r) for r in rows]

    async def window_since(self, thread_id: str, since: str | None, *,
                           advance: bool = True) -> tuple[list[Message], dict[int, Any]]:
        """``messages_since``, answered from what this process read of the thread before plus
        what changed since (``dev_server.storage.message_window``), with the caller's values
        derived from each message (by ``seq``). The messages are shared: never change one.
        ``advance=False``: a look past the window's start that keeps it where it is."""
        return await self.windows.since(thread_id, since, advance=advance)

    async def resource_messages_after(self, resource_id: str, exclude_thread_id: str,
                                      cursor_path: str) -> list[Message]:
        """One read for a whole resource: the messages of its threads but one that are newer
        than each thread's own cursor, an ISO time at ``cursor_path`` in the thread's
        metadata (all of a thread without one), oldest first."""
        rows = await self.db.fetch_all(
            "SELECT m.seq, m.id, m.thread_id, m.resource_id, m.role, m.type, m.content, m.created_at"
            " FROM messages m JOIN threads t ON t.id = m.thread_id"
            " WHERE t.resource_id = ? AND t.id != ? AND m.created_at > coalesce(json_extract(t.metadata, ?), '')"
            " ORDER BY m.created_at, m.seq", (resource_id, exclude_thread_id, cursor_path))
        return [message_from_row(r) for r in rows]

    async def count_messages(self, thread_id: str) -> int:
        row = await self.db.fetch_one("SELECT message_count FROM threads WHERE id = ?", (thread_id,))
        return row[0] if row else 0

    async def page_messages(self, thread_id: str, *, page: int = 0, per_page: int | None = 40,
                            direction: Direction = "DESC", roles: Sequence[str] | None = None,
                            after: str | None = None, before: str | None = None,
                            after_inclusive: bool = True, before_inclusive: bool = True) -> tuple[list[Message], int]:
        """A page window chosen in ``direction`` order, returned oldest first.

        ``roles`` and the ``after``/``before`` timestamps filter before paging.
        """
        where, params = ["thread_id = ?"], [thread_id]
        if roles:
            where.append(f"role IN ({','.join('?' * len(roles))})")
            params += list(roles)
        if after is not None:
            where.append("created_at >= ?" if after_inclusive else "created_at > ?")
            params.append(after)
        if before is not None:
            where.append("created_at <= ?" if before_inclusive else "created_at < ?")
            params.append(before)
        clause = " AND ".join(where)
        if len(where) == 1:
            total = await self.count_messages(thread_id)
        else:
            total = (await self.db.fetch_one(f"SELECT count(*) FROM messages WHERE {clause}", params))[0]
        sql = f"{_MESSAGE_SELECT} WHERE {clause} ORDER BY created_at {direction}, seq {direction}"
        if per_page is not None:
            sql += " LIMIT ? OFFSET ?"
            params = [*params, per_page, page * per_page]
        messages = [message_from_row(r) for r in await self.db.fetch_all(sql, params)]
        if direction == "DESC":
            messages.reverse()
        return messages, total

    async def search_messages(self, text: str, *, resource_id: str | None, thread_id: str | None,
                              limit: int, agent_alias: tuple[str, str] | None = None) -> list[tuple[Message, str]]:
        """Messages whose text contains ``text`` (case-insensitive), newest first, with thread
        titles. Three characters or more read the trigram index (``messages_fts``), the text
        quoted as one FTS5 string so no query can be a syntax error; shorter ones scan."""
        if len(text) >= 3:
            source = "messages_fts f JOIN messages m ON m.seq = f.rowid"
            where, params = ["messages_fts MATCH ?"], ['"' + text.replace('"', '""') + '"']
        else:
            source = "messages m"
            pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            where, params = ["json_extract(m.content, '$.content') LIKE ? ESCAPE '\\'"], [pattern]
        if resource_id is not None and agent_alias is not None:
            where.append("(t.resource_id = ? OR (t.resource_id = ? AND t.agent_id = ?))")
            params += [resource_id, agent_alias[1], agent_alias[0]]
        elif resource_id is not None:
            where.append("t.resource_id = ?")
            params.append(resource_id)
        if thread_id is not None:
            where.append("m.thread_id = ?")
            params.append(thread_id)
        rows = await self.db.fetch_all(
            "SELECT m.seq, m.id, m.thread_id, m.resource_id, m.role, m.type, m.content, m.created_at, t.title"
            f" FROM {source} JOIN threads t ON t.id = m.thread_id WHERE {' AND '.join(where)}"
            " ORDER BY m.created_at DESC, m.seq DESC LIMIT ?", [*params, limit])
        return [(message_from_row(r), r["title"]) for r in rows]
    async def clone_thread(self, source: Thread, new_thread: Thread, message_limit: int | None) -> list[Message]:
        """Copy a thread and its newest ``message_limit`` messages (all when None) under new
        ids, in one transaction; ``ThreadExists`` if the new id is taken."""
        now = now_iso(self.clock)
        new_thread.created_at = new_thread.updated_at = now
        sql = f"{_MESSAGE_SELECT} WHERE thread_id = ? ORDER BY created_at DESC, seq DESC"
        params: list[Any] = [source.id]
        if message_limit is not None:
            sql += " LIMIT ?"
            params.append(message_limit)

        def work(conn: sqlite3.Connection) -> list[Message]:
            # checked, not caught: on a libsql server a statement's error surfaces later (dev_server.storage.hrana)
            if conn.execute("SELECT 1 FROM threads WHERE id = ?", (new_thread.id,)).fetchone():
                raise ThreadExists(new_thread.id)
            conn.execute(
                "INSERT INTO threads (id, resource_id, title, metadata, created_at, updated_at, agent_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (new_thread.id, new_thread.resource_id, new_thread.title, writes.json_or_null(new_thread.metadata),
                 now, now, new_thread.agent_id))
            originals = [message_from_row(r) for r in reversed(conn.execute(sql, params).fetchall())]
            copies = [Message(str(ids.uuid4()), new_thread.id, new_thread.resource_id, m.role, m.content,
                              m.created_at, m.type) for m in originals]
            writes.insert_messages(conn, new_thread.id, copies, now)
            return copies

        return await self.db.run_write(work)

    async def working_memory(self, *, thread_id: str | None = None, resource_id: str | None = None) -> str | None:
        if thread_id is not None:
            row = await self.db.fetch_one("SELECT working_memory FROM threads WHERE id = ?", (thread_id,))
        else:
            row = await self.db.fetch_one("SELECT working_memory FROM resources WHERE id = ?", (resource_id,))
        return row[0] if row else None

    async def set_working_memory(self, text: str, *, thread_id: str | None = None,
                                 resource_id: str | None = None) -> None:
        now = now_iso(self.clock)
        await self.db.run_write(lambda conn: _put_working_memory(conn, text, now, thread_id, resource_id))

    async def change_working_memory(self, change: Callable[[str | None], str], *, thread_id: str | None = None,
                                    resource_id: str | None = None) -> str:
        """Store ``change(current)`` as the document, read and written in one transaction
        (``BEGIN IMMEDIATE``: the lock is taken before the read), so two concurrent merges
        (two threads of one resource, or two processes) both land. ``change`` runs on the
        writer thread: plain code."""
        now = now_iso(self.clock)

        def work(conn: sqlite3.Connection) -> str:
            table, key = ("threads", thread_id) if thread_id is not None else ("resources", resource_id)
            row = conn.execute(f"SELECT working_memory FROM {table} WHERE id = ?", (key,)).fetchone()
            text = change(row[0] if row else None)
            _put_working_memory(conn, text, now, thread_id, resource_id)
            return text

        return await self.db.run_write(work)

    async def messages_around(self, thread_id: str, anchor_id: str, *, after: bool,
                              limit: int) -> list[Message] | None:
        """Cursor paging: up to ``limit`` messages after (or before) an anchor, oldest first.

        None when the anchor is not a message of this thread.
        """
        anchor = await self.db.fetch_one(
            "SELECT created_at, seq FROM messages WHERE id = ? AND thread_id = ?", (anchor_id, thread_id))
        if anchor is None:
            return None
        op, order = (">", "ASC") if after else ("<", "DESC")
        rows = await self.db.fetch_all(
            f"{_MESSAGE_SELECT} WHERE thread_id = ? AND (created_at, seq) {op} (?, ?)"
            f" ORDER BY created_at {order}, seq {order} LIMIT ?",
            (thread_id, anchor["created_at"], anchor["seq"], limit))
        messages = [message_from_row(r) for r in rows]
        return messages if after else list(reversed(messages))

    async def delete_messages(self, ids: Sequence[str], *, resource_id: str | None = None,
                              agent_alias: tuple[str, str] | None = None) -> int:
        """Delete these messages in one transaction; with ``resource_id`` (and an agent
        alias, as in ``list_threads``), an id stored outside it (``MessageNotVisible``)
        deletes nothing."""
        if not ids:
            return 0
        ids = list(ids)

        def work(conn: sqlite3.Connection) -> int:
            if resource_id is not None:
                for mid, (_, owner, agent, _) in writes.locate(conn, ids).items():
                    if owner != resource_id and (agent, owner) != agent_alias:
                        raise MessageNotVisible(mid)
            return conn.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(ids))})", ids).rowcount

        return await self.db.run_write(work)


def _put_working_memory(conn: sqlite3.Connection, text: str, now: str, thread_id: str | None,
                        resource_id: str | None) -> None:
    """Store the document on the thread, or on the resource (created if new)."""
    if thread_id is not None:
        conn.execute("UPDATE threads SET working_memory = ?, updated_at = ? WHERE id = ?", (text, now, thread_id))
    else:
        conn.execute("INSERT INTO resources (id, working_memory, created_at, updated_at) VALUES (?, ?, ?, ?)"
                     " ON CONFLICT (id) DO UPDATE SET working_memory = excluded.working_memory,"
                     " updated_at = excluded.updated_at", (resource_id, text, now, now))
