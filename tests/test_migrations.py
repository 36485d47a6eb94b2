"""Migrations: ordered, recorded, applied once even when two processes start together."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.migrate import load_migrations, split_sqlite_statements
from tests.kit.builders import database_at_version

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
    assert {"id", "thread_id", "resource_id", "role", "type", "content", "created_at"} <= set(
        table_columns(path, "messages"))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        plan = " ".join(r[3] for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM messages WHERE thread_id = 't'"
            " ORDER BY created_at DESC, seq DESC LIMIT 10"))
        assert "messages_by_thread_time" in plan and "TEMP B-TREE" not in plan

    again = LibSQLStore(f"file:{path}")
    await again.open()
    await again.close()
    assert again.applied_migrations == []


def test_statement_splitter_keeps_comments_and_semicolons_in_strings():
    sql = ("-- a comment; still a comment\nCREATE TABLE a (x TEXT DEFAULT ';');\n\n"
           "INSERT INTO a VALUES ('1;2');\n-- trailing\n")
    assert split_sqlite_statements(sql) == [
        "-- a comment; still a comment\nCREATE TABLE a (x TEXT DEFAULT ';');", "INSERT INTO a VALUES ('1;2');"]


def test_two_processes_migrating_a_fresh_file_at_once_apply_each_version_once(tmp_path: Path):
    db = tmp_path / "race.db"
    script = (
        "import asyncio, sys; from dev_server.storage.libsql import LibSQLStore\n"
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


def _open_fresh_files(directory: str, count: int, barrier, failures) -> None:
    """One process of the race: open (and close) each fresh file as soon as the other
    process is ready to open it too."""
    import asyncio

    from dev_server.storage.errors import StorageError

    async def main() -> None:
        for i in range(count):
            barrier.wait()
            store = LibSQLStore(f"file:{directory}/fresh-{i}.db")
            try:
                await store.open()
            except StorageError as exc:
                failures.append(f"{i}: {exc}")
            finally:
                await store.close()

    asyncio.run(main())


def test_two_processes_opening_the_same_fresh_file_at_once_never_fail(tmp_path: Path):
    """Issue 9.7: ``PRAGMA journal_mode = WAL`` on a fresh file is not covered by the busy
    timeout; two processes opening it at once used to fail ~1 time in 10."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    rounds = 150
    with context.Manager() as manager:
        barrier, failures = manager.Barrier(2), manager.list()
        workers = [context.Process(target=_open_fresh_files, args=(str(tmp_path), rounds, barrier, failures))
                   for _ in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=240)
        assert [w.exitcode for w in workers] == [0, 0]
        assert list(failures) == []
    expected = [m.version for m in load_migrations("libsql")]
    for i in (0, rounds // 2, rounds - 1):
        with sqlite3.connect(tmp_path / f"fresh-{i}.db") as conn:
            assert [r[0] for r in conn.execute("SELECT version FROM _migrations ORDER BY version")] == expected
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.anyio
async def test_search_index_and_thread_agent_are_backfilled_on_upgrade(tmp_path: Path):
    from dev_server.storage.conversations import ConversationStore

    path = tmp_path / "old.db"
    database_at_version(path, 2)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO threads (id, resource_id, created_at, updated_at) VALUES"
                     " ('old', 'ai-chat', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')")
        conn.executemany("INSERT INTO messages (id, thread_id, resource_id, role, content, created_at)"
                         " VALUES (?, 'old', 'ai-chat', ?, ?, ?)", [
                             ("o1", "user", '{"format":2,"parts":[],"content":"the zebra question"}',
                              "2026-01-01T00:00:01.000Z"),
                             ("o2", "assistant", '{"format":2,"parts":[],"content":"an answer",'
                              '"metadata":{"agentId":"docs-agent"}}', "2026-01-01T00:00:02.000Z")])
    store = LibSQLStore(f"file:{path}")
    await store.open()
    try:
        assert store.applied_migrations == [m.version for m in load_migrations("libsql") if m.version > 2]
        conversations = ConversationStore(store)
        hits = await conversations.search_messages("ZEBRA", resource_id="ai-chat", thread_id=None, limit=5)
        assert [m.id for m, _ in hits] == ["o1"]
        assert (await conversations.get_thread("old")).agent_id == "docs-agent"
    finally:
        await store.close()


LARGE_RECORD_COLUMNS = {"config", "metadata", "observed_message_ids", "buffered_reflection",
                        "active_observations_pending_update", "buffered_observation_chunks", "active_observations"}


@pytest.mark.anyio
async def test_an_om_record_keeps_every_value_when_its_large_columns_move_after_the_small_ones(tmp_path: Path):
    """Migration 0017 rebuilds mastra_observational_memory with its large values last (a small
    column past them was read by walking their overflow pages); a record stored before keeps
    each value, and content_rev's trigger still counts a change of the log."""
    path = tmp_path / "old.db"
    database_at_version(path, 16)
    log = "* 🔴 the user plans a trip to Lisbon\n" * 5_000  # ~200 kB: overflow pages
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO mastra_observational_memory (id, lookup_key, scope, resource_id, thread_id, origin_type,"
            " config, generation_count, pending_message_tokens, active_observations, buffered_observation_chunks,"
            " is_observing, created_at, updated_at, content_rev)"
            " VALUES ('om1', 'thread:t', 'thread', 'r', 't', 'initial', '{\"scope\":\"thread\"}', 0, 1234, ?,"
            " '[{\"id\":\"ombuf-1\"}]', '2026-01-01T00:00:00.000Z', 'c', 'u', 3)", (log,))
        before = dict(zip([d[0] for d in conn.execute("SELECT * FROM mastra_observational_memory").description],
                          conn.execute("SELECT * FROM mastra_observational_memory").fetchone(), strict=True))
    store = LibSQLStore(f"file:{path}")
    await store.open()
    await store.close()
    columns = table_columns(path, "mastra_observational_memory")
    assert set(columns) == set(before)
    assert set(columns[-len(LARGE_RECORD_COLUMNS):]) == LARGE_RECORD_COLUMNS
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        assert dict(conn.execute("SELECT * FROM mastra_observational_memory").fetchone()) == before
        conn.execute("UPDATE mastra_observational_memory SET active_observations = 'x' WHERE id = 'om1'")
        conn.execute("UPDATE mastra_observational_memory SET pending_message_tokens = 5 WHERE id = 'om1'")
        assert conn.execute("SELECT content_rev FROM mastra_observational_memory").fetchone()[0] == 4
        plan = " ".join(r[3] for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM mastra_observational_memory WHERE lookup_key = 'thread:t'"
            " ORDER BY generation_count DESC LIMIT 1"))
        assert "observational_memory_generations" in plan
