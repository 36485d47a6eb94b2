"""Composite routing and the conversation store, on real SQLite and DuckDB files."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from dev_server.factory import storage_for
from dev_server.kernel.clock import now_iso
from dev_server.kernel.messages import Message
from dev_server.settings import Settings
from dev_server.storage.composite import OBSERVABILITY, CompositeStore, DomainUnavailable
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.duckdb_store import CACHE_MB, CHECKPOINT_WAL, REFIT_EVERY, SPAN_KEY_BYTES, DuckDBStore
from dev_server.storage.observability.columns import SPAN_COLUMNS as ALL_SPAN_COLUMNS
from dev_server.storage.observability.columns import span_key
from dev_server.storage.observability.writer import ObservabilityWriter
from tests.support import sqlite_rows

pytestmark = pytest.mark.anyio

SPAN_COLUMNS = ["trace_id", "span_id", "name", "span_type", "status", "started_at", "created_at", "updated_at",
                "span_key"]


def a_message(i: int, thread: str = "t1", resource: str = "r1", role: str = "user") -> Message:
    return Message(id=f"m{i}", thread_id=thread, resource_id=resource, role=role,
                   content={"format": 2, "parts": [{"type": "text", "text": f"hello {i}"}]},
                   created_at=now_iso())


async def test_domains_route_to_their_engines(settings: Settings, data_dir: Path):
    storage = storage_for("studio", settings)
    await storage.open()
    conversations = ConversationStore(storage.default)
    await conversations.ensure_thread("t1", "r1")
    await conversations.append_messages("t1", [a_message(1)])
    now = now_iso()
    await storage.domain(OBSERVABILITY).append("spans", SPAN_COLUMNS,
                                               [("tr1", "s1", "agent run", "agent_run", "success", now, now, now,
                                                 span_key("tr1", "s1"))])
    await storage.close()

    with sqlite3.connect(data_dir / "dev-server.db") as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 1
        assert "spans" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    with duckdb.connect(str(data_dir / "observability.duckdb")) as con:
        assert con.execute("SELECT count(*) FROM spans").fetchone()[0] == 1
        assert con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'messages'").fetchone()[0] == 0


async def test_deleting_the_observability_file_loses_no_thread(settings: Settings, data_dir: Path):
    storage = storage_for("studio", settings)
    await storage.open()
    await ConversationStore(storage.default).ensure_thread("keep-me", "r1")
    await storage.close()
    (data_dir / "observability.duckdb").unlink()

    storage = storage_for("studio", settings)
    await storage.open()
    assert (await ConversationStore(storage.default).get_thread("keep-me")).resource_id == "r1"
    assert (await storage.domain(OBSERVABILITY).fetch_all("SELECT count(*) AS n FROM spans")) == [{"n": 0}]
    await storage.close()


async def test_injected_options_replace_files_and_the_observability_domain(settings: Settings, tmp_path: Path):
    class StandIn:
        url = "memory:"
        is_open = False
        rows: list = []

        async def open(self): self.is_open = True
        async def close(self): self.is_open = False
        def health(self): return {"url": self.url, "open": self.is_open}

    stand_in = StandIn()
    storage = CompositeStore.for_role("studio", default_db_url=f"file:{tmp_path / 'other.db'}",
                                      observability_db_url=settings.observability_db_url,
                                      observability_domain=stand_in)
    await storage.open()
    assert storage.domain(OBSERVABILITY) is stand_in and stand_in.is_open
    assert storage.health()["default"]["path"] == str(tmp_path / "other.db")
    await storage.close()
    assert (tmp_path / "other.db").exists() and not (settings.resolved_data_dir / "observability.duckdb").exists()


async def test_a_locked_observability_file_disables_only_that_domain(settings: Settings, data_dir: Path):
    data_dir.mkdir(parents=True)
    # A second connection in another process is what DuckDB refuses; simulate with a corrupt file,
    # which fails the same way on open (the cross-process lock case is in test_processes.py).
    (data_dir / "observability.duckdb").write_bytes(b"this is not a duckdb file" * 100)
    storage = storage_for("studio", settings)
    await storage.open()
    assert storage.default.is_open
    with pytest.raises(DomainUnavailable, match="observability"):
        storage.domain(OBSERVABILITY)
    assert "error" in storage.health()[OBSERVABILITY]
    await storage.close()


async def test_gateway_does_not_open_duckdb(settings: Settings, data_dir: Path):
    storage = storage_for("gateway", settings)
    await storage.open()
    assert storage.health()[OBSERVABILITY]["owner"] == "studio"
    await storage.close()
    assert not (data_dir / "observability.duckdb").exists()


async def test_conversations_insert_once_page_and_cursor(settings: Settings):
    storage = storage_for("gateway", settings)
    await storage.open()
    store = ConversationStore(storage.default)
    thread = await store.ensure_thread("t1", "r1", title="")
    assert (thread.id, thread.resource_id) == ("t1", "r1")
    assert (await store.ensure_thread("t1", "someone-else")).resource_id == "r1"

    messages = [a_message(i) for i in range(25)]
    assert len(await store.append_messages("t1", messages)) == 25
    assert await store.append_messages("t1", messages[:10]) == []  # re-sent history is ignored
    assert await store.count_messages("t1") == 25

    recent = await store.recent_messages("t1", 10)
    assert [m.id for m in recent] == [f"m{i}" for i in range(15, 25)]
    window, total = await store.page_messages("t1", page=1, per_page=10, direction="DESC")
    assert total == 25 and [m.id for m in window] == [f"m{i}" for i in range(5, 15)]
    after = await store.messages_around("t1", "m20", after=True, limit=3)
    before = await store.messages_around("t1", "m3", after=False, limit=10)
    assert [m.id for m in after] == ["m21", "m22", "m23"]
    assert [m.id for m in before] == ["m0", "m1", "m2"]
    assert await store.messages_around("t1", "nope", after=True, limit=3) is None

    assert await store.delete_thread("t1")
    assert await store.count_messages("t1") == 0 and await store.get_thread("t1") is None
    await storage.close()


async def test_corrupt_default_database_is_a_clear_storage_error(settings: Settings, data_dir: Path):
    from dev_server.storage.errors import StorageError

    data_dir.mkdir(parents=True)
    (data_dir / "dev-server.db").write_bytes(b"garbage" * 1000)
    storage = storage_for("gateway", settings)
    with pytest.raises(StorageError, match="dev-server.db"):
        await storage.open()


async def test_duckdb_store_appends_in_batches(tmp_path: Path):
    store = DuckDBStore(f"file:{tmp_path / 'obs.duckdb'}")
    await store.open()
    now = now_iso()
    rows = [(f"tr{i}", f"s{i}", "x", "generic", "success", now, now, now, span_key(f"tr{i}", f"s{i}"))
            for i in range(5000)]
    assert await store.append("spans", SPAN_COLUMNS, rows) == 5000
    assert await store.fetch_all("SELECT count(DISTINCT trace_id) AS n FROM spans") == [{"n": 5000}]
    await store.close()


async def test_the_studios_observability_store_keeps_its_cache_within_the_configured_memory(tmp_path: Path):
    """DuckDB's own limit is 80 % of the machine's RAM, and it keeps what it wrote cached up to
    it: a studio storing spans grew by what it stored (DEV_SERVER_TRACE_MEMORY_MB)."""
    settings = Settings(data_dir=tmp_path, trace_memory_mb=48)
    storage = storage_for("studio", settings)
    await storage.open()
    try:
        limit = await storage.domain(OBSERVABILITY).fetch_all("SELECT current_setting('memory_limit') AS v")
        assert limit[0]["v"] == "45.7 MiB"  # 48 MB, shown in mebibytes
    finally:
        await storage.close()


async def test_spans_written_since_the_last_checkpoint_stay_a_few_megabytes_of_the_studios_memory(tmp_path: Path):
    """DuckDB holds the rows written since its last checkpoint in memory until its WAL
    reaches ``checkpoint_threshold`` (16 MB by default: 16 MB of the studio's RSS under a
    steady stream of spans); the store checkpoints at CHECKPOINT_WAL. The ~14 MB of spans
    written here would all still be in memory at DuckDB's default."""
    store = DuckDBStore(f"file:{tmp_path / 'observability.duckdb'}")
    await store.open()
    try:
        writer = ObservabilityWriter(store)
        now = datetime.now(UTC)
        text = f"\"{'x' * 1_000}\""  # a JSON string
        for batch in range(11):
            rows = [tuple({"trace_id": f"t{batch}-{i}", "span_id": f"s{i}", "name": "a span", "span_type": "generic",
                           "is_event": False, "status": "success", "started_at": now, "created_at": now,
                           "updated_at": now, "input": text}.get(column) for column in ALL_SPAN_COLUMNS)
                    for i in range(1_000)]
            await writer.write_spans(rows)
        (row,) = await store.fetch_all(
            "SELECT current_setting('checkpoint_threshold') AS threshold, (SELECT count(*) FROM spans) AS spans,"
            " (SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'IN_MEMORY_TABLE') AS held")
        assert row["threshold"] == CHECKPOINT_WAL.replace("MiB", ".0 MiB") and row["spans"] == 11_000
        assert row["held"] < 10 * 2**20  # what was written since the checkpoint at CHECKPOINT_WAL
    finally:
        await store.close()


