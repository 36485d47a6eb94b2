"""Observational Memory's records on real SQLite files, and which messages are unobserved
(docs/observational-memory.md#record)."""

from __future__ import annotations

import asyncio

import pytest

from dev_server.kernel.messages import Message, Thread
from dev_server.om.engine.record_store import om_record_store
from dev_server.om.engine.window import drop_observed, has_incomplete_tool_calls, unobserved
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.om_records import _SELECT_ACTIVE, lookup_key, thread_om

pytestmark = pytest.mark.anyio


@pytest.fixture
async def db(libsql: LibSQLStore) -> LibSQLStore:
    return libsql


async def test_generations_history_and_the_active_record(db: LibSQLStore) -> None:
    records = om_record_store(db)
    first = await records.initialize(scope="thread", thread_id="t1", resource_id="r1", config={"scope": "thread"},
                                     timezone="UTC")
    again = await records.initialize(scope="thread", thread_id="t1", resource_id="r1", config={}, timezone="UTC")
    assert again.id == first.id and (first.generation_count, first.origin_type) == (0, "initial")
    assert first.lookup_key == "thread:t1" and first.config == {"scope": "thread"}
    observed = await records.update_active_observations(first.id, observations="* 🔴 (10:00) a", token_count=7,
                                                        last_observed_at="2026-01-01T10:00:00.000Z",
                                                        observed_ids=["m1", "m2"])
    observed = await records.update_active_observations(first.id, observations="* 🔴 (10:00) a\n* b", token_count=9,
                                                        last_observed_at="2026-01-01T11:00:00.000Z",
                                                        observed_ids=["m2", "m3"])
    # the running total grows by the whole log's size per sync observation, as Mastra's does
    assert observed.observed_message_ids == ["m1", "m2", "m3"] and observed.total_tokens_observed == 7 + 9
    waiting = {"id": "ombuf-1", "cycleId": "c1", "observations": "* c", "tokenCount": 2, "messageIds": ["m4"],
               "messageTokens": 30, "lastObservedAt": "2026-01-01T12:00:00.001Z", "createdAt": "x"}
    observed = await records.add_buffered_chunk("thread:t1", waiting)
    assert observed is not None and observed.last_buffered_at_tokens == 30
    reflected = await records.create_reflection_generation(observed, observations="* a and b", token_count=4)
    # Mastra's "buffering state reset": no chunks, no buffer cursor or boundary in the new generation
    assert reflected.buffered_observation_chunks is None and reflected.last_buffered_at_time is None
    assert reflected.last_buffered_at_tokens == 0
    assert (reflected.generation_count, reflected.origin_type,
            reflected.observation_token_count) == (1, "reflection", 4)
    assert reflected.last_observed_at == "2026-01-01T11:00:00.000Z" and reflected.observed_message_ids is None
    assert reflected.total_tokens_observed == 16 and reflected.config == {"scope": "thread"}
    assert (await records.active("thread:t1")).id == reflected.id
    assert [r.generation_count for r in await records.history("thread:t1")] == [1, 0]
    assert [r.generation_count for r in await records.history("thread:t1", limit=1, offset=1)] == [0]
    api = reflected.to_api()
    assert api["generationCount"] == 1 and api["isObserving"] is False and api["threadId"] == "t1"
    resource = await records.initialize(scope="resource", thread_id="t1", resource_id="r1", config={}, timezone=None)
    assert resource.lookup_key == lookup_key(None, "r1") == "resource:r1" and resource.thread_id is None
    assert await records.clear("thread:t1") == 2 and await records.active("thread:t1") is None


async def test_a_flag_is_held_by_one_claimant_across_connections_and_a_stale_one_is_taken_over(
        db: LibSQLStore) -> None:
    other = type(db)(db.url)  # a second process's connections to the same file (or server)
    await other.open()
    try:
        mine, theirs = om_record_store(db), om_record_store(other)
        record = await mine.initialize(scope="thread", thread_id="t", resource_id="r", config={}, timezone=None)
        claims = await asyncio.gather(mine.claim_flag(record.id, "is_observing", stale_after_s=60),
                                      theirs.claim_flag(record.id, "is_observing", stale_after_s=60))
        assert sorted(claims) == [False, True]
        assert (await theirs.active("thread:t")).to_api()["isObserving"] is True
        await asyncio.sleep(0.01)
        assert await theirs.claim_flag(record.id, "is_observing", stale_after_s=0.001)  # the holder died
        await mine.release_flag(record.id, "is_observing")
        assert await mine.claim_flag(record.id, "is_reflecting", stale_after_s=60)
        assert await theirs.claim_flag(record.id, "is_observing", stale_after_s=60)
        with pytest.raises(ValueError):
            await mine.claim_flag(record.id, "is_observing; DROP TABLE threads", stale_after_s=1)  # type: ignore
    finally:
        await other.close()


