"""A thread's messages from a cursor on, read once and then kept up to date by what changed.

Observational Memory reads the thread's unobserved window at every turn
(``ConversationStore.messages_since``). Reading and decoding it whole each time costs what
the window holds (hundreds to thousands of messages), not what changed since the last turn
(the turn's own two or three). ``MessageWindows`` keeps, per thread, the messages it read
(decoded) and asks the database only for what changed since, in one statement, so one
snapshot answers both "what changed" and "may I trust what I hold":

* inserted since: ``seq`` above the highest this process saw for the thread;
* changed since (content, role, type, time, moved in): ``rev`` above the thread's
  ``message_rev`` as read (migration 0014 stamps changed rows);
* deleted or moved out since: the thread's ``message_removals`` moved, or its message count
  is not what the reads add up to; then the window is read whole again.

So what another worker process or replica wrote is seen as surely as this process's own
writes. A cursor that moves forward drops the messages before it; one that moves back reads
whole again. ``derived`` is the caller's, per message (by ``seq``): what it computed from a
message as it is now (token counts); an entry is dropped when its message changes or leaves
the window. At most ``max_threads`` threads are kept, least recently read first out.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from dev_server.kernel.messages import Message
from dev_server.storage.conversation_records import MESSAGE_COLUMNS, message_from_row
from dev_server.storage.libsql import LibSQLStore

DEFAULT_MAX_THREADS = 16

_STATE = ("SELECT 0 AS kind, message_count AS n, message_rev AS rev, message_removals AS removals,"
          " (SELECT max(seq) FROM messages WHERE thread_id = ?) AS top,"
          " NULL AS seq, NULL AS id, NULL AS thread_id, NULL AS resource_id, NULL AS role, NULL AS type,"
          " NULL AS content, NULL AS created_at FROM threads WHERE id = ?")
_ROWS = f"SELECT 1, NULL, NULL, NULL, NULL, {MESSAGE_COLUMNS} FROM messages"
# no ORDER BY: it would sort the compound in a temporary b-tree; the rows come in index order
# and are sorted (a linear pass then) in Python
_WHOLE = f"{_STATE} UNION ALL {_ROWS} WHERE thread_id = ? AND created_at >= ?"
# ``rev > 0`` lets SQLite use the partial index on revised rows, and must come after ``rev > ?``:
# of two lower bounds SQLite seeks from the first, and from 0 it read every revised message of
# the thread on every turn (a reply is revised each turn: 48 µs a read after 500 turns, 136
# after 1,500, against 12 when it seeks from the window's rev).
_CHANGES = (f"{_STATE} UNION ALL {_ROWS} WHERE thread_id = ? AND seq > ?"
            f" UNION ALL {_ROWS} WHERE thread_id = ? AND rev > ? AND rev > 0 AND seq <= ?")


@dataclass
class _Window:
    since: str
    count: int  # the thread's messages (all of them) as of the read
    rev: int
    removals: int
    top: int  # the highest seq of the thread as of the read
    messages: list[Message]  # created_at >= since, in (created_at, seq) order
    derived: dict[int, Any] = field(default_factory=dict)


def _order(message: Message) -> tuple[str, int]:
    return message.created_at, message.seq or 0


class MessageWindows:
    def __init__(self, db: LibSQLStore, *, max_threads: int = DEFAULT_MAX_THREADS) -> None:
        self.db = db
        self.max_threads = max_threads
        self._windows: OrderedDict[str, _Window] = OrderedDict()
        self.reads = {"whole": 0, "changes": 0}  # how each read was answered (tests, benches)

    async def since(self, thread_id: str, since: str | None, *,
                    advance: bool = True) -> tuple[list[Message], dict[int, Any]]:
        """The thread's messages created at or after ``since`` (all when None), oldest first,
        as ``ConversationStore.messages_since`` returns them, and the caller's ``derived``
        values of those messages. The list is the caller's; the messages are shared with
        later reads and must not be changed in place.

        ``advance=False``: a read from a time past the window's start that must not move it
        there (a queued observation reads from its oldest candidate, ahead of the record's
        cursor; moving the window would make the next turn's read, from the cursor, a whole
        read again)."""
        cursor = since or ""
        window = self._windows.get(thread_id)
        if window is not None and cursor >= window.since:
            window = await self._update(thread_id, window, cursor if advance else window.since)
        else:
            window = None
        if window is None:
            window = await self._read_whole(thread_id, cursor)
        if window is None:
            self._windows.pop(thread_id, None)
            return [], {}
        self._windows[thread_id] = window
        self._windows.move_to_end(thread_id)
        while len(self._windows) > self.max_threads:
            self._windows.popitem(last=False)
        if cursor > window.since:  # not advanced: the messages from ``since`` on
            return window.messages[bisect_left(window.messages, cursor, key=lambda m: m.created_at):], window.derived
        return list(window.messages), window.derived

    async def _read_whole(self, thread_id: str, since: str) -> _Window | None:
        self.reads["whole"] += 1
        rows = await self.db.fetch_all(_WHOLE, (thread_id, thread_id, thread_id, since))
        state = next((r for r in rows if r["kind"] == 0), None)
        if state is None:
            return None  # no such thread
        messages = [message_from_row(r) for r in rows if r["kind"] != 0]
        messages.sort(key=_order)
        return _Window(since, state["n"], state["rev"], state["removals"], state["top"] or 0, messages)

    async def _update(self, thread_id: str, window: _Window, since: str) -> _Window | None:
        """The window brought up to date from what changed; None when it must be read whole."""
        self.reads["changes"] += 1
        rows = await self.db.fetch_all(_CHANGES, (thread_id, thread_id, thread_id, window.top, thread_id, window.rev,
                                                      window.top))
        state = next((r for r in rows if r["kind"] == 0), None)
        if state is None:
            return None
        changed = [message_from_row(r) for r in rows if r["kind"] != 0]
        inserted = sum(1 for m in changed if (m.seq or 0) > window.top)
        if state["removals"] != window.removals or state["n"] != window.count + inserted:
            return None
        messages = window.messages
        if changed:
            changed.sort(key=_order)
            revised = {m.seq for m in changed if (m.seq or 0) <= window.top}
            if revised:  # an edit: its old copy goes
                messages = [m for m in messages if m.seq not in revised]
            added = [m for m in changed if m.created_at >= since]
            if added and messages and _order(added[0]) < _order(messages[-1]):
                messages = sorted([*messages, *added], key=_order)  # one sorts before the newest kept
            else:
                messages = [*messages, *added]  # the usual case: appended after the newest
            for message in changed:
                window.derived.pop(message.seq, None)  # type: ignore[arg-type]
        if since > window.since:
            cut = bisect_left(messages, since, key=lambda m: m.created_at)
            for message in messages[:cut]:
                window.derived.pop(message.seq, None)  # type: ignore[arg-type]
            messages = messages[cut:]
        window.messages, window.since = messages, since
        window.count, window.rev, window.removals = state["n"], state["rev"], state["removals"]
        window.top = max(window.top, state["top"] or 0)
        return window
