"""Observational Memory records on the default store; the only module that writes their SQL.

One row per generation (``mastra_observational_memory``, docs/observational-memory.md#record): the
row with the highest ``generation_count`` for a lookup key (``thread:<id>`` or
``resource:<id>``) is the active record, and a reflection inserts the next generation
instead of changing the old one. Both processes open the same database, so what the
gateway observes the studio reads at once.

The in-progress flags (``is_observing``, ``is_reflecting``, ...) hold the time they were
set. ``claim_flag`` sets one in a single conditional UPDATE unless another holder set it
less than ``stale_after_s`` ago: two processes (or two threads of one resource) never run
the same operation on one record at once, and a flag left by a killed process expires.

The thread-level OM metadata (current task, suggested response, cursors: 1.2) lives on the
thread row at ``metadata.mastra.om`` and is merged shallowly, read and written in one
transaction so a concurrent change of the thread's other metadata is not lost.

What the log's text looks like is Observational Memory's to say, not the store's: the store
is handed ``LogRules`` (``dev_server.om.engine.record_store``) and applies them inside the
transactions that write a log from parts (an activation, a buffered reflection swapped in).
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any, Literal

from dev_server.kernel import ids
from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, now_iso, parse_iso, to_iso
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.message_writes import add_parts_to_last_reply, stored_json

Flag = Literal["is_observing", "is_reflecting", "is_buffering_observation", "is_buffering_reflection"]
_FLAGS = ("is_observing", "is_reflecting", "is_buffering_observation", "is_buffering_reflection")
_JSON_COLUMNS = ("config", "observed_message_ids", "buffered_observation_chunks", "metadata")
_SHARED_COLUMNS = (*_JSON_COLUMNS, "active_observations", "buffered_reflection")  # ``OMRecordStore._as_last_read``


def lookup_key(thread_id: str | None, resource_id: str) -> str:
    return f"thread:{thread_id}" if thread_id else f"resource:{resource_id}"


@dataclass
class OMRecord:
    id: str
    lookup_key: str
    scope: str
    resource_id: str
    thread_id: str | None
    origin_type: str
    config: dict[str, Any]
    created_at: str
    updated_at: str
    active_observations: str = ""
    generation_count: int = 0
    last_observed_at: str | None = None
    last_reflection_at: str | None = None
    pending_message_tokens: int = 0
    total_tokens_observed: int = 0
    observation_token_count: int = 0
    is_observing: str | None = None
    is_reflecting: str | None = None
    observed_message_ids: list[str] | None = None
    observed_timezone: str | None = None
    buffered_observation_chunks: list[dict[str, Any]] | None = None
    buffered_reflection: str | None = None
    buffered_reflection_tokens: int | None = None
    buffered_reflection_input_tokens: int | None = None
    reflected_observation_line_count: int | None = None
    is_buffering_observation: str | None = None
    is_buffering_reflection: str | None = None
    last_buffered_at_tokens: int = 0
    last_buffered_at_time: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_api(self) -> dict[str, Any]:
        """The record as Mastra's REST API sends it (camelCase; flags as booleans)."""
        return {
            "id": self.id, "lookupKey": self.lookup_key, "scope": self.scope, "resourceId": self.resource_id,
            "threadId": self.thread_id, "activeObservations": self.active_observations,
            "originType": self.origin_type, "config": self.config, "generationCount": self.generation_count,
            "lastObservedAt": self.last_observed_at, "lastReflectionAt": self.last_reflection_at,
            "pendingMessageTokens": self.pending_message_tokens, "totalTokensObserved": self.total_tokens_observed,
            "observationTokenCount": self.observation_token_count,
            "isObserving": self.is_observing is not None, "isReflecting": self.is_reflecting is not None,
            "observedMessageIds": self.observed_message_ids, "observedTimezone": self.observed_timezone,
            "bufferedObservationChunks": self.buffered_observation_chunks,
            "bufferedReflection": self.buffered_reflection,
            "bufferedReflectionTokens": self.buffered_reflection_tokens,
            "bufferedReflectionInputTokens": self.buffered_reflection_input_tokens,
            "reflectedObservationLineCount": self.reflected_observation_line_count,
            "isBufferingObservation": self.is_buffering_observation is not None,
            "isBufferingReflection": self.is_buffering_reflection is not None,
            "lastBufferedAtTokens": self.last_buffered_at_tokens, "lastBufferedAtTime": self.last_buffered_at_time,
            "metadata": self.metadata, "createdAt": self.created_at, "updatedAt": self.updated_at,
        }