async def test_without_a_configured_limit_the_observability_cache_follows_the_span_index(tmp_path: Path):
    """DuckDB's own limit is 80 % of the machine's RAM, and it kept what it wrote cached up to
    it. Its primary-key indexes must fit in memory, also when a checkpoint or a restart left
    them on disk and the next insert reads them back, so the limit the store keeps is what
    the keys stored need (or the indexes' size in memory, if larger) plus CACHE_MB, from the
    moment the store opens."""

    async def limit_keys_index(observability: DuckDBStore) -> tuple[float, int, float]:
        (row,) = await observability.fetch_all(
            "SELECT current_setting('memory_limit') AS limit, (SELECT count(*) FROM spans) AS keys, "
            "(SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'ART_INDEX') AS index")
        number, unit = row["limit"].split()
        return float(number) * {"MiB": 1, "GiB": 1024}[unit], row["keys"], row["index"] / 2**20

    def fitted(limit: float, keys: int, index: float) -> bool:
        needed = max(keys * SPAN_KEY_BYTES / 2**20, index)
        return CACHE_MB + needed - 1 <= limit <= CACHE_MB + needed + 1

    storage = storage_for("studio", Settings(data_dir=tmp_path))
    await storage.open()
    try:
        observability = storage.domain(OBSERVABILITY)
        assert (await limit_keys_index(observability))[:2] == (CACHE_MB, 0)
        writer = ObservabilityWriter(observability)
        now = datetime.now(UTC)
        for batch in range(REFIT_EVERY * 4):
            rows = [tuple({"trace_id": f"t{batch}-{i}", "span_id": f"s{i}", "name": "a span", "span_type": "generic",
                           "is_event": False, "status": "success", "started_at": now, "created_at": now,
                           "updated_at": now}.get(column) for column in ALL_SPAN_COLUMNS) for i in range(1_000)]
            await writer.write_spans(rows)
        limit, keys, index = await limit_keys_index(observability)
        assert keys == REFIT_EVERY * 4_000 and fitted(limit, keys, index)
    finally:
        await storage.close()
    reopened = storage_for("studio", Settings(data_dir=tmp_path))
    await reopened.open()
    try:  # the index is on disk until an insert needs it: the limit counts it already
        limit, keys, _ = await limit_keys_index(reopened.domain(OBSERVABILITY))
        assert keys == REFIT_EVERY * 4_000 and fitted(limit, keys, 0)
    finally:
        await reopened.close()


