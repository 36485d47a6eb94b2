"""Semantic recall's vector index (``dev_server.recall``) in SQL: the one module that reads
and writes ``message_vectors`` and ``embedding_queue`` (migration 0008).

On the embedded SQLite file, vectors are float32 BLOBs and a query is an exact scan in
numpy (``dev_server.recall.matrix``): this Python's ``sqlite3`` cannot load extensions, so
``sqlite-vec`` is not available, and at 100k messages an exact scan of a cached matrix
answers in milliseconds (``bench/recall.py``). The BLOB layout is libsql's ``F32_BLOB``,
so on a libsql server the same rows feed its own vector index (``native_vectors``: a
side table kept by triggers, searched in the server instead of a copy in each process).

The queue is the database's, not a process's: triggers enqueue every new or edited user
and assistant message, both processes' indexers claim batches from it (``not_before`` is
the claim's expiry), and a result is written only if the message's text version is still
the one that was claimed.

Only what was asked is embedded: an index is made for the agents whose memory searches by
meaning (``agents``: their threads' ``agent_id``), and a message of any other thread
(another agent's, or a thread of no agent) is taken off the queue unread when it is
claimed: its text never reaches an embedder. A search reads only those agents' vectors, so
vectors left from when another agent had recall on are not recalled either.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from dev_server.kernel.clock import SYSTEM_CLOCK, Clock
from dev_server.kernel.messages import Message
from dev_server.paths import migrations_dir
from dev_server.storage.conversation_records import decode_content, message_from_row
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.migrate import split_sqlite_statements

_SCHEMA_FILE = "0008_message_vectors.sql"
_TOMBSTONES_KEPT = 100_000


@dataclass(frozen=True)
class Claimed:
    seq: int
    version: int
    attempts: int
    thread_id: str
    role: str
    content: dict[str, Any]


@dataclass(frozen=True)
class Embedded:
    """What the indexer writes for one message: its pieces' vectors (None: no text)."""
    seq: int
    version: int
    thread_id: str
    text_hash: str
    vectors: list[bytes] | None


class Claims(NamedTuple):
    """A claimed batch: the messages to embed, and how many were dropped from the queue
    unembedded (of a thread whose agent does not search by meaning)."""
    claimed: list[Claimed]
    skipped: int