def _record(row: sqlite3.Row, known: dict[str, Any] | None = None) -> OMRecord:
    """The record of a row; ``known``: values of some columns already at hand (not decoded again)."""
    known = known or {}
    values = {key: row[key] for key in row.keys()}  # noqa: SIM118 -- iterating a sqlite3.Row gives its values
    for column in _JSON_COLUMNS:
        if values[column] is not None and column not in known:
            values[column] = json.loads(values[column])
    values.update(known)
    values["metadata"] = values["metadata"] or {}
    values.pop("active_observations_pending_update", None)
    values.pop("content_rev", None)
    return OMRecord(**values)


_SELECT = "SELECT * FROM mastra_observational_memory"
# The active record, its large values (``_SHARED_COLUMNS``) left out (NULL) when the row is the
# one whose copy the caller holds (?2) and they did not change since (?3: ``content_rev``,
# migration 0016). SQLite reads a column only when asked for it: the log, the chunks and the
# buffered reflection stay in their overflow pages.
_SELECT_ACTIVE = (
    f"SELECT content_rev, {', '.join(f.name for f in fields(OMRecord) if f.name not in _SHARED_COLUMNS)}, "
    + ", ".join(f"CASE WHEN id = ?2 AND content_rev = ?3 THEN NULL ELSE {c} END AS {c}" for c in _SHARED_COLUMNS)
    + " FROM mastra_observational_memory WHERE lookup_key = ?1 ORDER BY generation_count DESC LIMIT 1")


@dataclass(frozen=True)
class _LastRead:
    """What ``OMRecordStore.active`` keeps of a key's last read: the row and its ``content_rev``,
    each large column's stored text, and the value made of it."""

    id: str
    content_rev: int
    stored: dict[str, Any]
    values: dict[str, Any]


@dataclass(frozen=True)
class LogRules:
    """What Observational Memory decides about its log, applied by the store where a
    transaction builds one: the separator written before a batch of observations (given
    the newest observed message's time) and a text's token count."""

    boundary: Callable[[str], str]
    count_tokens: Callable[[str], int]


