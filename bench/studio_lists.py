"""Studio list routes at scale: 100,000 threads and 1,000,000 messages.

Measures, through a real studio process over HTTP, a thread-list page of 100 (one
resource with 10,000 threads, and all threads with no resource) and a messages page of 40
(the newest window of a thread with 100,000 messages, and a page deep inside it).
Baseline, measured in the same run: the same rows read by a raw ``sqlite3`` query in one
process, including JSON decoding of the stored content. Ratios are ours / baseline (p50).
Run: .venv/bin/python bench/studio_lists.py [requests per scenario]
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dev_server.storage.libsql import LibSQLStore  # noqa: E402
from tests.support import free_port  # noqa: E402

THREADS, MESSAGES, BIG_THREAD_MESSAGES = 100_000, 1_000_000, 100_000


def seed(path: Path) -> None:
    async def migrate() -> None:
        store = LibSQLStore(f"file:{path}")
        await store.open()
        await store.close()

    asyncio.run(migrate())
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous = OFF")
    stamp = lambda n: (f"2026-01-{1 + n // 86_400_000:02d}T{(n // 3_600_000) % 24:02d}:"  # noqa: E731
                       f"{(n // 60_000) % 60:02d}:{(n // 1000) % 60:02d}.{n % 1000:03d}Z")
    conn.executemany("INSERT INTO threads (id, resource_id, title, metadata, created_at, updated_at)"
                     " VALUES (?, ?, ?, NULL, ?, ?)",
                     ((f"t{i}", "big-resource" if i < 10_000 else f"r{i % 900}", f"thread {i}",
                       stamp(i * 10), stamp(i * 10))
                      for i in range(THREADS)))
    content = json.dumps({"format": 2, "parts": [{"type": "text", "text": "x" * 120}], "content": "x" * 120})
    conn.execute("DROP TRIGGER messages_added")  # seeding only: set counts once at the end
    rows = ((f"m{i}", "big" if i < BIG_THREAD_MESSAGES else f"t{i % THREADS}", "big-resource",
             "user" if i % 2 else "assistant", "text", content, stamp(i)) for i in range(MESSAGES))
    conn.execute("INSERT INTO threads (id, resource_id, title, created_at, updated_at)"
                 " VALUES ('big', 'big-resource', 'big', ?, ?)",
                 (stamp(0), stamp(0)))
    conn.executemany("INSERT INTO messages (id, thread_id, resource_id, role, type, content, created_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.execute("UPDATE threads SET message_count ="
                 " (SELECT count(*) FROM messages WHERE messages.thread_id = threads.id)")
    conn.execute("CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN UPDATE threads"
                 " SET message_count = message_count + 1,"
                 " updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = NEW.thread_id; END")
    conn.execute("ANALYZE")
    conn.commit()
    conn.close()


RAW = {
    "threads, 1 resource": ("SELECT * FROM threads WHERE resource_id = 'big-resource'"
                            " ORDER BY created_at DESC, id DESC LIMIT 100", "threads"),
    "threads, all": ("SELECT * FROM threads ORDER BY created_at DESC, id DESC LIMIT 100", "threads"),
    "messages, newest 40": ("SELECT * FROM messages WHERE thread_id = 'big'"
                            " ORDER BY created_at DESC, seq DESC LIMIT 40", "messages"),
    "messages, page 1000": ("SELECT * FROM messages WHERE thread_id = 'big'"
                            " ORDER BY created_at DESC, seq DESC LIMIT 40 OFFSET 40000", "messages"),
}
HTTP = {
    "threads, 1 resource": "/api/memory/threads?resourceId=big-resource&perPage=100",
    "threads, all": "/api/memory/threads?perPage=100",
    "messages, newest 40": "/api/memory/threads/big/messages?perPage=40"
                           "&orderBy=%7B%22field%22%3A%22createdAt%22%2C%22direction%22%3A%22DESC%22%7D",
    "messages, page 1000": "/api/memory/threads/big/messages?perPage=40&page=1000",
}


def time_raw(path: Path, sql: str, kind: str, n: int) -> list[float]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    times = []
    for _ in range(n):
        started = time.perf_counter()
        rows = conn.execute(sql).fetchall()
        if kind == "messages":
            [json.loads(r["content"]) for r in rows]
        times.append(time.perf_counter() - started)
    conn.close()
    return times


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        started = time.perf_counter()
        seed(data_dir / "dev-server.db")
        print(f"seeded {THREADS} threads, {MESSAGES} messages in {time.perf_counter() - started:.1f}s")
        port = free_port()
        env = {**os.environ, "DEV_SERVER_DATA_DIR": str(data_dir), "DEV_SERVER_LOG_LEVEL": "warning"}
        studio = subprocess.Popen([sys.executable, "-m", "dev_server", "studio", "--port", str(port)],
                                  env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", transport=transport, timeout=30) as client:
                while True:  # until serving and the model warm-up (a 4 s import) is over
                    try:
                        if client.get("/health").json()["models"]["ready"]:
                            break
                    except httpx.TransportError:
                        pass
                    time.sleep(0.05)
                print(f"{'scenario':<22} {'raw p50':>9} {'http p50':>9} {'http p99':>9}  ratio")
                for name, path in HTTP.items():
                    for _ in range(10):
                        client.get(path)
                    times = []
                    for _ in range(n):
                        t = time.perf_counter()
                        response = client.get(path)
                        times.append(time.perf_counter() - t)
                        assert response.status_code == 200
                    raw = time_raw(data_dir / "dev-server.db", *RAW[name], n)
                    ours, base = statistics.median(times), statistics.median(raw)
                    p99 = sorted(times)[int(0.99 * len(times))]
                    print(f"{name:<22} {base * 1000:8.2f}ms {ours * 1000:8.2f}ms {p99 * 1000:8.2f}ms"
                          f"  {ours / base:6.1f}x")
        finally:
            studio.send_signal(signal.SIGINT)
            studio.wait(10)


if __name__ == "__main__":
    main()
