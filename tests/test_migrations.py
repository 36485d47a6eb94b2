"""Migrations: ordered, recorded, applied once even when two processes start together."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.storage.libsql import LibSQLStore
from app.storage.migrate import load_migrations, split_sqlite_statements

REPO = Path(__file__).resolve().parents[1]


def table_columns(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


@pytest.mark.anyio
async def test_fresh_database_gets_the_schema_and_records_versions(tmp_path: Path):
    store = LibSQLStore(f"file:{tmp_path / 'db.sqlite'}")
    await store.open()
    await store.close()
    assert store.applied_migrations == [m.version for m in load_migrations("libsql")]
    path = tmp_path / "db.sqlite"
    assert {"id", "resource_id", "title", "metadata", "created_at", "updated_at"} <= set(table_columns(path, "threads"))
    assert {"id", "thread_id", "resource_id", "role", "type", "content", "created_at"} <= set(table_columns(path, "messages"))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        plan = " ".join(r[3] for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM messages WHERE thread_id = 't' ORDER BY created_at DESC, seq DESC LIMIT 10"))
        assert "messages_by_thread_time" in plan and "TEMP B-TREE" not in plan

    again = LibSQLStore(f"file:{path}")
    await again.open()
    await again.close()
    assert again.applied_migrations == []


def test_statement_splitter_keeps_comments_and_semicolons_in_strings():
    sql = "-- a comment; still a comment\nCREATE TABLE a (x TEXT DEFAULT ';');\n\nINSERT INTO a VALUES ('1;2');\n-- trailing\n"
    assert split_sqlite_statements(sql) == [
        "-- a comment; still a comment\nCREATE TABLE a (x TEXT DEFAULT ';');", "INSERT INTO a VALUES ('1;2');"]


def test_two_processes_migrating_a_fresh_file_at_once_apply_each_version_once(tmp_path: Path):
    db = tmp_path / "race.db"
    script = (
        "import asyncio, sys; from app.storage.libsql import LibSQLStore\n"
        "async def main():\n"
        f"    s = LibSQLStore('file:{db}'); await s.open(); print(s.applied_migrations); await s.close()\n"
        "asyncio.run(main())\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), results
    applied = [eval(out) for out, _ in results]
    expected = [m.version for m in load_migrations("libsql")]
    assert sorted(v for versions in applied for v in versions) == expected
    with sqlite3.connect(db) as conn:
        assert [r[0] for r in conn.execute("SELECT version FROM _migrations ORDER BY version")] == expected
