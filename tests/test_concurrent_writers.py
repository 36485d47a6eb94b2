"""Two writer processes appending to the same thread of the same SQLite file: two scripts
on the store itself, and two HTTP clients on a gateway of one and of two workers."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support import pinned_clients, sqlite_rows, user_message

REPO = Path(__file__).resolve().parents[1]
EARLIER = re.compile(r"I can see (\d+) earlier messages?")

WRITER = """
import asyncio, sys
from dev_server.kernel.clock import now_iso
from dev_server.storage.conversations import ConversationStore, Message
from dev_server.storage.libsql import LibSQLStore

async def main(url, name, count):
    db = LibSQLStore(url)
    await db.open()
    store = ConversationStore(db)
    await store.ensure_thread("shared", "r1")
    for i in range(count):
        batch = [Message(f"{name}-{i}-{j}", "shared", "r1", "user", {"format": 2, "parts": []}, now_iso())
                 for j in range(2)]
        await store.append_messages("shared", batch)
        # re-send an earlier message, as useChat does with its history
        await store.append_messages("shared", batch[:1])
    await db.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def test_two_writer_processes_lose_and_duplicate_nothing(tmp_path: Path):
    db = tmp_path / "shared.db"
    count = 300
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, f"file:{db}", name, str(count)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("a", "b")]
    outputs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err
    with sqlite3.connect(db) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE thread_id = 'shared'")]
    assert len(ids) == len(set(ids)) == 2 * count * 2
    assert {f"{n}-{i}-{j}" for n in "ab" for i in range(count) for j in range(2)} == set(ids)


@pytest.mark.parametrize("workers", [1, 2])
def test_two_clients_through_the_gateway_lose_and_duplicate_nothing(start_server, data_dir: Path, workers: int):
    """The same through a real gateway: two clients (on two different workers when there
    are two) send turns on one thread at once, each re-sending its earlier messages as
    useChat does. Every message is stored once and the turns never interleave."""
    gateway = start_server("gateway", env={"DEV_SERVER_WORKERS": str(workers), "DEV_SERVER_TELEMETRY": "false"})
    clients = pinned_clients(gateway.url, 2, distinct=workers > 1)
    count = 8

    def writer(name: str, client: httpx.Client) -> list[int]:
        sent, statuses = [], []
        for i in range(count):
            sent.append(user_message(f"{name}-{i}", f"{name} says {i}"))
            response = client.post(f"{gateway.url}/api/chat", json={"conversationId": "shared", "messages": sent[-3:]})
            statuses.append(response.status_code)
            assert response.text.rstrip().endswith("data: [DONE]"), response.text
        return statuses

    try:
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(writer, "ab", clients))
    finally:
        for client in clients:
            client.close()
    assert results == [[200] * count] * 2
    rows = sqlite_rows(data_dir / "dev-server.db",
                       "SELECT id, role, content FROM messages WHERE thread_id = 'shared' ORDER BY created_at, seq")
    users = [mid for mid, role, _ in rows if role == "user"]
    assert sorted(users) == sorted(f"{n}-{i}" for n in "ab" for i in range(count))  # each once
    assert [role for _, role, _ in rows] == ["user", "assistant"] * (2 * count)  # never interleaved
    seen = [int(EARLIER.search(json.loads(content)["content"]).group(1)) for _, role, content in rows
            if role == "assistant"]
    assert seen[:5] == [0, 2, 4, 6, 8]  # each turn saw every reply before it