class VectorRow(NamedTuple):
    id: int
    seq: int
    thread_id: str
    vector: bytes | None


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class VectorIndex:
    def __init__(self, db: LibSQLStore, *, agents: frozenset[str], clock: Clock = SYSTEM_CLOCK) -> None:
        """``agents``: whose threads' messages are embedded and searched."""
        if not agents:
            raise ValueError("a vector index needs the agents whose messages it embeds")
        self.db = db
        self.agents = sorted(agents)
        self.clock = clock  # the queue's claim leases and retry times
        self._in_agents = f"({','.join('?' * len(self.agents))})"  # the agents as an SQL list

    # -- upkeep --------------------------------------------------------------------------

    async def repair(self, model: str, dimensions: int | None = None) -> dict[str, int]:
        """Make the index whole for ``model``: recreate its tables and triggers if they are
        missing (then everything is embedded again), drop vectors that are not
        ``dimensions`` floats long (corrupt), queue every user or assistant message of the
        index's agents that has no vector of this model (a new embedder, a message stored
        while the table was gone, a dropped vector, an agent that just had recall turned
        on), and take the other agents' messages off the queue. One scan of the messages;
        run at start."""
        schema = split_sqlite_statements((migrations_dir("libsql") / _SCHEMA_FILE).read_text(encoding="utf-8"))
        agents, in_agents = self.agents, self._in_agents

        def work(conn: sqlite3.Connection) -> dict[str, int]:
            present = conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE name IN"
                " ('message_vectors', 'embedding_queue', 'message_vector_tombstones')").fetchone()[0]
            rebuilt = present < 3
            if rebuilt:
                for statement in schema:
                    conn.execute(statement)
            corrupt = 0
            if dimensions:
                corrupt = conn.execute(
                    "DELETE FROM message_vectors WHERE model = ? AND vector IS NOT NULL AND length(vector) != ?",
                    (model, dimensions * 4)).rowcount
            queued = conn.execute(
                "INSERT INTO embedding_queue (message_seq) SELECT m.seq FROM messages m"
                f" JOIN threads t ON t.id = m.thread_id WHERE t.agent_id IN {in_agents}"
                " AND m.role IN ('user', 'assistant') AND NOT EXISTS (SELECT 1 FROM message_vectors v"
                " WHERE v.message_seq = m.seq AND v.model = ?)"
                " ON CONFLICT (message_seq) DO NOTHING", (*agents, model)).rowcount
            conn.execute(
                "DELETE FROM embedding_queue WHERE message_seq IN (SELECT q.message_seq FROM embedding_queue q"
                " JOIN messages m ON m.seq = q.message_seq JOIN threads t ON t.id = m.thread_id"
                f" WHERE t.agent_id IS NULL OR t.agent_id NOT IN {in_agents})", agents)
            conn.execute("DELETE FROM message_vector_tombstones WHERE id <= (SELECT max(id) FROM"
                         " message_vector_tombstones) - ?", (_TOMBSTONES_KEPT,))
            return {"rebuilt": int(rebuilt), "queued": max(0, queued), "corrupt": max(0, corrupt)}

        return await self.db.run_write(work)

    async def backlog(self) -> int:
        row = await self.db.fetch_one("SELECT count(*) FROM embedding_queue")
        return row[0] if row else 0

    async def due_in(self) -> float | None:
        """Seconds until the next queued message may be taken (0: now; None: queue empty)."""
        row = await self.db.fetch_one("SELECT min(not_before) FROM embedding_queue")
        if row is None or row[0] is None:
            return None
        return max(0.0, row[0] - self.clock.time())

    # -- the indexer's side ----------------------------------------------------------------

    async def claim(self, limit: int, lease_s: float) -> Claims:
        """Take up to ``limit`` due messages, newest first (recent talk is recalled soonest),
        for ``lease_s`` seconds; another process skips them meanwhile. Those of a thread
        whose agent is not the index's are dropped from the queue instead (``skipped``)."""
        now = self.clock.time()
        wanted = set(self.agents)

        def work(conn: sqlite3.Connection) -> tuple[list[Any], int]:
            rows = conn.execute(
                "UPDATE embedding_queue SET not_before = ? WHERE message_seq IN (SELECT message_seq FROM"
                " embedding_queue WHERE not_before <= ? ORDER BY message_seq DESC LIMIT ?)"
                " RETURNING message_seq, version, attempts", (now + lease_s, now, limit)).fetchall()
            if not rows:
                return [], 0
            seqs = [r[0] for r in rows]
            found = {r[0]: r for r in conn.execute(
                "SELECT m.seq, m.thread_id, m.role, m.content, t.agent_id FROM messages m"
                f" JOIN threads t ON t.id = m.thread_id WHERE m.seq IN ({','.join('?' * len(seqs))})", seqs)}
            # deleted meanwhile (the trigger removes them; a race leaves none behind), or not asked for
            dropped = {s for s in seqs if s not in found or found[s]["agent_id"] not in wanted}
            if dropped:
                conn.execute(f"DELETE FROM embedding_queue WHERE message_seq IN ({','.join('?' * len(dropped))})",
                             list(dropped))
            skipped = sum(1 for s in dropped if s in found)
            return [(r[0], r[1], r[2], found[r[0]]) for r in rows if r[0] not in dropped], skipped

        claimed, skipped = await self.db.run_write(work)
        return Claims([Claimed(seq, version, attempts, m["thread_id"], m["role"], decode_content(m["content"]))
                       for seq, version, attempts, m in claimed], skipped)

    async def reusable(self, model: str, hashes: Sequence[str]) -> dict[str, list[bytes | None]]:
        """Vectors already computed for these texts (a cloned thread, a repeated "thanks")."""
        if not hashes:
            return {}
        unique = list(dict.fromkeys(hashes))
        rows = await self.db.fetch_all(
            f"SELECT text_hash, chunk, vector FROM message_vectors WHERE model = ? AND text_hash IN"
            f" ({','.join('?' * len(unique))}) ORDER BY text_hash, message_seq, chunk", [model, *unique])
        found: dict[str, dict[int, bytes | None]] = {}
        for row in rows:
            pieces = found.setdefault(row["text_hash"], {})
            pieces.setdefault(row["chunk"], row["vector"])
        return {h: [pieces[i] for i in sorted(pieces)] for h, pieces in found.items()}

    async def store(self, model: str, results: Sequence[Embedded]) -> int:
        """Write the vectors of the messages whose text is still the claimed version, and
        take them off the queue; returns how many were written."""
        def work(conn: sqlite3.Connection) -> int:
            written = 0
            for result in results:
                current = conn.execute("SELECT version FROM embedding_queue WHERE message_seq = ?",
                                       (result.seq,)).fetchone()
                if current is None or current[0] != result.version:
                    continue  # edited (or deleted) meanwhile: the newer version is queued
                conn.execute("DELETE FROM message_vectors WHERE message_seq = ?", (result.seq,))
                pieces = result.vectors if result.vectors else [None]
                conn.executemany(
                    "INSERT INTO message_vectors (message_seq, chunk, thread_id, model, text_hash, vector)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [(result.seq, i, result.thread_id, model, result.text_hash, v) for i, v in enumerate(pieces)])
                conn.execute("DELETE FROM embedding_queue WHERE message_seq = ?", (result.seq,))
                written += 1
            return written

        return await self.db.run_write(work)

    async def unchanged(self, model: str, claimed: Sequence[Claimed], hashes: Sequence[str]) -> set[int]:
        """Of the claimed messages, those whose text already has its vectors of this model
        (an edit that changed no text: a marker part, a token estimate): dequeued here."""
        if not claimed:
            return set()
        seqs = [c.seq for c in claimed]
        rows = await self.db.fetch_all(
            f"SELECT DISTINCT message_seq, text_hash FROM message_vectors WHERE model = ? AND message_seq IN"
            f" ({','.join('?' * len(seqs))})", [model, *seqs])
        stored = {(r[0], r[1]) for r in rows}
        same = [(c.seq, c.version) for c, h in zip(claimed, hashes, strict=True) if (c.seq, h) in stored]
        if same:
            await self.db.run_write(lambda conn: conn.executemany(
                "DELETE FROM embedding_queue WHERE message_seq = ? AND version = ?", same))
        return {seq for seq, _ in same}

    async def retry_later(self, claimed: Sequence[Claimed], delay_s: float) -> None:
        """The embedder failed: back to the queue, due after ``delay_s``; nothing is dropped."""
        due = self.clock.time() + delay_s
        await self.db.run_write(lambda conn: conn.executemany(
            "UPDATE embedding_queue SET attempts = attempts + 1, not_before = ? WHERE message_seq = ?",
            [(due, c.seq) for c in claimed]))

    # -- the searcher's side ---------------------------------------------------------------

    async def positions(self) -> tuple[int, int, int]:
        """(newest vector id, newest tombstone id, oldest tombstone id kept): what a cached
        copy compares against."""
        row = await self.db.fetch_one(
            "SELECT (SELECT coalesce(max(id), 0) FROM message_vectors),"
            " (SELECT coalesce(max(id), 0) FROM message_vector_tombstones),"
            " (SELECT coalesce(min(id), 0) FROM message_vector_tombstones)")
        return (row[0], row[1], row[2]) if row else (0, 0, 0)

    async def rows_after(self, model: str, resource_id: str, after_id: int) -> Sequence[Sequence[Any]]:
        """The resource's vectors of ``model`` newer than ``after_id``: a range of the rowid.
        ``NOT INDEXED``: left to itself, SQLite reads every vector of the model through
        ``message_vectors_by_text`` and sorts them by id, so a cached copy catching up on
        64 new rows paid ~12 ms at 100k vectors, and a first load sorted every blob
        (``bench/recall.py``)."""
        rows = await self.db.fetch_all(
            "SELECT v.id, v.message_seq, v.thread_id, v.vector FROM message_vectors AS v NOT INDEXED"
            " JOIN threads t ON t.id = v.thread_id"
            " WHERE v.id > ? AND v.model = ? AND t.resource_id = ? AND v.vector IS NOT NULL"
            f" AND t.agent_id IN {self._in_agents} ORDER BY v.id",
            (after_id, model, resource_id, *self.agents))
        return rows  # (id, seq, thread id, vector) rows as read: a first load is 100k of them

    async def tombstones_after(self, after_id: int) -> list[tuple[int, int]]:
        """(tombstone id, deleted vector id) newer than ``after_id``."""
        rows = await self.db.fetch_all(
            "SELECT id, vector_id FROM message_vector_tombstones WHERE id > ? ORDER BY id", (after_id,))
        return [(r[0], r[1]) for r in rows]

    async def stats(self, model: str) -> dict[str, int]:
        row = await self.db.fetch_one(
            "SELECT (SELECT count(*) FROM message_vectors WHERE model = ? AND vector IS NOT NULL),"
            " (SELECT count(*) FROM embedding_queue)", (model,))
        return {"vectors": row[0], "backlog": row[1]} if row else {"vectors": 0, "backlog": 0}


async def message_seqs(db: LibSQLStore, message_ids: Sequence[str]) -> set[int]:
    """The seqs of the stored messages among ``message_ids``."""
    if not message_ids:
        return set()
    rows = await db.fetch_all(
        f"SELECT seq FROM messages WHERE id IN ({','.join('?' * len(message_ids))})", list(message_ids))
    return {r[0] for r in rows}


async def messages_by_seq(db: LibSQLStore, seqs: Sequence[int], resource_id: str) -> dict[int, tuple[Message, str]]:
    """The messages with these seqs that are (still) in ``resource_id``, with their thread's
    title: a search's hits are read through this, so a vector left of a thread that moved to
    another resource is never shown there."""
    if not seqs:
        return {}
    rows = await db.fetch_all(
        "SELECT m.seq, m.id, m.thread_id, m.resource_id, m.role, m.type, m.content, m.created_at, t.title"
        f" FROM messages m JOIN threads t ON t.id = m.thread_id WHERE m.seq IN ({','.join('?' * len(seqs))})"
        " AND t.resource_id = ?", [*seqs, resource_id])
    return {r["seq"]: (message_from_row(r), r["title"]) for r in rows}
