"""Semantic recall searched inside a libsql server (sqld), in libsql's own vector index, so
no process keeps a copy of the vectors (on the embedded file, ``dev_server.recall.matrix``
scans a copy in each process; that stays as it is).

Schema. libsql indexes a column whose type names its dimensions (``F32_BLOB(384)``), and
the dimensions are the embedder's, known once it is resolved, after the numbered migrations
ran; plain SQLite knows neither the type's functions nor the index. So the index is a side
table per dimension count, ``message_vectors_f32_<dims>`` (its rowid is the
``message_vectors`` id, its column the same float32 bytes as ``F32_BLOB(dims)``), made by
``ensure`` only where ``supported`` finds the server's vector functions. Two triggers keep
it in step with ``message_vectors`` (a vector of that length added, any vector deleted:
edits, moves and deletes all go through a delete there), so the indexer's SQL is unchanged.
``fill`` indexes the vectors stored before the table existed, a chunk per transaction:
inserting into the index is slow (libsql's DiskANN: about 190 vectors/s with these options
on this project's 2-core machine, ``bench/recall_sqld.py``), and a long transaction would
hold the server's one write lock.

Search (``nearest``). The scope is the model, the resource, the index's agents, and the
thread for thread scope; a message counts with its best piece, as in the embedded scan. A
scope of at most ``EXACT_ROWS`` pieces (most threads, most users) is scanned exactly in
the server (``vector_distance_cos`` over its rows: the embedded scan's answer, at a cost
that follows the scope's size, not the index's). A larger one asks the index:
``vector_top_k`` gives the nearest ``ANN_ROWS`` pieces of every resource, scored exactly,
and the scope and the excluded messages are applied after; when that leaves fewer than
``k`` messages (a large scope far from the query among others nearer), the scope is scanned
exactly after all. The score is ``1 - cosine distance``: the cosine similarity, which for the unit
vectors the embedders give is the embedded scan's dot product.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.migrate import split_sqlite_statements

# DiskANN options, measured with bench/recall_sqld.py on clustered vectors (1,000 topics).
# libsql's defaults (neighbours as full float32 vectors, as many as fit a block) indexed ~25
# vectors/s here. Neighbours kept as 1 bit a float: ~150-190 vectors/s. With 32 of them
# recall@10 fell from 0.92 at 20k vectors to 0.71 at 100k; with 64, 1.00 at 20k; a search
# list of 400 (libsql's default is 200, which also caps vector_top_k's rows) holds more of it.
INDEX_OPTIONS = "'metric=cosine', 'compress_neighbors=float1bit', 'max_neighbors=64', 'search_l=400'"
ANN_ROWS = 400  # pieces asked of vector_top_k: its search list, the most it answers
EXACT_ROWS = 10_000  # a scope of at most this many pieces is scanned exactly in the server, not the index
FILL_CHUNK = 32  # vectors indexed per transaction while filling the table: ~0.2 s of the write lock

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    id        INTEGER PRIMARY KEY,
    embedding F32_BLOB({dims}) NOT NULL
);
CREATE INDEX IF NOT EXISTS {table}_ann ON {table} (libsql_vector_idx(embedding, {options}));
CREATE TRIGGER IF NOT EXISTS {table}_added AFTER INSERT ON message_vectors
WHEN length(NEW.vector) = {width}
BEGIN
    INSERT OR IGNORE INTO {table} (id, embedding) VALUES (NEW.id, NEW.vector);
END;
CREATE TRIGGER IF NOT EXISTS {table}_removed AFTER DELETE ON message_vectors
BEGIN
    DELETE FROM {table} WHERE id = OLD.id;
END;
"""


def table_of(dims: int) -> str:
    return f"message_vectors_f32_{int(dims)}"


def schema_statements(dims: int) -> list[str]:
    """The side table for ``dims``, its index and its triggers (``ensure`` runs them)."""
    return split_sqlite_statements(_SCHEMA.format(table=table_of(dims), dims=int(dims), width=int(dims) * 4,
                                                  options=INDEX_OPTIONS))


def unindexed_sql(dims: int) -> str:
    """Ids of the vectors of ``dims`` floats after ``?`` not in the index yet, in order, at most ``?``."""
    return (f"SELECT id FROM message_vectors v WHERE id > ? AND length(vector) = {int(dims) * 4}"
            f" AND NOT EXISTS (SELECT 1 FROM {table_of(dims)} n WHERE n.id = v.id) ORDER BY id LIMIT ?")


def fill_sql(dims: int, count: int) -> str:
    """Index the ``count`` vectors whose ids are the parameters."""
    return (f"INSERT OR IGNORE INTO {table_of(dims)} (id, embedding) SELECT id, vector FROM message_vectors"
            f" WHERE id IN ({','.join('?' * count)})")


async def supported(db: LibSQLStore) -> bool:
    """Whether the database has libsql's vector functions (a libsql server has; the
    standard library's SQLite has not)."""
    try:
        await db.fetch_one("SELECT vector_distance_cos(vector32('[1]'), vector32('[1]'))")
    except sqlite3.Error:
        return False
    return True


