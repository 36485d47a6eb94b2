"""A conversation at fixed times, days apart, through a gateway in this process whose one
clock is a ``ManualClock`` (``create_app(..., clock=...)``): the stored ``createdAt`` values
and OM's temporal marker are what the clock dictates, and replaying the conversation on a
fresh data dir stores the same rows.

Left out of the comparison: random ids (messages the server names, OM records, the temporal
marker's), which are replaced by the order they first appear in.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from dev_server.kernel.clock import ManualClock, to_iso
from tests.kit.chat import turn
from tests.kit.local_http import background_idle
from tests.kit.om import FACT, parts
from tests.kit.servers import serve

START = "2026-03-02T09:00:00.000Z"
OPTIONS = {"temporalMarkers": True, "observation": {"messageTokens": 250, "bufferTokens": False}}
# (time since the previous turn, message id, text)
SCRIPT = [
    (timedelta(0), "m1", FACT),
    (timedelta(days=3), "m2", "Hello again, do you remember me?"),
    (timedelta(days=2, hours=5, minutes=30), "m3", f"Once more: {FACT}"),
]
THREAD = "replayed"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")


def run_script(data: Path) -> tuple[list[dict[str, Any]], ManualClock]:
    """The script's turns at their times; each turn's result."""
    clock = ManualClock(START)
    results = []
    with serve("gateway", data, inprocess=True, settings={"telemetry": False, "om_options": OPTIONS},
               clock=clock) as server:
        for pause, message_id, text in SCRIPT:
            clock.advance(pause)
            results.append(turn(server, THREAD, message_id, text))
            background_idle(server.url)
    return results, clock


def signals(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``data`` of the turn's ``data-signal`` chunks (a temporal gap's reminder)."""
    return [c["data"] for c in result["chunks"] if c["type"] == "data-signal"]


def rows(db: Path, sql: str) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(sql).fetchall()]


def stored(db: Path) -> str:
    """What the conversation left in the database, as JSON, each random id (a UUID, whatever
    its prefix) replaced by the order it first appears in."""
    dump = {"messages": rows(db, "SELECT id, thread_id, resource_id, role, type, content, created_at FROM messages"
                                 " ORDER BY created_at, seq"),
            "records": rows(db, "SELECT * FROM mastra_observational_memory ORDER BY generation_count"),
            "threads": rows(db, "SELECT * FROM threads ORDER BY id")}
    text = json.dumps(dump, indent=1, sort_keys=True)
    names: dict[str, str] = {}
    return UUID.sub(lambda m: names.setdefault(m.group(0), f"<id {len(names)}>"), text)


def test_a_conversation_days_apart_is_stored_at_the_clocks_times_and_replays_identically(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    results, clock = run_script(first)
    db = first / "dev-server.db"
    messages = rows(db, "SELECT id, role, content, created_at FROM messages WHERE thread_id = 'replayed'"
                        " ORDER BY created_at, seq")
    # each turn's input and reply at the clock's time; the gap signal stored right after the message
    assert [(m["role"], m["created_at"]) for m in messages] == [
        ("user", "2026-03-02T09:00:00.000Z"), ("assistant", "2026-03-02T09:00:00.000Z"),
        ("user", "2026-03-05T09:00:00.000Z"), ("signal", "2026-03-05T09:00:00.000Z"),
        ("assistant", "2026-03-05T09:00:00.000Z"),
        ("user", "2026-03-07T14:30:00.000Z"), ("signal", "2026-03-07T14:30:00.000Z"),
        ("assistant", "2026-03-07T14:30:00.000Z")]
    assert [m["id"] for m in messages if m["role"] == "user"] == ["m1", "m2", "m3"]
    [gap] = signals(results[1])
    assert gap["attributes"] == {"type": "temporal-gap", "gapText": "3 days later", "gapMs": 3 * 86_400_000,
                                 "timestamp": "03/05/2026, 9:00 AM UTC", "timestampMs": 1772701200000,
                                 "precedesMessageId": "m2"}
    assert gap["contents"] == "3 days later — 03/05/2026, 9:00 AM UTC"
    marker = json.loads(messages[3]["content"])["metadata"]["signal"]
    assert {key: marker[key] for key in ("id", "attributes", "metadata")} == {
        key: gap[key] for key in ("id", "attributes", "metadata")}
    [later_gap] = signals(results[2])
    assert later_gap["attributes"]["gapMs"] == (2 * 24 + 5) * 3_600_000 + 30 * 60_000
    assert later_gap["attributes"]["gapText"] == "2 days 5 hours later"
    # OM's record: created on the first turn; observed on the third, dated by the messages' times
    [record] = rows(db, "SELECT * FROM mastra_observational_memory")
    assert record["created_at"] == "2026-03-02T09:00:00.000Z"
    assert record["updated_at"] == record["last_observed_at"] == to_iso(clock.now()) == "2026-03-07T14:30:00.000Z"
    assert record["active_observations"].startswith("Date: Mar 2, 2026\n* 🔴 (09:00)")
    [start] = parts(results[2], "observation-start")
    assert start["startedAt"] == "2026-03-07T14:30:00.000Z"
    assert [e["durationMs"] for e in parts(results[2], "observation-end")] == [0]  # the clock stood still
    [thread] = rows(db, "SELECT * FROM threads WHERE id = 'replayed'")
    assert thread["created_at"] == "2026-03-02T09:00:00.000Z"
    assert thread["updated_at"] == "2026-03-07T14:30:00.000Z"  # the last reply's turn, by the clock

    run_script(second)
    assert stored(second / "dev-server.db") == stored(db)