class OMRecordStore:
    KEPT_RECORDS = 64  # records whose last read ``active`` keeps (``_as_last_read``)

    def __init__(self, db: LibSQLStore, rules: LogRules, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.rules = rules
        self.db = db
        self.clock = clock
        self._last_read: OrderedDict[str, _LastRead] = OrderedDict()

    async def active(self, key: str) -> OMRecord | None:
        kept = self._last_read.get(key)
        row = await self.db.fetch_one(_SELECT_ACTIVE, (key, kept.id if kept else None,
                                                       kept.content_rev if kept else None))
        return self._as_last_read(key, row, kept) if row else None

    def _as_last_read(self, key: str, row: sqlite3.Row, kept: _LastRead | None) -> OMRecord:
        """The record, sharing with the last read of ``key`` the large values it holds: every
        turn reads a record whose log and buffered chunks rarely changed since the last turn.
        When none of them changed (same row, same ``content_rev``) the read left them out;
        when some did, those whose stored text is the same are still shared. So the kept log
        text has its hash already (the observation messages are cached by it: hashing an equal
        copy costs ten times comparing it), and kept JSON (the chunks, tens of kilobytes while
        they wait) is not decoded again. Nothing changes a record's values in place: a write
        builds new ones."""
        if kept is not None and row["id"] == kept.id and row["content_rev"] == kept.content_rev:
            record = _record(row, kept.values)
            self._last_read[key] = kept  # again: another key's read may have dropped it meanwhile
        else:
            same = {} if kept is None else {column: kept.values[column] for column in _SHARED_COLUMNS
                                            if row[column] is not None and row[column] == kept.stored[column]}
            record = _record(row, same)
            self._last_read[key] = _LastRead(record.id, row["content_rev"],
                                             {column: row[column] for column in _SHARED_COLUMNS},
                                             {column: getattr(record, column) for column in _SHARED_COLUMNS})
        self._last_read.move_to_end(key)
        if len(self._last_read) > self.KEPT_RECORDS:
            self._last_read.popitem(last=False)
        return record

    async def history(self, key: str, *, limit: int = 10, offset: int = 0, created_from: str | None = None,
                      created_to: str | None = None) -> list[OMRecord]:
        """Every generation for the key, newest first, filtered on ``created_at``."""
        where, params = ["lookup_key = ?"], [key]
        if created_from is not None:
            where.append("created_at >= ?")
            params.append(created_from)
        if created_to is not None:
            where.append("created_at <= ?")
            params.append(created_to)
        rows = await self.db.fetch_all(f"{_SELECT} WHERE {' AND '.join(where)} ORDER BY generation_count DESC"
                                       " LIMIT ? OFFSET ?", [*params, limit, offset])
        return [_record(r) for r in rows]

    async def initialize(self, *, scope: str, thread_id: str | None, resource_id: str, config: dict[str, Any],
                         timezone: str | None) -> OMRecord:
        """The active record, or generation 0 created now (``originType: initial``)."""
        key = lookup_key(thread_id if scope == "thread" else None, resource_id)
        now = now_iso(self.clock)

        def work(conn: sqlite3.Connection) -> sqlite3.Row:
            conn.execute(
                "INSERT OR IGNORE INTO mastra_observational_memory (id, lookup_key, scope, resource_id, thread_id,"
                " origin_type, config, generation_count, observed_timezone, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, 'initial', ?, 0, ?, ?, ?)",
                (str(ids.uuid4()), key, scope, resource_id, thread_id if scope == "thread" else None,
                 stored_json(config), timezone, now, now))
            return conn.execute(f"{_SELECT} WHERE lookup_key = ? ORDER BY generation_count DESC LIMIT 1",
                                (key,)).fetchone()

        return _record(await self.db.run_write(work))

    async def update_active_observations(self, record_id: str, *, observations: str, token_count: int,
                                         last_observed_at: str | None, observed_ids: Sequence[str],
                                         listed_ids: Sequence[str] | None = None) -> OMRecord:
        """After a sync observation: the new log, its size, the cursor, the observed ids
        (old and new; of the new only ``listed_ids`` when given), and no pending tokens; the
        running total grows by the new log's size (``token_count``: what Mastra adds per sync
        observation). A buffered chunk holding
        any of the messages just observed is dropped: this cycle observed them (a manual
        observe does not wait for activation), and activating the chunk would write them
        into the log a second time."""
        def work(conn: sqlite3.Connection) -> sqlite3.Row:
            row = conn.execute("SELECT observed_message_ids, buffered_observation_chunks"
                               " FROM mastra_observational_memory WHERE id = ?", (record_id,)).fetchone()
            known = json.loads(row[0]) if row and row[0] else []
            merged = list(dict.fromkeys([*known, *(observed_ids if listed_ids is None else listed_ids)]))
            chunks = json.loads(row[1]) if row and row[1] else []
            kept = [c for c in chunks if not _holds_any(c, observed_ids)]
            return conn.execute(
                "UPDATE mastra_observational_memory SET active_observations = ?, observation_token_count = ?,"
                " last_observed_at = coalesce(?, last_observed_at), observed_message_ids = ?,"
                " total_tokens_observed = total_tokens_observed + ?, pending_message_tokens = 0,"
                " buffered_observation_chunks = ?, updated_at = ? WHERE id = ? RETURNING *",
                (observations, token_count, last_observed_at, stored_json(merged), token_count,
                 stored_json(kept) if kept else None, now_iso(self.clock), record_id)).fetchone()

        return _record(await self.db.run_write(work))

    async def create_reflection_generation(self, previous: OMRecord, *, observations: str,
                                           token_count: int) -> OMRecord | None:
        """The next generation (``originType: reflection``) holding the reflector's log; the
        cursor and the totals carry over, observed ids and buffering state start empty
        (``_insert_generation``).

        The reflector read ``previous.active_observations``; another cycle may have changed
        the record while it ran (a backlog's catch-up observes beside a turn). Lines an
        observation appended meanwhile are kept after the reflection (their messages are
        behind the cursor: dropping them would lose them). None, and nothing written, when
        the log was rewritten otherwise or a newer generation exists (a buffered reflection
        was activated): that cycle's log stands."""
        reflected = previous.active_observations or ""

        def work(conn: sqlite3.Connection) -> sqlite3.Row | None:
            row = conn.execute(f"{_SELECT} WHERE id = ?", (previous.id,)).fetchone()
            if row is None or not _is_newest(conn, row):
                return None
            current = row["active_observations"] or ""
            text, tokens = observations, token_count
            if current != reflected:
                if not current.startswith(reflected):
                    return None
                added = current[len(reflected):].strip()
                if added:
                    text = f"{observations}\n\n{added}"
                    tokens = self.rules.count_tokens(text)
            return _insert_generation(conn, previous.id, text, tokens, now_iso(self.clock))

        row = await self.db.run_write(work)
        return _record(row) if row is not None else None

    # -- async buffering (2.4-2.6) -----------------------------------------------------

    async def add_buffered_chunk(self, key: str, chunk: dict[str, Any]) -> OMRecord | None:
        """Append a background observer's chunk to the key's active record (whichever
        generation is active by then; deduplicated by ``cycleId``); the buffer cursor moves
        past its messages and the interval boundary becomes its size (2.4, steps 8-9).
        None when there is no record (cleared meanwhile)."""
        def work(conn: sqlite3.Connection) -> sqlite3.Row | None:
            row = conn.execute("SELECT id, buffered_observation_chunks, last_observed_at, observed_message_ids"
                               " FROM mastra_observational_memory WHERE lookup_key = ?"
                               " ORDER BY generation_count DESC LIMIT 1", (key,)).fetchone()
            if row is None or (row[2] is not None and chunk["lastObservedAt"] <= row[2]):
                return None  # gone, or its messages were observed meanwhile (a sync observation)
            if _holds_any(chunk, json.loads(row[3]) if row[3] else ()):
                return None  # a sync observation of the same messages landed first
            record_id = row[0]
            chunks = json.loads(row[1]) if row[1] else []
            if any(c.get("cycleId") == chunk["cycleId"] for c in chunks):
                return conn.execute(f"{_SELECT} WHERE id = ?", (record_id,)).fetchone()
            return conn.execute(
                "UPDATE mastra_observational_memory SET buffered_observation_chunks = ?, last_buffered_at_time = ?,"
                " last_buffered_at_tokens = ?, updated_at = ? WHERE id = ? RETURNING *",
                (stored_json([*chunks, chunk]), chunk["lastObservedAt"], chunk["messageTokens"], now_iso(self.clock),
                 record_id)).fetchone()

        row = await self.db.run_write(work)
        return _record(row) if row else None

    async def set_buffer_boundary(self, record_id: str, tokens: int) -> None:
        """``lastBufferedAtTokens``: the pending count at the last buffering trigger (0 resets it)."""
        await self.db.run_write(lambda conn: conn.execute(
            "UPDATE mastra_observational_memory SET last_buffered_at_tokens = ? WHERE id = ?", (tokens, record_id)))

    async def activate_chunks(self, record_id: str, chunk_ids: Sequence[str]) -> OMRecord | None:
        """Swap the oldest buffered chunks, which must still be exactly ``chunk_ids``, into
        the active log (2.5, ``swapBufferedToActive``; ``totalTokensObserved`` is left as it
        is, as Mastra leaves it). One transaction, and the chunks are checked inside it: two
        processes never activate the same chunk twice, the second gets None."""
        def work(conn: sqlite3.Connection) -> sqlite3.Row | None:
            row = conn.execute(f"{_SELECT} WHERE id = ?", (record_id,)).fetchone()
            if row is None or not _is_newest(conn, row):  # a reflection made a newer generation meanwhile
                return None
            chunks = json.loads(row["buffered_observation_chunks"] or "[]")
            chosen, rest = chunks[:len(chunk_ids)], chunks[len(chunk_ids):]
            if not chunk_ids or [c.get("id") for c in chosen] != list(chunk_ids):
                return None
            last = chosen[-1]["lastObservedAt"]
            joined = "\n\n".join(c["observations"] for c in chosen)
            active = row["active_observations"] or ""
            merged = f"{active}{self.rules.boundary(last)}{joined}" if active else joined
            observation_tokens = sum(int(c.get("tokenCount") or 0) for c in chosen)
            return conn.execute(
                "UPDATE mastra_observational_memory SET active_observations = ?,"
                " observation_token_count = observation_token_count + ?,"
                " pending_message_tokens = max(0, pending_message_tokens - ?), buffered_observation_chunks = ?,"
                " last_observed_at = ?, updated_at = ? WHERE id = ? RETURNING *",
                (merged, observation_tokens, sum(int(c.get("messageTokens") or 0) for c in chosen),
                 stored_json(rest) if rest else None, last, now_iso(self.clock), record_id)).fetchone()

        row = await self.db.run_write(work)
        return _record(row) if row else None

    async def store_buffered_reflection(self, record_id: str, *, reflection: str, tokens: int, input_tokens: int,
                                        line_count: int) -> OMRecord | None:
        """Keep a background reflection of the log's first ``line_count`` lines for later
        activation (appended to one already waiting, 2.6)."""
        def work(conn: sqlite3.Connection) -> sqlite3.Row | None:
            return conn.execute(
                "UPDATE mastra_observational_memory SET"
                " buffered_reflection = CASE WHEN buffered_reflection IS NULL OR buffered_reflection = ''"
                "   THEN ? ELSE buffered_reflection || char(10) || char(10) || ? END,"
                " buffered_reflection_tokens = coalesce(buffered_reflection_tokens, 0) + ?,"
                " buffered_reflection_input_tokens = coalesce(buffered_reflection_input_tokens, 0) + ?,"
                " reflected_observation_line_count = ?, updated_at = ? WHERE id = ? RETURNING *",
                (reflection, reflection, tokens, input_tokens, line_count, now_iso(self.clock), record_id)).fetchone()

        row = await self.db.run_write(work)
        return _record(row) if row else None

    async def activate_buffered_reflection(self, record_id: str) -> tuple[OMRecord, OMRecord] | None:
        """The buffered reflection replaces the lines it reflected: a new generation holds
        ``reflection + the log's remaining lines``, the old row's buffered fields are
        cleared. One transaction that checks the row is still the active one and still has
        a buffered reflection (a second process gets None). Returns (old, new)."""
        now = now_iso(self.clock)

        def work(conn: sqlite3.Connection) -> tuple[sqlite3.Row, sqlite3.Row] | None:
            row = conn.execute(f"{_SELECT} WHERE id = ?", (record_id,)).fetchone()
            if row is None or not row["buffered_reflection"]:
                return None
            if not _is_newest(conn, row):
                return None
            lines = (row["active_observations"] or "").split("\n")
            tail = "\n".join(lines[row["reflected_observation_line_count"] or 0:]).strip()
            text = f"{row['buffered_reflection']}\n\n{tail}" if tail else row["buffered_reflection"]
            new = _insert_generation(conn, record_id, text, self.rules.count_tokens(text), now)
            old = conn.execute(
                "UPDATE mastra_observational_memory SET buffered_reflection = NULL, buffered_reflection_tokens = NULL,"
                " buffered_reflection_input_tokens = NULL, reflected_observation_line_count = NULL,"
                " updated_at = ? WHERE id = ? RETURNING *", (now, record_id)).fetchone()
            return old, new

        rows = await self.db.run_write(work)
        return (_record(rows[0]), _record(rows[1])) if rows else None

    async def seal_messages(self, message_ids: Sequence[str], sealed_at_ms: int) -> None:
        """Mark messages handed to a background observer as sealed (1.4, mechanism 4):
        ``content.metadata.mastra.sealed`` and their last part's ``metadata.mastra.sealedAt``.
        One statement for all of them: as ``executemany`` (a statement per message, each
        firing the messages' triggers) it failed now and then under load with SQLite's "bad
        parameter or other API misuse" (about one seal in 500 with ten turns at once)."""
        await self.db.run_write(lambda conn: conn.execute(
            "UPDATE messages SET content = json_set(content, '$.metadata.mastra.sealed', json('true'),"
            " '$.parts[#-1].metadata.mastra.sealedAt', ?) WHERE id IN (SELECT value FROM json_each(?))"
            " AND json_array_length(content, '$.parts') > 0", (sealed_at_ms, stored_json(list(message_ids)))))

    async def add_parts_to_last_reply(self, thread_id: str, parts: Sequence[dict[str, Any]]) -> bool:
        """Keep marker parts that arrived after their turn's reply was saved: appended to the
        thread's newest assistant message (2.4, "persist the marker into storage"), one
        statement per part. False when the thread has no assistant message."""
        return await self.db.run_write(lambda conn: add_parts_to_last_reply(conn, thread_id, parts))

    async def set_pending_message_tokens(self, record_id: str, tokens: int) -> None:
        await self.db.run_write(lambda conn: conn.execute(
            "UPDATE mastra_observational_memory SET pending_message_tokens = ? WHERE id = ?"
            " AND pending_message_tokens != ?", (tokens, record_id, tokens)))

    async def claim_flag(self, record_id: str, flag: Flag, *, stale_after_s: float) -> bool:
        """Set ``flag`` unless a live holder has it; True when this caller now holds it."""
        if flag not in _FLAGS:
            raise ValueError(flag)
        now = now_iso(self.clock)
        stale = to_iso(parse_iso(now) - timedelta(seconds=stale_after_s))
        return await self.db.run_write(lambda conn: conn.execute(
            f"UPDATE mastra_observational_memory SET {flag} = ? WHERE id = ? AND ({flag} IS NULL OR {flag} < ?)",
            (now, record_id, stale)).rowcount > 0)

    async def renew_flag(self, record_id: str, flag: Flag) -> None:
        """Move a held flag's time to now (a heartbeat: the holder is alive)."""
        if flag not in _FLAGS:
            raise ValueError(flag)
        await self.db.run_write(lambda conn: conn.execute(
            f"UPDATE mastra_observational_memory SET {flag} = ? WHERE id = ? AND {flag} IS NOT NULL",
            (now_iso(self.clock), record_id)))

    async def release_flag(self, record_id: str, flag: Flag) -> None:
        if flag not in _FLAGS:
            raise ValueError(flag)
        await self.db.run_write(lambda conn: conn.execute(
            f"UPDATE mastra_observational_memory SET {flag} = NULL WHERE id = ?", (record_id,)))

    async def clear(self, key: str) -> int:
        return await self.db.run_write(lambda conn: conn.execute(
            "DELETE FROM mastra_observational_memory WHERE lookup_key = ?", (key,)).rowcount)

    async def threads_om(self, thread_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each thread's ``metadata.mastra.om`` (``{}`` when it has none), in one read."""
        if not thread_ids:
            return {}
        rows = await self.db.fetch_all(
            f"SELECT id, metadata FROM threads WHERE id IN ({', '.join('?' * len(thread_ids))})", tuple(thread_ids))
        return {row[0]: thread_om(json.loads(row[1]) if row[1] else None) for row in rows}

    async def patch_thread_om(self, thread_id: str, values: dict[str, Any]) -> dict[str, Any] | None:
        """Merge ``values`` into the thread's ``metadata.mastra.om`` (a None value removes
        its key); returns the merged OM metadata, None when the thread does not exist."""
        def work(conn: sqlite3.Connection) -> dict[str, Any] | None:
            row = conn.execute("SELECT metadata FROM threads WHERE id = ?", (thread_id,)).fetchone()
            if row is None:
                return None
            metadata = json.loads(row[0]) if row[0] else {}
            mastra = metadata.get("mastra") if isinstance(metadata.get("mastra"), dict) else {}
            om = dict(mastra.get("om") or {}) if isinstance(mastra.get("om"), dict) else {}
            for key, value in values.items():
                if value is None:
                    om.pop(key, None)
                else:
                    om[key] = value
            metadata["mastra"] = {**mastra, "om": om}
            conn.execute("UPDATE threads SET metadata = ? WHERE id = ?", (stored_json(metadata), thread_id))
            return om

        return await self.db.run_write(work)


def _holds_any(chunk: dict[str, Any], message_ids: Sequence[str]) -> bool:
    return not set(chunk.get("messageIds") or ()).isdisjoint(message_ids)


def _is_newest(conn: sqlite3.Connection, row: sqlite3.Row) -> bool:
    newest = conn.execute("SELECT max(generation_count) FROM mastra_observational_memory WHERE lookup_key = ?",
                          (row["lookup_key"],)).fetchone()[0]
    return newest == row["generation_count"]


def _insert_generation(conn: sqlite3.Connection, previous_id: str, observations: str,
                       token_count: int, now: str) -> sqlite3.Row:
    """Insert the generation after ``previous_id``: the cursor, the running total, the config,
    the zone and the metadata carry over (from the row as it is now, not as a caller read it
    before an observation: docs/observational-memory.md#deliberate-differences D38); the
    buffering state starts empty, as Mastra's "buffering state reset": no chunks (their
    messages are unobserved again and get buffered anew), no buffer cursor or boundary."""
    return conn.execute(
        "INSERT INTO mastra_observational_memory (id, lookup_key, scope, resource_id, thread_id,"
        " active_observations, origin_type, config, generation_count, last_observed_at,"
        " pending_message_tokens, total_tokens_observed, observation_token_count, observed_timezone,"
        " metadata, created_at, updated_at)"
        " SELECT ?, lookup_key, scope, resource_id, thread_id, ?, 'reflection', config, generation_count + 1,"
        " last_observed_at, 0, total_tokens_observed, ?, observed_timezone, metadata, ?, ?"
        " FROM mastra_observational_memory WHERE id = ? RETURNING *",
        (str(ids.uuid4()), observations, token_count, now, now, previous_id)).fetchone()


def thread_om(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The OM part of a thread's metadata (``metadata.mastra.om``), or {}."""
    mastra = (metadata or {}).get("mastra")
    om = mastra.get("om") if isinstance(mastra, dict) else None
    return om if isinstance(om, dict) else {}
