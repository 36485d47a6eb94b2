"""Group commit, on a real SQLite file and on a real libsql server (sqld): writes queued
behind a busy writer share one transaction, and each caller still gets what a transaction of
its own would have given it (its own error only, an answer only once committed, the order it
asked in)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dev_server.kernel.clock import now_iso
from dev_server.kernel.messages import Message, Thread
from dev_server.storage.checkpoints import WAL_LIMIT_BYTES
from dev_server.storage.conversation_records import ThreadExists, ThreadNotVisible
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.support import REPO, sqlite_rows

pytestmark = pytest.mark.anyio


def wal_commits(db: Path) -> int:
    """Transactions committed to the WAL file: its frames that end a transaction (a non-zero
    database size in the frame header), counted by reading the file as SQLite wrote it."""
    wal = db.with_name(db.name + "-wal").read_bytes()
    page_size = struct.unpack(">I", wal[8:12])[0]
    salts = wal[16:24]
    commits = 0
    for offset in range(32, len(wal) - 24, 24 + page_size):
        header = wal[offset:offset + 24]
        if header[8:16] != salts:  # a frame left from before the last checkpoint reset
            break
        commits += struct.unpack(">I", header[4:8])[0] != 0
    return commits


class HeldWriter:
    """Keeps the store's writer busy with one write until released, so that the writes asked
    for meanwhile queue up behind it (what concurrent requests do under load)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.started, self.release = threading.Event(), threading.Event()
        self.task: asyncio.Task[Any] | None = None

    def _hold(self, conn: Any) -> None:
        conn.execute("INSERT INTO resources (id, created_at, updated_at) VALUES ('held', '', '')"
                     " ON CONFLICT DO NOTHING")
        self.started.set()
        self.release.wait(30)

    async def __aenter__(self) -> HeldWriter:
        self.task = asyncio.create_task(self.store.run_write(self._hold))
        while not self.started.is_set():
            await asyncio.sleep(0.001)
        return self

    async def queued(self, count: int) -> None:
        while self.store.health()["writes"]["queued"] < count:
            await asyncio.sleep(0.001)

    async def __aexit__(self, *exc: object) -> None:
        self.release.set()
        assert self.task is not None
        await self.task


async def in_one_group(store: Any, writes: list[Callable[[], Any]]) -> list[Any]:
    """Start every write while the writer is held, then let them run: their outcomes, in order."""
    async with HeldWriter(store) as held:
        tasks = [asyncio.create_task(write()) for write in writes]
        await held.queued(len(writes))
    return await asyncio.gather(*tasks, return_exceptions=True)


async def committed_threads(store: Any) -> set[str]:
    """The threads another connection sees (a reader of the pool: only what was committed)."""
    return {row[0] for row in await store.fetch_all("SELECT id FROM threads")}


def counted(store: Any) -> tuple[int, int]:
    """(transactions, writes) the store's writer has run so far."""
    writes = store.health()["writes"]
    return writes["transactions"], writes["writes"]


async def test_writes_queued_behind_a_busy_writer_share_one_transaction(libsql: Any):
    conversations = ConversationStore(libsql)
    transactions, writes = counted(libsql)
    results = await in_one_group(libsql, [lambda i=i: conversations.ensure_thread(f"t{i}", "r1") for i in range(20)])
    assert [t.id for t in results] == [f"t{i}" for i in range(20)]
    assert counted(libsql) == (transactions + 2, writes + 21)  # the held write, then the twenty together
    assert await committed_threads(libsql) == {f"t{i}" for i in range(20)}


@pytest.fixture
async def wal_store(tmp_path: Path):
    """A store whose WAL only SQLite's own checkpoint would reset (after 1,000 pages, far more
    than these tests write), so that its commits can be counted in the file."""
    store = LibSQLStore(f"file:{tmp_path / 'store.db'}", checkpoint_after_s=None)
    await store.open()
    yield store
    await store.close()


async def test_the_file_holds_one_commit_per_group(wal_store: LibSQLStore, tmp_path: Path):
    """Counted in the WAL file itself, not by the store: a group is one SQLite commit, and a
    write that finds the writer idle commits alone, at once."""
    db = tmp_path / "store.db"
    conversations = ConversationStore(wal_store)
    before = wal_commits(db)
    await in_one_group(wal_store, [lambda i=i: conversations.ensure_thread(f"t{i}", "r1") for i in range(20)])
    assert wal_commits(db) - before == 2
    for i in range(3):
        await conversations.ensure_thread(f"alone{i}", "r1")
    assert wal_commits(db) - before == 5


