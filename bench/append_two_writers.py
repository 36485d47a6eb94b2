"""Append throughput with two writer processes on one SQLite file.

Baseline, measured in the same run: the same rows inserted by raw ``sqlite3`` in one
process, one transaction per 2-message turn, with the same PRAGMAs. We report our
store's throughput (one process, then two processes at once) as a ratio of it.
Run: .venv/bin/python bench/append_two_writers.py [turns per writer]
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dev_server.kernel.clock import now_iso  # noqa: E402
from dev_server.kernel.messages import Message  # noqa: E402
from dev_server.storage.conversations import ConversationStore  # noqa: E402
from dev_server.storage.libsql import LibSQLStore  # noqa: E402

CONTENT = json.dumps({"format": 2, "parts": [{"type": "text", "text": "x" * 200}]})


def raw_baseline(path: Path, turns: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE m (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, thread_id TEXT, resource_id TEXT,"
                 " role TEXT, type TEXT, content TEXT, created_at TEXT)")
    conn.execute("CREATE INDEX m_t ON m (thread_id, created_at, seq)")
    started = time.perf_counter()
    for i in range(turns):
        conn.execute("BEGIN IMMEDIATE")
        for j in range(2):
            conn.execute("INSERT OR IGNORE INTO m (id, thread_id, resource_id, role, type, content, created_at)"
                         " VALUES (?, 't', 'r', 'user', 'text', ?, ?)", (f"{i}-{j}", CONTENT, now_iso()))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return turns * 2 / elapsed


async def ours(url: str, name: str, turns: int) -> float:
    rate, _, _ = await timed_writer(url, name, turns)
    return rate


async def timed_writer(url: str, name: str, turns: int) -> tuple[float, float, float]:
    """msgs/s, and the wall-clock start and end of the appends themselves (after the
    interpreter started, imported and opened the store)."""
    db = LibSQLStore(url)
    await db.open()
    store = ConversationStore(db)
    await store.ensure_thread("t", "r")
    content = json.loads(CONTENT)
    wall_start, started = time.time(), time.perf_counter()
    for i in range(turns):
        await store.append_messages("t", [Message(f"{name}-{i}-{j}", "t", "r", "user", content, now_iso())
                                          for j in range(2)])
    elapsed, wall_end = time.perf_counter() - started, time.time()
    await db.close()
    return turns * 2 / elapsed, wall_start, wall_end


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        baseline = raw_baseline(tmp_path / "raw.db", turns)
        single = asyncio.run(ours(f"file:{tmp_path / 'one.db'}", "solo", turns))
        url = f"file:{tmp_path / 'two.db'}"
        asyncio.run(ours(url, "warm", 1))  # migrate first, so both writers only append
        code = ("import asyncio, sys; sys.path.insert(0, sys.argv[4]); from bench.append_two_writers import"
                " timed_writer; print(*asyncio.run(timed_writer(sys.argv[1], sys.argv[2], int(sys.argv[3]))))")
        procs = [subprocess.Popen([sys.executable, "-c", code, url, name, str(turns // 2), str(REPO)],
                                  stdout=subprocess.PIPE, text=True, cwd=REPO) for name in ("a", "b")]
        results = [p.communicate()[0].split() for p in procs]
        assert all(p.returncode == 0 for p in procs), results
        # From the first append of either writer to the last of both: process start-up,
        # imports and opening the store are not part of the figure.
        wall = max(float(r[2]) for r in results) - min(float(r[1]) for r in results)
        outputs = [r[0] for r in results]
        two = (turns // 2) * 2 * 2 / wall
        rows = sqlite3.connect(tmp_path / "two.db").execute("SELECT count(*) FROM messages").fetchone()[0]
    print(f"turns={turns} (2 messages each)")
    print(f"baseline raw sqlite3, 1 process : {baseline:9.0f} msgs/s")
    print(f"ours, 1 process                 : {single:9.0f} msgs/s  ratio {single / baseline:.2f}")
    print(f"ours, 2 processes (aggregate)   : {two:9.0f} msgs/s  ratio {two / baseline:.2f}"
          f"  (per-writer {', '.join(f'{float(o):.0f}' for o in outputs)}; rows {rows}, expected {turns * 2 + 2})")


if __name__ == "__main__":
    main()
