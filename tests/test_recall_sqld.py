"""Semantic recall on a libsql server (issue 31.6): searched in sqld's own vector index
(``storage.native_vectors``), with the same results as the embedded file's in-process scan,
scopes kept (no other resource's, thread's or agent's messages), and the embedded path as it
was. A real sqld (``tests/sqld.py``), real SQLite files, the real local embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.processors import StepContext
from dev_server.llm.embeddings import local_embedder
from dev_server.memory.memory import Memory, MemoryOptions
from dev_server.recall.matrix import VectorCache
from dev_server.recall.service import SemanticIndex
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.message_vectors import VectorIndex
from dev_server.storage.native_vectors import NativeVectors, supported, table_of
from dev_server.storage.remote import RemoteLibSQLStore
from tests.sqld import Sqld

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

AGENT = "chat-agent"
CORPUS = {  # (resource, thread) -> texts, user and assistant in turn
    ("alice", "trip"): ["I'm planning a trip to Kyoto with Marco in April.", "Kyoto in April has cherry blossoms.",
                        "Our budget is about 2000 euros, flights included.", "That covers a mid-range hotel.",
                        "I'm allergic to shellfish, keep that in mind.", "I will avoid seafood places."],
    ("alice", "work"): ["The billing migration has to be finished by Friday.", "List the tables billing writes.",
                        "Priya asked me to present the migration plan.", "Start with the dual-write period.",
                        "My name is Ada Lovelace and I live in London.", "Nice to meet you, Ada."],
    ("alice", "hobby"): ["I practise the cello for 30 minutes before work.", "Thirty minutes a day is plenty.",
                         "I run 20 kilometres a week for the half marathon.", "Keep one long run a week."],
    ("bob", "mine"): ["My name is Bob Stone and I live in Oslo.", "Hello Bob.",
                      "My budget for the trip to Lisbon is 900 euros.", "Lisbon is affordable in spring.",
                      "I'm allergic to peanuts.", "Noted: no peanuts."],
}
QUERIES = ["What is my name?", "Where do I live?", "How much can I spend on the trip?", "What am I allergic to?",
           "When is the migration deadline?", "How long do I practise the cello?", "Which city am I visiting?"]


@pytest.fixture(scope="module")
def sqld(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sqld]:
    with Sqld(tmp_path_factory.mktemp("recall-sqld")) as server:
        yield server


async def filled(db: LibSQLStore | RemoteLibSQLStore, other_agent_thread: bool = True) -> ConversationStore:
    store, n = ConversationStore(db), 0
    for (resource, thread), texts in CORPUS.items():
        await store.ensure_thread(thread, resource, agent_id=AGENT)
        await store.append_messages(thread, [
            Message(f"{thread}-{i}", thread, resource, "user" if i % 2 == 0 else "assistant",
                    {"format": 2, "parts": [{"type": "text", "text": t}], "content": t},
                    f"2026-01-01T00:{(n := n + 1):02d}:00.000Z") for i, t in enumerate(texts)])
    if other_agent_thread:  # another agent's thread in alice's resource: never embedded, never found
        await store.ensure_thread("other-agent", "alice", agent_id="title-agent")
        await store.append_messages("other-agent", [Message(
            "other-agent-0", "other-agent", "alice", "user", {"format": 2, "parts": [
                {"type": "text", "text": "My name is Ada Lovelace."}], "content": "My name is Ada Lovelace."},
            "2026-01-01T01:00:00.000Z")])
    return store


async def searches(index: SemanticIndex) -> list[list[tuple[str, str, float]]]:
    """Every query in every scope: (message id, resource, score) per hit, best first."""
    results = []
    for query in QUERIES:
        for resource, thread in (("alice", None), ("alice", "work"), ("alice", "trip"), ("bob", None)):
            for k in (1, 4, 10):
                for exclude in ((), ("work-4", "trip-2")):
                    hits = await index.search(query, resource_id=resource, thread_id=thread, top_k=k,
                                              exclude_ids=exclude)
                    results.append([(h.message.id, h.message.resource_id, h.score) for h in hits])
    return results


async def recalled_with_range(db: LibSQLStore | RemoteLibSQLStore, index: SemanticIndex) -> list[str]:
    """What the recall processor adds to a turn in thread ``hobby`` asking for a name:
    resource scope, top 2, one message either side of each hit."""
    store = ConversationStore(db)
    memory = Memory(MemoryOptions(last_messages=2, semantic_recall={"topK": 2, "messageRange": 1,
                                                                     "scope": "resource"}),
                    store, agent_id=AGENT, agent_resource="alice", semantic_index=index)
    step = StepContext(AGENT, "run", "", Thread("hobby", "alice"), "alice")
    step.window = [Message("ask", "hobby", "alice", "user", {"format": 2, "parts": [
        {"type": "text", "text": "What is my name?"}], "content": "What is my name?"}, "2026-01-02T00:00:00.000Z")]
    step.begin_step(0)
    turns = [processor.start_turn(step) for processor in memory.processors]
    for turn in turns:
        await turn.before_step(step)
    recalled = next(t for t in turns if t.name == "semantic-recall").recalled
    return [m.id for m in recalled.messages] + [recalled.system or ""]


async def run_searches(db: LibSQLStore | RemoteLibSQLStore) -> tuple[list, list[str], dict[str, Any]]:
    await db.open()
    try:
        await filled(db)
        index = SemanticIndex(db, local_embedder(), agents=frozenset({AGENT}))
        assert await index.ready()
        await index.indexer.settled()
        found, recalled, health = await searches(index), await recalled_with_range(db, index), await index.health()
        await index.stop()
        return found, recalled, health
    finally:
        await db.close()


async def test_sqld_searches_in_its_index_with_the_embedded_scans_results_and_scopes(tmp_path: Path,
                                                                                     sqld: Sqld) -> None:
    embedded = await run_searches(LibSQLStore(f"file:{tmp_path / 'recall.db'}"))
    served = await run_searches(RemoteLibSQLStore(sqld.url))
    assert embedded[2]["index"]["searchedIn"] == "process" and "serverBacklog" not in embedded[2]["index"]
    assert served[2]["index"]["searchedIn"] == "server" and served[2]["index"]["serverBacklog"] == 0
    assert sqld.rows(f"SELECT count(*) FROM {table_of(384)}") == sqld.rows(
        "SELECT count(*) FROM message_vectors WHERE vector IS NOT NULL")
    for ours, theirs in zip(embedded[0], served[0], strict=True):
        assert [hit[:2] for hit in theirs] == [hit[:2] for hit in ours]
        assert np.allclose([h[2] for h in theirs], [h[2] for h in ours], atol=1e-4)
    queries = iter(embedded[0])
    for _query in QUERIES:  # scopes: the resource's, the thread's, never the other agent's thread
        for resource, thread in (("alice", None), ("alice", "work"), ("alice", "trip"), ("bob", None)):
            for k in (1, 4, 10):
                for exclude in ((), ("work-4", "trip-2")):
                    hits = next(queries)
                    assert len(hits) == min(k, sum(len(t) for (r, th), t in CORPUS.items() if r == resource
                                                   and thread in (None, th)) - len(
                        [e for e in exclude if resource == "alice" and (thread is None or e.startswith(thread))]))
                    assert {r for _, r, _ in hits} <= {resource}
                    assert not set(exclude) & {m for m, _, _ in hits}
                    assert thread is None or all(m.startswith(thread + "-") for m, _, _ in hits)
                    assert "other-agent-0" not in {m for m, _, _ in hits}
    assert embedded[1] == served[1]  # the recall processor: the same hits and message ranges
    assert len(embedded[1]) > 1 and "<remembered_from_other_conversation>" in embedded[1][-1]
    assert "Bob" not in embedded[1][-1] and "Oslo" not in embedded[1][-1]


async def test_the_index_follows_deletes_and_a_second_replica_adds_nothing(sqld: Sqld) -> None:
    db = RemoteLibSQLStore(sqld.url)
    await db.open()
    try:
        store = await filled(db, other_agent_thread=False)
        index = SemanticIndex(db, local_embedder(), agents=frozenset({AGENT}))
        assert await index.ready()
        await index.indexer.settled()
        replica = SemanticIndex(db, local_embedder(), agents=frozenset({AGENT}))  # another process's start
        assert await replica.ready()
        assert replica.native is not None and replica.native_backlog == 0
        count = f"SELECT count(*) FROM {table_of(384)}"
        assert sqld.rows(count) == sqld.rows("SELECT count(*) FROM message_vectors WHERE vector IS NOT NULL")
        before = sqld.rows(count)[0][0]
        assert "work-4" in [h.message.id for h in await replica.search("What is my name?", resource_id="alice")]
        await store.delete_thread("work")
        assert sqld.rows(count)[0][0] == before - len(CORPUS[("alice", "work")])
        hits = await replica.search("What is my name?", resource_id="alice", top_k=10)
        assert hits and not {h.message.thread_id for h in hits} & {"work"}
        await replica.stop()
        await index.stop()
        sqld.rows("DROP TABLE message_vectors")  # its triggers go with it, and its ids start again
        rebuilt = SemanticIndex(db, local_embedder(), agents=frozenset({AGENT}))
        assert await rebuilt.ready()
        await rebuilt.indexer.settled()
        assert sqld.rows(f"SELECT count(*) FROM {table_of(384)} n JOIN message_vectors v ON v.id = n.id"
                         " AND v.vector = n.embedding") == sqld.rows(count) == sqld.rows(
            "SELECT count(*) FROM message_vectors WHERE vector IS NOT NULL")
        hits = await rebuilt.search("Which city am I visiting?", resource_id="bob", top_k=2)
        assert [h.message.resource_id for h in hits] == ["bob", "bob"]
        await rebuilt.stop()
    finally:
        await db.close()


async def test_the_embedded_file_has_no_server_index(tmp_path: Path) -> None:
    db = LibSQLStore(f"file:{tmp_path / 'plain.db'}")
    await db.open()
    try:
        assert not await supported(db)
        index = SemanticIndex(db, local_embedder(), agents=frozenset({AGENT}))
        assert await index.ready() and index.native is None
        names = {r[0] for r in await db.fetch_all("SELECT name FROM sqlite_master")}
        assert not {n for n in names if n.startswith("message_vectors_f32")}
        await index.stop()
    finally:
        await db.close()


def unit(rng: np.random.Generator, rows: int, around: np.ndarray | None = None, noise: float = 1.0) -> np.ndarray:
    base = np.zeros((rows, 384)) if around is None else np.repeat(around[None, :], rows, axis=0)
    out = base + rng.normal(0, noise, (rows, 384))
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype("<f4")


async def test_small_scopes_are_scanned_exactly_large_ones_use_the_index_and_nothing_leaks(sqld: Sqld) -> None:
    """A scope of at most ``exact_rows`` pieces is scanned in the server: the in-process
    exact scan's answers. Past it (``exact_rows=0`` here) the index answers; 600 vectors of
    one resource crowd the query's neighbourhood, so its nearest 200 hold none of a small
    resource's 5 nor of a 3-message thread, and those scopes are scanned exactly after all."""
    db = RemoteLibSQLStore(sqld.url)
    await db.open()
    try:
        store = ConversationStore(db)
        rng = np.random.default_rng(31)
        query = unit(rng, 1)[0]
        rows: list[tuple[int, int, str, bytes]] = []
        for t in range(6):
            await store.ensure_thread(f"crowd-{t}", "crowd", agent_id=AGENT)
        await store.ensure_thread("small", "few", agent_id=AGENT)
        await store.ensure_thread("tiny", "crowd", agent_id=AGENT)
        crowd = unit(rng, 600, query, 0.05)  # all near the query
        for i, vector in enumerate(crowd):
            rows.append((10_000 + i, 0, f"crowd-{i % 6}", vector.tobytes()))
        for i, vector in enumerate(unit(rng, 5, query, 0.6)):
            rows.append((20_000 + i, 0, "small", vector.tobytes()))
        for i, vector in enumerate(unit(rng, 3, query, 0.6)):
            rows.append((30_000 + i, 0, "tiny", vector.tobytes()))
        native, indexed = NativeVectors(db, agents=[AGENT]), NativeVectors(db, agents=[AGENT], exact_rows=0)
        await native.ensure(384)
        await db.run_write(lambda conn: conn.executemany(
            "INSERT INTO message_vectors (message_seq, chunk, thread_id, model, text_hash, vector)"
            " VALUES (?, ?, ?, 'synthetic', 'h', ?)", rows))
        assert await native.unindexed(384) == 0  # the trigger indexed each
        exact = VectorCache(VectorIndex(db, agents=frozenset({AGENT})))
        scopes = (("few", None, 4, set()), ("few", None, 10, {20_001}), ("crowd", "tiny", 4, set()),
                  ("crowd", "tiny", 4, {30_000}), ("crowd", "crowd-2", 10, {10_002}), ("crowd", None, 10, {10_000}))
        for searcher, (resource, thread, k, exclude) in [(native, s) for s in scopes] + [(indexed, s)
                                                                                          for s in scopes[:4]]:
            got = await searcher.nearest("synthetic", query, k, resource_id=resource, thread_id=thread,
                                         exclude=exclude)
            want = await exact.search("synthetic", 384, resource, query, k, thread_id=thread, exclude=exclude)
            assert [seq for seq, _ in got] == [seq for seq, _ in want], (resource, thread)  # scanned: exact
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5)
        for thread, exclude in (("crowd-2", {10_002}), (None, {10_000, 10_001})):  # the index's answers
            got = await indexed.nearest("synthetic", query, 10, resource_id="crowd", thread_id=thread,
                                        exclude=exclude)
            want = await exact.search("synthetic", 384, "crowd", query, 10, thread_id=thread, exclude=exclude)
            assert len(got) == 10 and not {seq for seq, _ in got} & exclude
            assert all(10_000 <= seq < 10_600 and (thread is None or (seq - 10_000) % 6 == 2) for seq, _ in got)
            assert len({seq for seq, _ in got} & {seq for seq, _ in want}) >= 6  # approximate, on 600 equidistant
        assert {seq for seq, _ in await native.nearest("synthetic", query, 10, resource_id="few")} == \
            set(range(20_000, 20_005))
        assert await native.nearest("another-model", query, 10, resource_id="crowd") == []
    finally:
        await db.close()