async def test_checkpoints_run_off_the_writer_and_reach_the_database_file(sqlite_store: LibSQLStore,
                                                                          tmp_path: Path):
    """The writer never checkpoints (its commits only append to the WAL); the checkpointer's
    own connection copies them into the database file soon after."""
    conversations = ConversationStore(sqlite_store)
    assert await sqlite_store.run_write(lambda conn: conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]) == 0
    await asyncio.gather(*(conversations.ensure_thread(f"t{i}", "r1") for i in range(50)))
    # A checkpoint follows the last commit; an earlier one (its timer starts at the first
    # commit, the pragma's) may have come while the threads were still being written.
    alone, wanted, found = tmp_path / "copy.db", {f"t{i}" for i in range(50)}, set()
    deadline = time.monotonic() + 30
    while found != wanted and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        alone.write_bytes((tmp_path / "store.db").read_bytes())  # the database file without its WAL
        with contextlib.suppress(sqlite3.OperationalError):  # no table yet: not checkpointed
            found = {row[0] for row in sqlite_rows(alone, "SELECT id FROM threads")}
    assert found == wanted
    # the rows reach the file while the checkpoint runs; it is counted once it has returned
    while sqlite_store.health()["writes"]["checkpoints"] == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert sqlite_store.health()["writes"]["checkpoints"] >= 1


async def test_a_wal_past_its_limit_is_written_again_from_its_start_and_cut_back(sqlite_store: LibSQLStore,
                                                                               tmp_path: Path):
    """A passive checkpoint alone never lets SQLite write the WAL from its start again while
    commits keep coming (a 13 MB database's WAL grew to 153 MB in a minute of turns, measured
    over HTTP): past ``WAL_LIMIT_BYTES`` of pages the checkpointer's round asks for a restart, and the
    next write starts the WAL again, its file cut back to ``journal_size_limit``."""
    wal = tmp_path / "store.db-wal"
    row = "x" * 64_000

    async def write(i: int) -> None:
        await sqlite_store.run_write(lambda conn: conn.execute(
            "INSERT OR REPLACE INTO resources (id, working_memory, created_at, updated_at) VALUES (?, ?, '', '')",
            (f"r{i % 50}", row + str(i))))

    largest = 0
    for i in range(400):  # ~26 MB through the WAL
        await write(i)
        largest = max(largest, wal.stat().st_size)
    # A round may already have restarted the WAL during the loop (a slow host runs rounds
    # between commits): the file then went past the limit before it was cut back.
    assert largest > WAL_LIMIT_BYTES
    deadline = time.monotonic() + 30
    while sqlite_store.health()["writes"]["walRestarts"] == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)  # a round runs 0.1 s after a commit
    assert sqlite_store.health()["writes"]["walRestarts"] >= 1
    # The commit after a restart cuts the file back; if the WAL grew past the limit again
    # after a restart within the loop, the next round restarts it again.
    await write(400)
    while wal.stat().st_size > WAL_LIMIT_BYTES and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        await write(401)
    assert wal.stat().st_size <= WAL_LIMIT_BYTES


async def test_each_caller_in_a_group_sees_only_its_own_failure(libsql: Any):
    conversations = ConversationStore(libsql)
    await conversations.ensure_thread("theirs", "r-other")
    foreign = Message("m-foreign", "theirs", "r1", "user", {"format": 2, "parts": []}, now_iso())
    results = await in_one_group(libsql, [
        lambda: conversations.ensure_thread("a", "r1"),
        # creates thread "new", then finds "theirs" belongs to another resource: all of it undone
        lambda: conversations.save_messages([Thread("new", "r1"), Thread("theirs", "r1")], [foreign]),
        lambda: conversations.save_thread(Thread("theirs", "r1"), unless_owned_by_other_than="r1"),
        lambda: libsql.run_write(lambda conn: conn.execute(
            "INSERT INTO threads (id, resource_id, created_at, updated_at) VALUES ('a', 'r1', '', '')")),
        lambda: conversations.ensure_thread("b", "r1"),
        lambda: libsql.run_write(lambda conn: [r[0] for r in conn.execute("SELECT id FROM threads").fetchall()]),
    ])
    assert results[0].id == "a" and results[4].id == "b"
    assert isinstance(results[1], ThreadNotVisible)
    assert isinstance(results[2], ThreadExists)
    assert isinstance(results[3], sqlite3.IntegrityError)
    assert sorted(results[5]) == ["a", "b", "theirs"]  # the later write saw the earlier ones, not the failed
    assert await committed_threads(libsql) == {"a", "b", "theirs"}
    assert await libsql.fetch_all("SELECT id FROM messages") == []


async def test_a_failure_that_ends_the_whole_transaction_fails_only_its_write(sqlite_store: LibSQLStore):
    """SQLite rolls back the whole transaction on a full disk (here: past max_page_count): the
    writes before it in the group are written again, one transaction each."""
    conversations = ConversationStore(sqlite_store)
    pages = await sqlite_store.run_write(lambda conn: conn.execute("PRAGMA page_count").fetchone()[0])
    await sqlite_store.run_write(lambda conn: conn.execute(f"PRAGMA max_page_count = {pages + 20}"))
    huge = Message("m-huge", "a", "r1", "user", {"format": 2, "parts": [{"type": "text", "text": "x" * 400_000}]},
                   now_iso())
    results = await in_one_group(sqlite_store, [
        lambda: conversations.ensure_thread("a", "r1"),
        lambda: conversations.append_messages("a", [huge]),
        lambda: conversations.ensure_thread("b", "r1"),
    ])
    assert [r.id for r in (results[0], results[2])] == ["a", "b"]
    assert isinstance(results[1], sqlite3.OperationalError) and "full" in str(results[1])
    assert await committed_threads(sqlite_store) == {"a", "b"}
    assert await sqlite_store.fetch_all("SELECT id FROM messages") == []


