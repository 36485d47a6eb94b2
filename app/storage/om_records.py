"""Observational Memory records on the default store; the only module that writes their SQL.

One row per generation (``mastra_observational_memory``, OBSERVATIONAL-MEMORY.md 1.1): the
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
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from app.clock import now_iso, parse_iso, to_iso
from app.storage.libsql import LibSQLStore

Flag = Literal["is_observing", "is_reflecting", "is_buffering_observation", "is_buffering_reflection"]
_FLAGS = ("is_observing", "is_reflecting", "is_buffering_observation", "is_buffering_reflection")
_JSON_COLUMNS = ("config", "observed_message_ids", "buffered_observation_chunks", "metadata")


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


def _record(row: sqlite3.Row) -> OMRecord:
    values = {key: row[key] for key in row.keys()}
    for column in _JSON_COLUMNS:
        if values[column] is not None:
            values[column] = json.loads(values[column])
    values["metadata"] = values["metadata"] or {}
    values.pop("active_observations_pending_update", None)
    return OMRecord(**values)


_SELECT = "SELECT * FROM mastra_observational_memory"


class OMRecordStore:
    def __init__(self, db: LibSQLStore) -> None:
        self.db = db

    async def active(self, key: str) -> OMRecord | None:
        row = await self.db.fetch_one(f"{_SELECT} WHERE lookup_key = ? ORDER BY generation_count DESC LIMIT 1",
                                      (key,))
        return _record(row) if row else None

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
        now = now_iso()

        def work(conn: sqlite3.Connection) -> sqlite3.Row:
            conn.execute(
                "INSERT OR IGNORE INTO mastra_observational_memory (id, lookup_key, scope, resource_id, thread_id,"
                " origin_type, config, generation_count, observed_timezone, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, 'initial', ?, 0, ?, ?, ?)",
                (str(uuid.uuid4()), key, scope, resource_id, thread_id if scope == "thread" else None,
                 json.dumps(config), timezone, now, now))
            return conn.execute(f"{_SELECT} WHERE lookup_key = ? ORDER BY generation_count DESC LIMIT 1",
                                (key,)).fetchone()

        return _record(await self.db.run_write(work))

    async def update_active_observations(self, record_id: str, *, observations: str, token_count: int,
                                         last_observed_at: str | None, observed_ids: Sequence[str],
                                         tokens_observed: int) -> OMRecord:
        """After a sync observation: the new log, its size, the cursor, the observed ids
        (old and new), the running total, and no pending tokens."""
        def work(conn: sqlite3.Connection) -> sqlite3.Row:
            row = conn.execute("SELECT observed_message_ids FROM mastra_observational_memory WHERE id = ?",
                               (record_id,)).fetchone()
            known = json.loads(row[0]) if row and row[0] else []
            merged = list(dict.fromkeys([*known, *observed_ids]))
            return conn.execute(
                "UPDATE mastra_observational_memory SET active_observations = ?, observation_token_count = ?,"
                " last_observed_at = coalesce(?, last_observed_at), observed_message_ids = ?,"
                " total_tokens_observed = total_tokens_observed + ?, pending_message_tokens = 0, updated_at = ?"
                " WHERE id = ? RETURNING *",
                (observations, token_count, last_observed_at, json.dumps(merged), tokens_observed, now_iso(),
                 record_id)).fetchone()

        return _record(await self.db.run_write(work))

    async def create_reflection_generation(self, previous: OMRecord, *, observations: str,
                                           token_count: int) -> OMRecord:
        """The next generation (``originType: reflection``) holding the reflector's log; the
        cursor and the totals carry over, observed ids and buffering state start empty."""
        now = now_iso()

        def work(conn: sqlite3.Connection) -> sqlite3.Row:
            return conn.execute(
                "INSERT INTO mastra_observational_memory (id, lookup_key, scope, resource_id, thread_id,"
                " active_observations, origin_type, config, generation_count, last_observed_at,"
                " pending_message_tokens, total_tokens_observed, observation_token_count, observed_timezone,"
                " metadata, created_at, updated_at)"
                " SELECT ?, lookup_key, scope, resource_id, thread_id, ?, 'reflection', config, generation_count + 1,"
                " last_observed_at, 0, total_tokens_observed, ?, observed_timezone, metadata, ?, ?"
                " FROM mastra_observational_memory WHERE id = ? RETURNING *",
                (str(uuid.uuid4()), observations, token_count, now, now, previous.id)).fetchone()

        return _record(await self.db.run_write(work))

    async def set_pending_message_tokens(self, record_id: str, tokens: int) -> None:
        await self.db.run_write(lambda conn: conn.execute(
            "UPDATE mastra_observational_memory SET pending_message_tokens = ? WHERE id = ?"
            " AND pending_message_tokens != ?", (tokens, record_id, tokens)))

    async def claim_flag(self, record_id: str, flag: Flag, *, stale_after_s: float) -> bool:
        """Set ``flag`` unless a live holder has it; True when this caller now holds it."""
        if flag not in _FLAGS:
            raise ValueError(flag)
        now = now_iso()
        stale = to_iso(parse_iso(now) - timedelta(seconds=stale_after_s))
        return await self.db.run_write(lambda conn: conn.execute(
            f"UPDATE mastra_observational_memory SET {flag} = ? WHERE id = ? AND ({flag} IS NULL OR {flag} < ?)",
            (now, record_id, stale)).rowcount > 0)

    async def release_flag(self, record_id: str, flag: Flag) -> None:
        if flag not in _FLAGS:
            raise ValueError(flag)
        await self.db.run_write(lambda conn: conn.execute(
            f"UPDATE mastra_observational_memory SET {flag} = NULL WHERE id = ?", (record_id,)))

    async def clear(self, key: str) -> int:
        return await self.db.run_write(lambda conn: conn.execute(
            "DELETE FROM mastra_observational_memory WHERE lookup_key = ?", (key,)).rowcount)

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
            conn.execute("UPDATE threads SET metadata = ? WHERE id = ?", (json.dumps(metadata), thread_id))
            return om

        return await self.db.run_write(work)


def thread_om(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The OM part of a thread's metadata (``metadata.mastra.om``), or {}."""
    mastra = (metadata or {}).get("mastra")
    om = mastra.get("om") if isinstance(mastra, dict) else None
    return om if isinstance(om, dict) else {}
