"""Two writer processes appending to the same thread of the same SQLite file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WRITER = """
import asyncio, sys
from app.clock import now_iso
from app.storage.conversations import ConversationStore, Message
from app.storage.libsql import LibSQLStore

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
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err
        assert "locked" not in err
    with sqlite3.connect(db) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE thread_id = 'shared'")]
    assert len(ids) == len(set(ids)) == 2 * count * 2
    assert {f"{n}-{i}-{j}" for n in "ab" for i in range(count) for j in range(2)} == set(ids)