async def test_an_answer_means_committed(libsql: Any):
    """Every caller of a group, when its answer arrives, finds its row through another
    connection: it was committed (on a file, to the WAL, which outlives the process) before
    it was told."""
    conversations = ConversationStore(libsql)

    async def create_and_look(i: int) -> bool:
        await conversations.ensure_thread(f"t{i}", "r1")
        return f"t{i}" in await committed_threads(libsql)

    assert await in_one_group(libsql, [lambda i=i: create_and_look(i) for i in range(10)]) == [True] * 10


async def test_writes_keep_the_order_they_were_asked_in(libsql: Any):
    conversations = ConversationStore(libsql)
    for thread in ("x", "y"):
        await conversations.ensure_thread(thread, "r1")
    stamp = now_iso()  # one time for all: the order is the insertion order alone

    def append(thread: str, i: int) -> Any:
        message = Message(f"{thread}{i}", thread, "r1", "user", {"format": 2, "parts": []}, stamp)
        return conversations.append_messages(thread, [message])

    writes = [lambda t=t, i=i: append(t, i) for i in range(15) for t in ("x", "y")]
    await in_one_group(libsql, writes[:10])
    await asyncio.gather(*(write() for write in writes[10:]))  # and as they come, in whatever groups
    for thread in ("x", "y"):
        history = await conversations.recent_messages(thread, None)
        assert [m.id for m in history] == [f"{thread}{i}" for i in range(15)]


async def test_a_write_cancelled_while_queued_is_skipped(libsql: Any):
    conversations = ConversationStore(libsql)
    async with HeldWriter(libsql) as held:
        kept = asyncio.create_task(conversations.ensure_thread("kept", "r1"))
        dropped = asyncio.create_task(conversations.ensure_thread("dropped", "r1"))
        await held.queued(2)
        dropped.cancel()
        while not dropped.done():  # the cancellation has reached the queue
            await asyncio.sleep(0)
    await kept
    with pytest.raises(asyncio.CancelledError):
        await dropped
    assert await committed_threads(libsql) == {"kept"}


async def test_one_transaction_per_write_when_groups_are_off(tmp_path: Path):
    db = tmp_path / "store.db"
    store = LibSQLStore(f"file:{db}", max_group=1, checkpoint_after_s=None)
    await store.open()
    try:
        conversations = ConversationStore(store)
        before = wal_commits(db)
        await in_one_group(store, [lambda i=i: conversations.ensure_thread(f"t{i}", "r1") for i in range(5)])
        assert wal_commits(db) - before == 6
    finally:
        await store.close()


async def test_a_group_meeting_an_unreachable_server_fails_at_once_not_once_per_write(tmp_path: Path):
    """The server down is no one write's failure: every write of the group gets the 503's
    error from one attempt, instead of each waiting for it again alone."""
    from dev_server.storage.hrana import StorageUnavailable
    from dev_server.storage.remote import RemoteLibSQLStore
    from tests.sqld import Sqld

    with Sqld(tmp_path / "sqld") as server:
        store = RemoteLibSQLStore(server.url, timeout_s=2)
        await store.open()
        try:
            conversations = ConversationStore(store)
            held = await HeldWriter(store).__aenter__()
            tasks = [asyncio.create_task(conversations.ensure_thread(f"t{i}", "r1")) for i in range(5)]
            await held.queued(5)
            server.stop()
            transactions = store.transactions
            held.release.set()
            with pytest.raises(StorageUnavailable):
                await held.task  # type: ignore[misc]
            results = await asyncio.gather(*tasks, return_exceptions=True)
            assert all(isinstance(r, StorageUnavailable) for r in results), results
            assert store.transactions - transactions == 2  # the held write's, then the group's
        finally:
            await store.close()


WRITER = """
import asyncio, sys
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore

async def main(url):
    db = LibSQLStore(url)
    await db.open()
    store = ConversationStore(db)
    for round_ in range(100_000):
        ids = [f"t{round_}-{i}" for i in range(16)]
        await asyncio.gather(*(store.ensure_thread(tid, "r1") for tid in ids))
        print(" ".join(ids), flush=True)  # answered: what a 2xx would be sent for

asyncio.run(main(sys.argv[1]))
"""


def test_a_process_killed_after_its_answers_keeps_every_answered_write(tmp_path: Path):
    db = tmp_path / "store.db"
    child = subprocess.Popen([sys.executable, "-c", WRITER, f"file:{db}"], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    answered: list[str] = []
    try:
        for _ in range(20):
            line = child.stdout.readline()
            assert line, child.stderr.read() if child.stderr else ""
            answered += line.split()
    finally:
        child.send_signal(signal.SIGKILL)  # mid-write: more groups are queued and running
        child.communicate()
    stored = {row[0] for row in sqlite_rows(db, "SELECT id FROM threads")}
    assert set(answered) <= stored
    assert sqlite_rows(db, "PRAGMA integrity_check") == [("ok",)]