async def test_thread_om_metadata_is_merged_not_replaced(db: LibSQLStore) -> None:
    conversations = ConversationStore(db)
    await conversations.save_thread(Thread("t", "r", metadata={"topic": "trips", "mastra": {"other": 1}}))
    records = om_record_store(db)
    assert await records.patch_thread_om("t", {"currentTask": "plan", "suggestedResponse": "ask"}) == {
        "currentTask": "plan", "suggestedResponse": "ask"}
    merged = await records.patch_thread_om("t", {"suggestedResponse": None, "lastObservedAt": "x"})
    assert merged == {"currentTask": "plan", "lastObservedAt": "x"}
    metadata = (await conversations.get_thread("t")).metadata
    assert metadata["topic"] == "trips" and metadata["mastra"]["other"] == 1 and thread_om(metadata) == merged
    assert await records.patch_thread_om("missing", {"currentTask": "x"}) is None


def message(mid: str, at: str, parts: list[dict], role: str = "user") -> Message:
    return Message(mid, "t", "r", role, {"format": 2, "parts": parts, "content": ""}, at)


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def test_unobserved_follows_the_cursor_the_ids_and_the_markers() -> None:
    from dev_server.storage.om_records import OMRecord

    record = OMRecord("id", "thread:t", "thread", "r", "t", "initial", {}, "", "",
                      last_observed_at="2026-01-01T10:00:00.000Z", observed_message_ids=["tie-observed"])
    messages = [
        message("old", "2026-01-01T09:00:00.000Z", [text("before the cursor")]),
        message("tie-observed", "2026-01-01T10:00:00.000Z", [text("observed at the cursor")]),
        message("system", "2026-01-01T10:30:00.000Z", [text("rules")], role="system"),
        message("marked", "2026-01-01T09:30:00.000Z", [
            {"type": "data-om-observation-start", "data": {}}, {"type": "data-om-observation-end", "data": {}},
            {"type": "step-start"}, text("after the marker")], role="assistant"),
        message("in-progress", "2026-01-01T09:40:00.000Z", [
            text("early"), {"type": "data-om-observation-start", "data": {}}], role="assistant"),
        message("failed", "2026-01-01T09:50:00.000Z", [
            {"type": "data-om-observation-start", "data": {}}, {"type": "data-om-observation-failed", "data": {}},
            text("old and failed")], role="assistant"),
        message("new", "2026-01-01T11:00:00.000Z", [text("after the cursor")]),
    ]
    found = unobserved(messages, record)
    assert [m.id for m in found] == ["marked", "in-progress", "new"]
    assert found[0].content["parts"] == [{"type": "step-start"}, text("after the marker")]
    assert messages[3].content["parts"][0]["type"] == "data-om-observation-start"  # the stored copy is untouched
    assert [m.id for m in unobserved(messages, None)] == [m.id for m in messages if m.role != "system"]


def test_observed_messages_leave_the_window_down_to_the_floor_and_the_input_stays() -> None:
    messages = [message(f"m{i}", f"2026-01-01T10:0{i}:00.000Z", [text("x")]) for i in range(5)]
    count = {m.id: 10 for m in messages}
    ids = {m.id for m in messages}
    kept = drop_observed(messages, ids, floor=0, preserve={"m4"}, count=lambda m: count[m.id], total=50)
    assert [m.id for m in kept] == ["m4"]
    kept = drop_observed(messages, ids, floor=25, preserve={"m4"}, count=lambda m: count[m.id], total=50)
    assert [m.id for m in kept] == ["m2", "m3", "m4"]
    waiting = message("a", "2026-01-01T10:09:00.000Z", [
        {"type": "tool-invocation", "toolInvocation": {"state": "call", "toolCallId": "c", "toolName": "x"}}],
        role="assistant")
    assert has_incomplete_tool_calls([*messages, waiting]) and not has_incomplete_tool_calls(messages)


async def test_a_reflection_keeps_the_lines_an_observation_appended_while_it_ran(db: LibSQLStore) -> None:
    """A backlog's catch-up observes beside a turn: lines appended while the reflector ran are
    behind the cursor already, so the new generation must hold them after the reflection."""
    records = om_record_store(db)
    first = await records.initialize(scope="thread", thread_id="t1", resource_id="r1", config={}, timezone="UTC")
    read = await records.update_active_observations(first.id, observations="* a\n* b", token_count=6,
                                                    last_observed_at="2026-01-01T10:00:00.000Z", observed_ids=["m1"])
    # the reflector is given ``read``; meanwhile another cycle appends a line and moves the cursor
    await records.update_active_observations(first.id, observations="* a\n* b\n* c", token_count=9,
                                             last_observed_at="2026-01-01T11:00:00.000Z", observed_ids=["m2"])
    reflected = await records.create_reflection_generation(read, observations="* a and b", token_count=4)
    assert reflected is not None and reflected.active_observations == "* a and b\n\n* c"
    assert reflected.observation_token_count > 4 and reflected.last_observed_at == "2026-01-01T11:00:00.000Z"