async def test_thread_message_count_stays_exact(settings: Settings):
    storage = storage_for("gateway", settings)
    await storage.open()
    store = ConversationStore(storage.default)
    await store.ensure_thread("t1", "r1")
    await store.append_messages("t1", [a_message(i) for i in range(6)])
    await store.append_messages("t1", [a_message(i) for i in range(3)])  # duplicates: ignored
    assert await store.count_messages("t1") == 6
    await store.delete_messages(["m0", "m1"])
    assert await store.count_messages("t1") == 4
    await store.delete_after("t1", "m3")
    assert await store.count_messages("t1") == 2
    window, total = await store.page_messages("t1", per_page=1)
    assert total == 2 and [m.id for m in window] == ["m3"]
    await storage.close()



async def test_thread_pages_with_tied_timestamps_read_the_index_in_order(settings: Settings, data_dir: Path):
    """Threads created in one transaction share created_at; a page must still come straight
    from an index (no sort of every tied row) and in (created_at, id) order."""
    from dev_server.kernel.messages import Thread
    from dev_server.storage import message_writes

    storage = storage_for("gateway", settings)
    await storage.open()
    threads = [Thread(f"t{i:03d}", "r1") for i in range(300)]
    await storage.default.run_write(lambda conn: message_writes.ensure_threads(conn, threads, now_iso()))
    store = ConversationStore(storage.default)
    for order_by in ("createdAt", "updatedAt"):
        page, total = await store.list_threads(resource_id="r1", order_by=order_by, page=1, per_page=100)
        assert total == 300 and [t.id for t in page] == [f"t{i:03d}" for i in range(199, 99, -1)]
    await storage.close()
    with sqlite3.connect(data_dir / "dev-server.db") as conn:
        for column in ("created_at", "updated_at"):
            plan = conn.execute(f"EXPLAIN QUERY PLAN SELECT * FROM threads WHERE resource_id = ?"
                                f" ORDER BY {column} DESC, id DESC LIMIT 100", ("r1",)).fetchall()
            assert not any("TEMP B-TREE" in row[-1] for row in plan), plan

