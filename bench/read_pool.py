"""Reads that don't queue: ``get_thread`` latency while message searches run, at 300k messages.

Two configurations over the same database file, measured in the same run:

- before: one reader connection, search by ``LIKE`` over every message's JSON text
  (what the store did until the reader pool and the FTS5 index);
- after: the store as it is (a pool of readers, search through the trigram FTS5 index).

For each: ``get_thread`` p50/p99 on an idle store (the baseline), then again while
``SEARCHERS`` tasks search continuously; the ratio loaded/idle is what a Studio user feels
when someone else searches. The 300k rows are built with the raw sqlite3 module in one
transaction of ``executemany`` (the FTS index is rebuilt once at the end).
Run: .venv/bin/python bench/read_pool.py [messages]
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dev_server.storage.conversations import ConversationStore  # noqa: E402
from dev_server.storage.libsql import DEFAULT_READERS, LibSQLStore  # noqa: E402

THREADS_PER_RESOURCE = 100
RESOURCES = 30
SEARCHERS = 2
SAMPLES = 60
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
OLD_SEARCH = ("SELECT m.seq, m.id, m.thread_id, m.resource_id, m.role, m.type, m.content, m.created_at, t.title"
              " FROM messages m JOIN threads t ON t.id = m.thread_id"
              " WHERE json_extract(m.content, '$.content') LIKE ? ESCAPE '\\' AND t.resource_id = ?"
              " ORDER BY m.created_at DESC, m.seq DESC LIMIT 20")


def build(path: Path, messages: int) -> float:
    asyncio.run(_migrate(path))
    started = time.perf_counter()
    threads = RESOURCES * THREADS_PER_RESOURCE
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    # Bulk load: the per-row triggers (thread counters, FTS) are dropped and their effect
    # applied once at the end, then the triggers are put back exactly as the migrations made them.
    triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
                            " AND name IN ('messages_added', 'messages_fts_insert')").fetchall()
    for name, _ in triggers:
        conn.execute(f"DROP TRIGGER {name}")
    conn.executemany("INSERT INTO threads (id, resource_id, title, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                     [(f"t{i}", f"r{i % RESOURCES}", f"thread {i}", "2026-01-01T00:00:00.000Z",
                       "2026-01-01T00:00:00.000Z") for i in range(threads)])

    def rows():
        for i in range(messages):
            text = f"message {i} about {WORDS[i % 10]} topic{i % 5000} with some ordinary words in it"
            content = json.dumps({"format": 2, "parts": [{"type": "text", "text": text}], "content": text})
            yield (f"m{i}", f"t{i % threads}", f"r{i % threads % RESOURCES}", "user" if i % 2 else "assistant",
                   content, f"2026-01-01T{i // 3_600_000 % 24:02d}:{i // 60_000 % 60:02d}:{i // 1000 % 60:02d}."
                   f"{i % 1000:03d}Z")

    conn.executemany("INSERT INTO messages (id, thread_id, resource_id, role, content, created_at)"
                     " VALUES (?, ?, ?, ?, ?, ?)", rows())
    conn.execute("UPDATE threads SET message_count = (SELECT count(*) FROM messages WHERE thread_id = threads.id)")
    conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')")
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - started


async def _migrate(path: Path) -> None:
    store = LibSQLStore(f"file:{path}")
    await store.open()
    await store.close()


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


async def measure(path: Path, *, readers: int, old_search: bool) -> dict[str, float]:
    db = LibSQLStore(f"file:{path}", readers=readers)
    await db.open()
    store = ConversationStore(db)

    async def get_thread_latencies() -> list[float]:
        latencies = []
        for i in range(SAMPLES):
            started = time.perf_counter()
            assert await store.get_thread(f"t{i * 7}") is not None
            latencies.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.005)
        return latencies

    async def search(n: int) -> None:
        word = f"topic{n % 5000}"
        if old_search:
            await db.fetch_all(OLD_SEARCH, [f"%{word}%", f"r{n % RESOURCES}"])
        else:
            await store.search_messages(word, resource_id=f"r{n % RESOURCES}", thread_id=None, limit=20)

    searches: list[float] = []
    stop = asyncio.Event()

    async def searcher(k: int) -> None:
        n = k
        while not stop.is_set():
            started = time.perf_counter()
            await search(n)
            searches.append((time.perf_counter() - started) * 1000)
            n += SEARCHERS

    idle = await get_thread_latencies()
    tasks = [asyncio.create_task(searcher(k)) for k in range(SEARCHERS)]
    await asyncio.sleep(0.05)
    loaded = await get_thread_latencies()
    stop.set()
    await asyncio.gather(*tasks)
    await db.close()
    idle_p50, idle_p99 = percentiles(idle)
    loaded_p50, loaded_p99 = percentiles(loaded)
    return {"idle_p50": idle_p50, "idle_p99": idle_p99, "loaded_p50": loaded_p50, "loaded_p99": loaded_p99,
            "search_p50": statistics.median(searches), "searches": len(searches)}


def main() -> None:
    messages = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "read-pool.db"
        built = build(path, messages)
        before = asyncio.run(measure(path, readers=1, old_search=True))
        after = asyncio.run(measure(path, readers=DEFAULT_READERS, old_search=False))
    print(f"messages={messages} threads={RESOURCES * THREADS_PER_RESOURCE} (built in {built:.1f} s);"
          f" {SEARCHERS} concurrent searchers; {SAMPLES} get_thread calls per phase")
    for name, r in (("before: 1 reader, LIKE", before), (f"after: {DEFAULT_READERS} readers, FTS5", after)):
        print(f"{name:24}: get_thread idle p50 {r['idle_p50']:.2f} ms p99 {r['idle_p99']:.2f} ms | while searching"
              f" p50 {r['loaded_p50']:.2f} ms p99 {r['loaded_p99']:.2f} ms | ratio p50"
              f" {r['loaded_p50'] / r['idle_p50']:.1f}x p99 {r['loaded_p99'] / r['idle_p99']:.1f}x"
              f" | search p50 {r['search_p50']:.1f} ms ({r['searches']} searches)")
    print(f"p99 while searching, after vs before: {after['loaded_p99'] / before['loaded_p99']:.3f}")


if __name__ == "__main__":
    main()