async def test_a_reflection_stores_nothing_once_a_newer_generation_exists(db: LibSQLStore) -> None:
    """Two cycles making the next generation (a buffered reflection activated by a turn while
    the catch-up reflected synchronously) once raised UNIQUE(lookup_key, generation_count) in
    the background job; the later one now yields to the generation that exists."""
    records = om_record_store(db)
    first = await records.initialize(scope="thread", thread_id="t1", resource_id="r1", config={}, timezone="UTC")
    read = await records.update_active_observations(first.id, observations="* a", token_count=3,
                                                    last_observed_at="2026-01-01T10:00:00.000Z", observed_ids=["m1"])
    winner = await records.create_reflection_generation(read, observations="* first", token_count=2)
    assert winner is not None and winner.generation_count == 1
    assert await records.create_reflection_generation(read, observations="* second", token_count=2) is None
    rewritten = await records.update_active_observations(winner.id, observations="* other", token_count=2,
                                                         last_observed_at=None, observed_ids=[])
    stale = await records.create_reflection_generation(winner, observations="* x", token_count=1)
    assert stale is None  # the log was rewritten, not appended to: nothing to keep safely
    assert (await records.active("thread:t1")).id == rewritten.id


async def test_a_record_read_again_shares_what_did_not_change_with_the_last_read(db: LibSQLStore) -> None:
    """Every turn reads the active record; its log and buffered chunks (tens of kilobytes) are
    decoded and hashed again only when they changed since the last read of the key."""
    records = om_record_store(db)
    first = await records.initialize(scope="thread", thread_id="t1", resource_id="r1", config={}, timezone="UTC")
    log = "\n".join(f"* 🔴 (10:{i:02d}) fact number {i} about the trip" for i in range(60))
    await records.update_active_observations(first.id, observations=log, token_count=900,
                                             last_observed_at="2026-01-01T10:00:00.000Z", observed_ids=["m1"])
    chunk = {"id": "ombuf-1", "cycleId": "c1", "observations": "* c " * 200, "tokenCount": 2,
             "messageIds": [f"m{i}" for i in range(2, 60)], "messageTokens": 30,
             "lastObservedAt": "2026-01-01T12:00:00.001Z", "createdAt": "x"}
    await records.add_buffered_chunk("thread:t1", chunk)
    one, two = await records.active("thread:t1"), await records.active("thread:t1")
    assert one is not two and one.active_observations is two.active_observations == log
    assert one.buffered_observation_chunks is two.buffered_observation_chunks
    assert two.buffered_observation_chunks[0]["messageIds"][0] == "m2"
    await records.add_buffered_chunk("thread:t1", {**chunk, "id": "ombuf-2", "cycleId": "c2", "messageIds": ["m60"]})
    three = await records.active("thread:t1")
    assert [c["id"] for c in three.buffered_observation_chunks] == ["ombuf-1", "ombuf-2"]
    assert three.active_observations is log or three.active_observations == log


async def test_a_record_read_again_asks_for_its_large_values_only_when_another_writer_changed_them(
        db: LibSQLStore) -> None:
    """The read leaves out the log, the chunks and the buffered reflection while the row's
    ``content_rev`` is the one last read (migration 0016); any writer's UPDATE of them moves
    it, a plain SQL one that knows nothing of it too (another process, another replica)."""
    records = om_record_store(db)
    first = await records.initialize(scope="thread", thread_id="t1", resource_id="r1", config={}, timezone="UTC")
    await records.update_active_observations(first.id, observations="* first log", token_count=3,
                                             last_observed_at=None, observed_ids=[])
    one = await records.active("thread:t1")
    left_out = await db.fetch_one(_SELECT_ACTIVE, ("thread:t1", one.id, records._last_read["thread:t1"].content_rev))
    assert left_out["active_observations"] is None and left_out["pending_message_tokens"] == 0
    two = await records.active("thread:t1")
    assert two.active_observations is one.active_observations == "* first log"

    await db.run_write(lambda conn: conn.execute(
        "UPDATE mastra_observational_memory SET active_observations = '* written elsewhere',"
        " pending_message_tokens = 7 WHERE id = ?", (first.id,)))
    three = await records.active("thread:t1")
    assert three.active_observations == "* written elsewhere" and three.pending_message_tokens == 7
    await db.run_write(lambda conn: conn.execute(
        "UPDATE mastra_observational_memory SET buffered_reflection = 'kept aside' WHERE id = ?", (first.id,)))
    four = await records.active("thread:t1")
    assert four.buffered_reflection == "kept aside"
    assert four.active_observations is three.active_observations  # unchanged text: still shared

    await db.run_write(lambda conn: conn.execute(
        "UPDATE mastra_observational_memory SET pending_message_tokens = 9 WHERE id = ?", (first.id,)))
    five = await records.active("thread:t1")  # a small column alone: the large ones stay left out
    assert five.pending_message_tokens == 9 and five.active_observations is four.active_observations
    assert five.buffered_reflection is four.buffered_reflection