# -- reader pool, search index, transactions ----------------------------------------------


async def test_a_held_reader_does_not_block_the_others(settings: Settings):
    storage = storage_for("gateway", settings)
    await storage.open()
    db = storage.default
    store = ConversationStore(db)
    await store.ensure_thread("t1", "r1")
    assert db.health()["readers"] == db.reader_count > 1
    async with db.reader() as first, db.reader() as second:  # a slow search holding readers
        assert first is not second
        assert (await store.get_thread("t1")).id == "t1"  # still answered by a free reader
    await storage.close()


def a_text(i: str, text: str, thread: str = "t1", resource: str = "r1") -> Message:
    return Message(id=i, thread_id=thread, resource_id=resource, role="user",
                   content={"format": 2, "parts": [{"type": "text", "text": text}], "content": text},
                   created_at=now_iso())


async def test_message_search_reads_an_index_kept_by_triggers(settings: Settings):
    storage = storage_for("gateway", settings)
    await storage.open()
    store = ConversationStore(storage.default)
    await store.ensure_thread("t1", "r1")
    await store.ensure_thread("t2", "r2")
    await store.append_messages("t1", [a_text("a", "Pineapple pizza"), a_text("b", "no fruit here")])
    await store.append_messages("t2", [a_text("c", "pineapple for r2", "t2", "r2")])

    async def ids(text: str, resource: str = "r1") -> list[str]:
        return [m.id for m, _ in await store.search_messages(text, resource_id=resource, thread_id=None, limit=10)]

    assert await ids("APPLE") == ["a"]  # substring, case-insensitive, only the resource's threads
    plan = " ".join(r[3] for r in await storage.default.fetch_all(
        "EXPLAIN QUERY PLAN SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"apple\"'"))
    assert "VIRTUAL TABLE INDEX" in plan
    await store.replace_message(a_text("a", "mango now"))
    assert await ids("apple") == [] and await ids("mango") == ["a"]  # update trigger
    await store.delete_messages(["a"])
    assert await ids("mango") == []  # delete trigger
    for hostile in ['"', 'a" OR "b', "NEAR(x y)", "* AND (", "fruit'); DROP TABLE messages; --", "no"]:
        await ids(hostile)  # quoted as one FTS5 string (or, under 3 characters, LIKE): never an error
    assert await ids("fruit") == ["b"] and await ids("no") == ["b"]
    await storage.close()


async def fail_on_insert_of(path: Path, message_id: str) -> None:
    """A real SQLite failure half-way through a transaction: inserting this id aborts."""
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TRIGGER fail_{message_id} BEFORE INSERT ON messages WHEN NEW.id = '{message_id}'"
                     " BEGIN SELECT RAISE(ABORT, 'injected failure'); END")


async def test_a_turn_that_fails_half_way_writes_nothing(settings: Settings, data_dir: Path):
    from dev_server.memory.memory import Memory, MemoryOptions

    storage = storage_for("gateway", settings)
    await storage.open()
    store = ConversationStore(storage.default)
    memory = Memory(MemoryOptions(), store, agent_id="chat-agent")
    thread = await memory.open_thread("t1", "r1")
    await memory.record_turn(thread, [a_text("u1", "first")])
    await store.append_messages("t1", [Message("a1", "t1", "r1", "assistant", {"format": 2, "parts": []}, now_iso())])
    await fail_on_insert_of(data_dir / "dev-server.db", "boom")

    # an edit of u1 (replace it, delete the reply after it) plus a message whose insert fails
    with pytest.raises(sqlite3.IntegrityError, match="injected"):
        await memory.record_turn(thread, [a_text("u1", "edited"), a_text("boom", "x")])
    rows = sqlite_rows(data_dir / "dev-server.db", "SELECT id, json_extract(content, '$.content') FROM messages"
                       " ORDER BY seq")
    assert rows == [("u1", "first"), ("a1", None)]

    # a new thread whose first message fails: not even the thread is created
    fresh = await memory.open_thread("t2", "r1")
    with pytest.raises(sqlite3.IntegrityError):
        await memory.record_turn(fresh, [a_text("boom", "x", "t2")])
    assert await store.get_thread("t2") is None
    await storage.close()


