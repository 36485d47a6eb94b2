"""Re-seeding: our OM record made Mastra's again after a declared difference
(docs/om-conformance.md#two-rates-free-and-re-seeded).

A declared difference (docs/observational-memory.md, D38 for instance) can make the two
records diverge at one turn; every later turn then differs because the states differ, not
because a decision does. At the end of such a turn the replay (its re-seeded run) writes
Mastra's record of that moment into our database, so the later turns start from the same
state and measure decisions again.

What is written is the trace's record (``after.record`` of the turn): generation and origin,
the log and its tokens, the totals, the cursors, the observed ids, the buffered chunks and
the buffered reflection. Mastra's message labels become our message ids; its times become
ours by the message they follow: a time ``d`` ms after Mastra's message ``m`` becomes ``d`` ms
after our copy of ``m`` (the two engines read the clock a different number of times, so the
same message has a few milliseconds more or less on each side). Our newest row of the
record is updated in place; rows of a generation at or above Mastra's are dropped first, so
the newest row is the active one with Mastra's generation.
"""

from __future__ import annotations

import bisect
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dev_server.kernel.clock import parse_iso, to_iso

_COLUMNS = {  # Mastra's field -> our column, written as they are
    "generationCount": "generation_count", "originType": "origin_type", "activeObservations": "active_observations",
    "observationTokenCount": "observation_token_count", "totalTokensObserved": "total_tokens_observed",
    "pendingMessageTokens": "pending_message_tokens", "lastBufferedAtTokens": "last_buffered_at_tokens",
    "bufferedReflection": "buffered_reflection", "bufferedReflectionTokens": "buffered_reflection_tokens",
    "bufferedReflectionInputTokens": "buffered_reflection_input_tokens",
    "reflectedObservationLineCount": "reflected_observation_line_count",
}
_TIMES = {"lastObservedAt": "last_observed_at", "lastBufferedAtTime": "last_buffered_at_time"}
_DEFAULTS = {"pending_message_tokens": 0, "total_tokens_observed": 0, "observation_token_count": 0,
             "last_buffered_at_tokens": 0, "active_observations": ""}


class TimeMap:
    """Mastra's times to ours, anchored on the messages both sides stored (by label)."""

    def __init__(self, mastra: Mapping[str, str], ours: Mapping[str, str]) -> None:
        pairs = sorted((parse_iso(mastra[label]), parse_iso(ours[label])) for label in mastra if label in ours)
        self.mastra = [m for m, _ in pairs]
        self.ours = [o for _, o in pairs]

    def __call__(self, value: str | None) -> str | None:
        if not value:
            return value
        moment = parse_iso(value)
        at = bisect.bisect_right(self.mastra, moment) - 1
        if at < 0:
            return value
        return to_iso(self.ours[at] + (moment - self.mastra[at]))


def reseed(db: Path, lookup_key: str, mastra: dict[str, Any], ids: Mapping[str, str], times: TimeMap) -> None:
    """Write Mastra's record ``mastra`` (the trace's shape) over our newest row of ``lookup_key``;
    ``ids`` maps Mastra's message labels to our message ids."""

    def our_ids(labels: Any) -> Any:
        return [ids.get(label, label) for label in labels] if isinstance(labels, list) else labels

    values: dict[str, Any] = {column: mastra.get(field) for field, column in _COLUMNS.items()}
    values = {column: _DEFAULTS.get(column) if value is None else value for column, value in values.items()}
    values.update({column: times(mastra.get(field)) for field, column in _TIMES.items()})
    observed = mastra.get("observedMessageIds")
    values["observed_message_ids"] = json.dumps(our_ids(observed)) if observed is not None else None
    chunks = [{**chunk, "id": f"ombuf-reseeded-{n}", "messageIds": our_ids(chunk.get("messageIds")),
               "lastObservedAt": times(chunk.get("lastObservedAt")), "createdAt": times(chunk.get("createdAt"))}
              for n, chunk in enumerate(mastra.get("bufferedObservationChunks") or [])]
    values["buffered_observation_chunks"] = json.dumps(chunks) if chunks else None
    with sqlite3.connect(db) as conn:
        newest = conn.execute("SELECT id FROM mastra_observational_memory WHERE lookup_key = ?"
                              " ORDER BY generation_count DESC LIMIT 1", (lookup_key,)).fetchone()
        if newest is None:
            raise LookupError(f"no OM record {lookup_key} to re-seed")
        conn.execute("DELETE FROM mastra_observational_memory WHERE lookup_key = ? AND id != ?"
                     " AND generation_count >= ?", (lookup_key, newest[0], values["generation_count"]))
        assignments = ", ".join(f"{column} = ?" for column in values)
        conn.execute(f"UPDATE mastra_observational_memory SET {assignments} WHERE id = ?",  # noqa: S608 -- our columns
                     (*values.values(), newest[0]))


def stored_times(turns: list[dict[str, Any]]) -> dict[str, str]:
    """Label -> createdAt of every message the trace's turns stored (as the last turn left it)."""
    found: dict[str, str] = {}
    for turn in turns:
        for message in turn["after"]["messages"]:
            found[message["id"]] = message["createdAt"]
    return found