class NativeVectors:
    def __init__(self, db: LibSQLStore, *, agents: Iterable[str], exact_rows: int = EXACT_ROWS) -> None:
        self.db = db
        self.exact_rows = exact_rows
        self.agents = sorted(agents)
        self._in_agents = f"({','.join('?' * len(self.agents))})"
        self.dims = 0  # of the index searches use, once it is complete

    async def ensure(self, dims: int) -> None:
        """Create the table, its index and its triggers for ``dims`` if they are missing.
        Triggers missing beside an existing table mean ``message_vectors`` was rebuilt (its
        triggers went with it, and its ids start again): the table is stale then, and made
        anew. Idempotent: every process runs it at start."""
        table = table_of(dims)

        def work(conn: sqlite3.Connection) -> None:
            present = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE name IN (?, ?)", (table, f"{table}_added"))}
            if present == {table}:  # dropped whole: a bulk DELETE would leave the index's shadow rows
                conn.execute(f"DROP INDEX IF EXISTS {table}_ann")
                conn.execute(f"DROP TABLE {table}")
            for statement in schema_statements(dims):
                conn.execute(statement)

        await self.db.run_write(work)

    async def unindexed(self, dims: int) -> int:
        """Vectors of ``dims`` floats not in the index yet."""
        row = await self.db.fetch_one(
            f"SELECT count(*) FROM message_vectors v WHERE length(v.vector) = ?"
            f" AND NOT EXISTS (SELECT 1 FROM {table_of(dims)} n WHERE n.id = v.id)", (int(dims) * 4,))
        return row[0] if row else 0

    async def fill(self, dims: int, after_id: int, chunk: int = FILL_CHUNK) -> tuple[int, int]:
        """Index the next ``chunk`` vectors after ``after_id`` that are not in the index yet
        (stored before the table existed; the trigger indexed those since, and a fill another
        process or an earlier start began indexed some), in one transaction. Returns (vectors
        indexed, the id to go on after); (0, after_id) once there is nothing after it."""
        def work(conn: sqlite3.Connection) -> tuple[int, int]:
            ids = [r[0] for r in conn.execute(unindexed_sql(dims), (after_id, chunk))]
            if not ids:
                return 0, after_id
            added = conn.execute(fill_sql(dims, len(ids)), ids).rowcount
            return max(0, added), ids[-1]

        return await self.db.run_write(work)

    async def nearest(self, model: str, query: Any, k: int, *, resource_id: str, thread_id: str | None = None,
                      exclude: set[int] | None = None) -> list[tuple[int, float]]:
        """Best ``k`` messages (seq, score) of the scope, a message scored by its best piece."""
        vector = np.asarray(query, dtype="<f4")
        blob, dims = vector.tobytes(), len(vector)
        exclude = exclude or set()
        scope = f"v.model = ? AND t.resource_id = ? AND t.agent_id IN {self._in_agents}"
        params: list[Any] = [model, resource_id, *self.agents]
        if thread_id is not None:
            scope += " AND v.thread_id = ?"
            params.append(thread_id)
        small = await self.db.fetch_one(
            "SELECT count(*) FROM (SELECT 1 FROM message_vectors v JOIN threads t ON t.id = v.thread_id"
            f" WHERE {scope} LIMIT ?)", [*params, self.exact_rows + 1])
        if small is not None and small[0] <= self.exact_rows:  # exact, and cheap at this size
            return await self._scan(scope, params, blob, dims, k, exclude)
        table = table_of(dims)
        rows = await self.db.fetch_all(
            f"SELECT v.message_seq, 1 - vector_distance_cos(n.embedding, ?) AS score"
            f" FROM vector_top_k('{table}_ann', ?, {ANN_ROWS}) AS top JOIN {table} n ON n.id = top.id"
            f" JOIN message_vectors v ON v.id = top.id JOIN threads t ON t.id = v.thread_id"
            f" WHERE {scope} ORDER BY score DESC", [blob, blob, *params])
        found = _best_messages(rows, k, exclude)
        if len(found) == k:
            return found
        return await self._scan(scope, params, blob, dims, k, exclude)

    async def _scan(self, scope: str, params: list[Any], blob: bytes, dims: int, k: int,
                    exclude: set[int]) -> list[tuple[int, float]]:
        """The scope's pieces scored exactly in the server, widened until ``k`` messages."""
        skip = ""
        if exclude:
            skip = f" AND v.message_seq NOT IN ({','.join('?' * len(exclude))})"
        wanted = k * 4 + 8  # pieces of one long message may crowd the top
        while True:
            rows = await self.db.fetch_all(
                f"SELECT v.message_seq, 1 - vector_distance_cos(v.vector, ?) AS score FROM message_vectors v"
                f" JOIN threads t ON t.id = v.thread_id WHERE {scope} AND length(v.vector) = ?{skip}"
                " ORDER BY score DESC LIMIT ?", [blob, *params, dims * 4, *exclude, wanted])
            found = _best_messages(rows, k, set())
            if len(found) == k or len(rows) < wanted:
                return found
            wanted *= 4


def _best_messages(rows: Sequence[Sequence[Any]], k: int, exclude: set[int]) -> list[tuple[int, float]]:
    """Rows (seq, score) best first -> the first ``k`` distinct messages not excluded."""
    found: dict[int, float] = {}
    for seq, score in rows:
        if seq in exclude or seq in found:
            continue
        found[seq] = float(score)
        if len(found) == k:
            break
    return list(found.items())