async def test_clone_and_save_messages_are_all_or_nothing(settings: Settings, data_dir: Path):
    from dev_server.kernel.messages import Thread
    from dev_server.storage.conversations import MessageNotVisible

    storage = storage_for("gateway", settings)
    await storage.open()
    store = ConversationStore(storage.default)
    source = await store.ensure_thread("src", "r1")
    await store.append_messages("src", [a_text("s1", "one", "src"), a_text("s2", "two", "src")])
    await store.ensure_thread("other", "r2")
    await store.append_messages("other", [a_text("theirs", "not yours", "other", "r2")])

    batch = [a_text(f"n{i}", f"new {i}", "mine") for i in range(50)] + [a_text("theirs", "overwrite", "mine")]
    with pytest.raises(MessageNotVisible):
        await store.save_messages([Thread("mine", "r1")], batch)
    assert await store.get_thread("mine") is None and await store.get_message("n0") is None
    assert (await store.get_message("theirs")).content["content"] == "not yours"

    await store.save_messages([Thread("mine", "r1")], batch[:50])  # 50 messages, one transaction
    assert await store.count_messages("mine") == 50

    await fail_on_insert_of(data_dir / "dev-server.db", "never")
    with sqlite3.connect(data_dir / "dev-server.db") as conn:  # the second copy's insert fails
        conn.execute("CREATE TRIGGER fail_second_copy BEFORE INSERT ON messages"
                     " WHEN NEW.thread_id = 'copy' AND (SELECT count(*) FROM messages WHERE thread_id = 'copy') = 1"
                     " BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    with pytest.raises(sqlite3.IntegrityError):
        await store.clone_thread(source, Thread("copy", "r1"), None)
    assert await store.get_thread("copy") is None and await store.count_messages("copy") == 0
    await storage.close()


async def test_readers_are_handed_out_first_come_first_served(settings: Settings):
    import asyncio

    from dev_server.storage.libsql import LibSQLStore

    db = LibSQLStore(settings.default_db_url, readers=1)
    await db.open()
    order: list[str] = []

    async def use(name: str) -> None:
        async with db.reader():
            order.append(name)
            await asyncio.sleep(0)

    async with db.reader():  # a search holding the only reader, with a get_thread waiting behind it
        waiting = asyncio.create_task(use("waiting get_thread"))
        await asyncio.sleep(0)
    await use("searcher asking again at once")  # would barge in front with a plain asyncio.Queue
    await waiting
    assert order == ["waiting get_thread", "searcher asking again at once"]
    await db.close()


async def test_stored_messages_are_read_fast_and_repaired(libsql) -> None:
    from dev_server.kernel.messages import Thread

    store = ConversationStore(libsql)
    await store.save_thread(Thread("t", "r"))
    rows = [("clean", '{"format":2,"parts":[{"type":"text","text":"caf\\u00e9 \\ud83d\\ude00"}]}'),
            ("lone", '{"format":2,"parts":[{"type":"text","text":"a\\ud800b"}]}')]  # orjson refuses it
    await libsql.run_write(lambda conn: conn.executemany(
        "INSERT INTO messages (id, thread_id, resource_id, role, content, created_at)"
        " VALUES (?, 't', 'r', 'user', ?, '2026-01-01T00:00:00.000Z')", rows))
    clean, lone = await store.messages_since("t", None)
    assert clean.content["parts"][0]["text"] == "café 😀"
    assert lone.content["parts"][0]["text"] == "a\ufffdb"  # read repaired: safe for a model or a stream
    assert clean.stored_digest is not None and clean.stored_digest != lone.stored_digest


async def test_thread_metadata_with_non_finite_numbers_is_stored_as_null(libsql) -> None:
    """A metadata update the server makes itself (OM's extracted values come from a model's
    JSON) is valid JSON in the column: an infinity there would make every later metadata
    filter (json_extract) fail."""
    from dev_server.kernel.messages import Thread

    store = ConversationStore(libsql)
    await store.save_thread(Thread("t-nf", "r"))
    await store.update_thread("t-nf", metadata={"score": float("-inf"), "kept": [2.5, float("nan")]})
    assert (await store.get_thread("t-nf")).metadata == {"score": None, "kept": [2.5, None]}
    threads, total = await store.list_threads(resource_id="r", metadata={"kept": [2.5, None]})
    assert total == 1 and threads[0].id == "t-nf"


def test_a_restarting_server_without_its_database_yet_is_unavailable_not_an_error():
    """sqld answers HTTP before its database is back after a restart (404, "Namespace `default`
    doesn't exist"): a 503 to retry, like the server down, never a 500 (seen in
    test_scale_out's restart under load)."""
    from dev_server.storage.hrana import StorageUnavailable, answer_of

    with pytest.raises(StorageUnavailable):
        answer_of(404, b'{"error":"Namespace `default` doesn\'t exist"}', "http://db/v2/pipeline")
