"""Async buffering's rules and storage on real SQLite files (docs/observational-memory.md#buffering, #reflection):
the interval ramp, the safe prefix, the chunk choice, the idle and provider-change
triggers, and the record operations that must hold across processes (one activation per
chunk, stale flags taken over, a buffered reflection swapped in once)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from dev_server.background import BackgroundWork
from dev_server.kernel.events import DataPart
from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.model import ResolvedModel
from dev_server.llm import LiteLLMClient
from dev_server.om.engine.activation import (
    Trigger,
    activate,
    activation_ratio,
    chunks_to_activate,
    interval_crossed,
    plan,
)
from dev_server.om.engine.buffering import Buffering, PartSink, QueuedCandidates, previously_observed, safe_prefix
from dev_server.om.engine.cycle_context import CycleContext
from dev_server.om.engine.flags import flag_live, settled
from dev_server.om.engine.idle import StepModel, auto_ttl_ms, last_activity_ms, last_step_model, provider_changed
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om.engine.record_store import om_record_store
from dev_server.om.options.config import observational_memory_options
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.om_records import OMRecord

FACT = "My name is Ada and I keep bees on the roof of my flat in Leeds."


def message(mid: str, role: str, at: str, parts: list[dict[str, Any]] | None = None, text: str = FACT) -> Message:
    parts = parts if parts is not None else [{"type": "text", "text": text}]
    return Message(mid, "t", "r", role, {"format": 2, "parts": parts, "content": text}, at)


def chunk(n: int, tokens: int, observations: str = "- 🔴 fact") -> dict[str, Any]:
    return {"id": f"ombuf-{n}", "cycleId": f"buffer-obs-{n}", "observations": f"{observations} {n}",
            "tokenCount": 10, "messageIds": [f"m{n}"], "messageTokens": tokens,
            "lastObservedAt": f"2026-01-01T10:{n:02d}:00.001Z", "createdAt": "2026-01-01T11:00:00.000Z"}


def model(provider: str, model_id: str) -> ResolvedModel:
    return ResolvedModel(f"{provider}/{model_id}", provider, model_id, f"{provider}/{model_id}", is_local=False)


# -- pure rules -----------------------------------------------------------------------

def test_the_interval_halves_near_the_threshold() -> None:
    # threshold 30000, bufferTokens 6000: every 6000 tokens, every 3000 from 23400 on
    assert not interval_crossed(5999, 0, 30000, 6000) and interval_crossed(6000, 0, 30000, 6000)
    assert not interval_crossed(11000, 6000, 30000, 6000) and interval_crossed(12000, 6000, 30000, 6000)
    assert not interval_crossed(23000, 18000, 30000, 6000)
    assert interval_crossed(24000, 18000, 30000, 6000)  # past the ramp: 3000-token steps
    assert not interval_crossed(26000, 24000, 30000, 6000) and interval_crossed(27000, 24000, 30000, 6000)


def test_chunk_choice_follows_the_projection_rules() -> None:
    # threshold 1000, ratio 0.8: floor 200, min remaining 200
    assert activation_ratio(0.8, 1000) == 0.8 and activation_ratio(200, 1000) == 0.8
    chunks = [chunk(1, 300), chunk(2, 300), chunk(3, 300)]
    # current 1000: target 800 -> "over" is 900 (3 chunks) but leaves 100 < 200; "under" 600 leaves 400
    assert chunks_to_activate(chunks, 1000, 1000, 0.8, force=False) == 2
    # current 1200 (force): over = 900 leaves 300 >= 200 -> take it
    assert chunks_to_activate(chunks, 1200, 1000, 0.8, force=True) == 3
    # (b): over close enough to the target
    assert chunks_to_activate([chunk(1, 500), chunk(2, 400)], 1100, 1000, 0.8, force=False) == 2
    # (d): only over exists and nothing leaves enough: still over
    assert chunks_to_activate([chunk(1, 950)], 1000, 1000, 0.8, force=False) == 1
    # (e): nothing reaches anything: one chunk
    assert chunks_to_activate([chunk(1, 0)], 0, 1000, 1.0, force=False) == 1
    assert chunks_to_activate([], 1000, 1000, 0.8, force=False) == 0


def test_block_after_forces_the_larger_activation() -> None:
    # a large window (floor 40000 > 20 x min remaining) is where force decides: over leaves only 1500
    options = observational_memory_options({"observation": {"messageTokens": 200_000}})  # blockAfter 240000
    record = OMRecord("r", "thread:t", "thread", "r", "t", "initial", {}, "", "",
                      buffered_observation_chunks=[chunk(1, 100_000), chunk(2, 148_500)])
    record.pending_message_tokens = 250_000  # past blockAfter: maximum activation
    assert plan(options, record) == 2
    assert chunks_to_activate(record.buffered_observation_chunks, 250_000, 200_000, 0.8, force=False) == 1
    record.pending_message_tokens = 230_000  # below blockAfter: the smaller choice keeps more context
    assert plan(options, record) == 1


def test_the_safe_prefix_never_splits_a_tool_call() -> None:
    plain = [message("a", "user", "2026-01-01T10:00:00.000Z"), message("b", "assistant", "2026-01-01T10:00:01.000Z")]
    assert [m.id for m in safe_prefix(plain)] == ["a", "b"]
    call = {"type": "tool-invocation", "toolInvocation": {"state": "call", "toolCallId": "c1", "toolName": "x",
                                                          "args": {}}}
    waiting = [*plain, message("c", "assistant", "2026-01-01T10:00:02.000Z", [call])]
    assert [m.id for m in safe_prefix(waiting)] == ["a", "b"]  # the waiting message stays out
    same_time = [*plain, message("c", "assistant", "2026-01-01T10:00:01.000Z", [call])]
    assert safe_prefix(same_time) == []  # the cut is not clean: defer
    within_ms = [*plain, message("c", "assistant", "2026-01-01T10:00:01.001Z", [call])]
    assert safe_prefix(within_ms) == []
    answered = {"type": "tool-invocation", "toolInvocation": {"state": "result", "toolCallId": "c1",
                                                              "toolName": "x", "args": {}, "result": 1}}
    split = [message("a", "assistant", "2026-01-01T10:00:00.000Z", [answered]),
             message("c", "assistant", "2026-01-01T10:00:05.000Z", [call])]
    assert safe_prefix(split) == []  # the call id would sit on both sides of the cut
    assert safe_prefix([message("c", "assistant", "2026-01-01T10:00:05.000Z", [call])]) == []


def test_idle_ttl_table_and_provider_change() -> None:
    assert auto_ttl_ms("anthropic", "claude-sonnet-4-5") == 300_000 and auto_ttl_ms("xai", "grok-4") == 300_000
    assert (auto_ttl_ms("deepseek", "deepseek-chat") == 3_600_000
            and auto_ttl_ms("google", "gemini-2.5-pro") == 86_400_000)
    assert auto_ttl_ms("groq", "llama") == 7_200_000 and auto_ttl_ms("who-knows", "m") == 300_000
    assert auto_ttl_ms("openai", "gpt-4o") == 300_000 and auto_ttl_ms("openai", "gpt-5.1") == 300_000
    assert auto_ttl_ms("openai", "o3") == 3_600_000 and auto_ttl_ms("openai.responses", "gpt-4.1-mini") == 300_000
    assert auto_ttl_ms("openai", "gpt-4o", "24h") == 3_600_000 and auto_ttl_ms("openai", "o3", "in_memory") == 300_000
    current = model("openai", "gpt-4o-mini")
    assert not provider_changed(current, StepModel("openai.responses", "gpt-4o-mini"))  # sub-namespace ignored
    assert provider_changed(current, StepModel("anthropic", "claude-sonnet-4-5"))
    assert provider_changed(current, StepModel("openai", "gpt-4o"))
    assert not provider_changed(current, StepModel(None, "gpt-4o-mini"))  # a bare id compares ids only
    assert not provider_changed(current, None)
    reply = message("r", "assistant", "2026-01-01T10:00:00.000Z",
                    [{"type": "step-start", "model": "anthropic/claude-sonnet-4-5"}, {"type": "text", "text": "hi"}])
    assert last_step_model(reply) == StepModel("anthropic", "claude-sonnet-4-5")
    reply = message("r", "assistant", "2026-01-01T10:00:00.000Z")
    reply.content["metadata"] = {"provider": "openai", "modelId": "gpt-4o"}
    assert last_step_model(reply) == StepModel("openai", "gpt-4o")
    parts = [{"type": "text", "text": "x", "createdAt": 1_000}, {"type": "data-om-status", "createdAt": 9_000}]
    assert last_activity_ms(message("r", "assistant", "2026-01-01T10:00:00.000Z", parts)) == 1_000
    assert last_activity_ms(reply) == 1767261600000


# -- storage across processes -----------------------------------------------------------


async def _record_with_chunks(db: LibSQLStore, chunks: list[dict[str, Any]]):
    await ConversationStore(db).save_thread(Thread("t", "r"))
    store = om_record_store(db)
    record = await store.initialize(scope="thread", thread_id="t", resource_id="r", config={}, timezone="UTC")
    for item in chunks:
        record = await store.add_buffered_chunk("thread:t", item)
    return store, record


@pytest.mark.anyio
async def test_two_processes_never_activate_the_same_chunk(libsql: LibSQLStore, tmp_path: Path) -> None:
    options = observational_memory_options({"observation": {"messageTokens": 1000, "bufferTokens": 300}})
    store, record = await _record_with_chunks(libsql, [chunk(1, 300), chunk(2, 300), chunk(3, 300)])
    record.pending_message_tokens = 1000
    second_process = LibSQLStore(f"file:{tmp_path / 'store.db'}")  # its own connections to the same file
    await second_process.open()
    other = om_record_store(second_process)  # the studio (or a second worker) with the same stale record
    try:
        (first, first_parts), (second, second_parts) = await asyncio.gather(
            activate(options, store, record, Trigger("threshold"), "t"),
            activate(options, other, record, Trigger("threshold"), "t"))
    finally:
        await second_process.close()
    assert [first is None, second is None].count(True) == 1
    done, parts = (first, first_parts) if first else (second, second_parts)
    assert [p.data["cycleId"] for p in parts] == ["buffer-obs-1", "buffer-obs-2"]
    assert all(p.name == "om-activation" and p.data["triggeredBy"] == "threshold" for p in parts)
    active = await store.active("thread:t")
    assert [c["id"] for c in active.buffered_observation_chunks] == ["ombuf-3"]
    assert active.total_tokens_observed == record.total_tokens_observed  # Mastra adds nothing on activation
    assert active.active_observations == "- 🔴 fact 1\n\n- 🔴 fact 2"
    assert active.last_observed_at == "2026-01-01T10:02:00.001Z" and done.message_ids == {"m1", "m2"}
    # the next activation appends after a message boundary
    again, _ = await activate(options, store, active, Trigger("ttl"), "t")
    assert (again is not None
            and "--- message boundary (2026-01-01T10:03:00.001Z) ---" in again.record.active_observations)


@pytest.mark.anyio
async def test_a_chunk_whose_messages_were_observed_meanwhile_is_dropped(libsql: LibSQLStore) -> None:
    store, record = await _record_with_chunks(libsql, [])
    await store.update_active_observations(record.id, observations="- x", token_count=3,
                                           last_observed_at="2026-01-01T10:05:00.000Z", observed_ids=["m1"])
    assert await store.add_buffered_chunk("thread:t", chunk(1, 100)) is None
    assert (await store.active("thread:t")).buffered_observation_chunks is None


@pytest.mark.anyio
async def test_a_stale_buffering_flag_is_taken_over_and_a_live_one_is_not(libsql: LibSQLStore) -> None:
    store, record = await _record_with_chunks(libsql, [])
    assert await store.claim_flag(record.id, "is_buffering_observation", stale_after_s=30)
    assert not await store.claim_flag(record.id, "is_buffering_observation", stale_after_s=30)
    # a killed process: its flag is an hour old and was never renewed
    await libsql.run_write(lambda conn: conn.execute(
        "UPDATE mastra_observational_memory SET is_buffering_observation = '2026-01-01T00:00:00.000Z'"))
    stale = await store.active("thread:t")
    assert not flag_live(stale.is_buffering_observation)
    assert (await settled(store, "thread:t", timeout_s=5)).id == record.id  # does not wait on a dead flag
    assert await store.claim_flag(record.id, "is_buffering_observation", stale_after_s=30)


@pytest.mark.anyio
async def test_a_buffered_reflection_replaces_its_lines_once(libsql: LibSQLStore) -> None:
    store, record = await _record_with_chunks(libsql, [chunk(1, 100)])
    log = "\n".join(f"- 🔴 line {i}" for i in range(10))
    await store.update_active_observations(record.id, observations=log, token_count=100, last_observed_at=None,
                                           observed_ids=[])
    await store.set_buffer_boundary(record.id, 250)
    await store.store_buffered_reflection(record.id, reflection="- 🔴 lines 0-5 condensed", tokens=8,
                                          input_tokens=60, line_count=6)
    swapped, again = await asyncio.gather(store.activate_buffered_reflection(record.id),
                                          om_record_store(libsql).activate_buffered_reflection(record.id))
    assert [swapped is None, again is None].count(True) == 1
    old, new = swapped or again
    assert new.generation_count == 1 and new.origin_type == "reflection"
    assert new.active_observations == "- 🔴 lines 0-5 condensed\n\n- 🔴 line 6\n- 🔴 line 7\n- 🔴 line 8\n- 🔴 line 9"
    assert old.buffered_reflection is None and old.reflected_observation_line_count is None
    # Mastra's "buffering state reset": the new generation starts with no chunks (the old
    # row keeps its own), no buffer cursor and no interval boundary
    assert new.buffered_observation_chunks is None and new.last_buffered_at_time is None
    assert new.last_buffered_at_tokens == 0 and [c["id"] for c in old.buffered_observation_chunks] == ["ombuf-1"]
    assert new.total_tokens_observed == old.total_tokens_observed == 100


async def with_background(db: LibSQLStore, messages: list[Message], buffer_tokens: int):
    """A thread holding ``messages``, its OM engine and record, and running background work."""
    conversations = ConversationStore(db)
    await conversations.save_thread(Thread("t", "r"))
    await conversations.append_messages("t", messages)
    engine = ObservationEngine(observational_memory_options(
        {"observation": {"messageTokens": 1000, "bufferTokens": buffer_tokens}}), om_record_store(db))
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={}, timezone="UTC")
    background = BackgroundWork()
    await background.start()
    llm = LiteLLMClient(force_local=True)
    return conversations, engine, record, background, llm, await llm.resolve("openai/gpt-4o-mini")


@pytest.mark.anyio
async def test_background_observer_stores_a_chunk_and_reports_late_parts_on_the_reply(libsql: LibSQLStore) -> None:
    messages = [message(f"m{i}", "user" if i % 2 == 0 else "assistant", f"2026-01-01T10:{i:02d}:00.000Z")
                for i in range(4)]
    conversations, engine, record, background, llm, model = await with_background(libsql, messages, 100)
    sink = PartSink(engine.records, "t")  # no live turn: parts go onto the newest reply
    ctx = CycleContext(llm, model, "t", None, sink.emit)
    buffering = Buffering(engine, background)
    gate = asyncio.Event()  # every worker busy: the observation stays queued until the gate opens
    for worker in range(background.workers):
        assert background.submit(f"hold:{worker}", gate.wait)
    assert await buffering.start_observation(ctx, record, messages, sink)
    assert flag_live((await engine.records.active("thread:t")).is_buffering_observation)  # claimed by the turn
    assert not await buffering.start_observation(ctx, record, messages, sink)  # one at a time per thread
    gate.set()
    await background.drain()
    active = await settled(engine.records, "thread:t", timeout_s=5)
    assert active.is_buffering_observation is None
    [stored] = active.buffered_observation_chunks
    assert stored["messageIds"] == ["m0", "m1", "m2", "m3"] and "Ada" in stored["observations"]
    assert (stored["lastObservedAt"] == "2026-01-01T10:03:00.001Z"
            and active.last_buffered_at_time == stored["lastObservedAt"])
    assert active.last_buffered_at_tokens == stored["messageTokens"] and active.active_observations == ""
    reply = await conversations.get_message("m3")
    types = [p["type"] for p in reply.content["parts"]]
    assert types == ["text", "data-om-buffering-start", "data-om-buffering-end"]
    assert reply.content["metadata"]["mastra"]["sealed"] is True


@pytest.mark.anyio
async def test_a_queued_observation_holds_its_messages_by_id_and_reads_them_when_it_runs(libsql: LibSQLStore) -> None:
    """Issue 25: threads that grow together queue their buffered observations together, and
    each waiting job held its turn's decoded messages (tens of megabytes at once in a soak).
    With the thread's store the job keeps ids, and observes what is stored when it runs: a
    message deleted while it waited is not observed."""
    messages = [message(f"m{i}", "user" if i % 2 == 0 else "assistant", f"2026-01-01T10:{i:02d}:00.000Z")
                for i in range(4)]
    conversations, engine, record, _, llm, model = await with_background(libsql, messages, 100)
    background = BackgroundWork(workers=1)
    await background.start()
    gate = asyncio.Event()

    async def occupy() -> None:
        await gate.wait()

    assert background.submit("other:busy", occupy)  # the one worker is busy: the observation waits
    sink = PartSink(engine.records, "t")
    ctx = CycleContext(llm, model, "t", None, sink.emit)
    buffering = Buffering(engine, background, conversations)
    assert await buffering.start_observation(ctx, record, messages, sink)
    assert QueuedCandidates.of("t", messages) == QueuedCandidates("t", ("m0", "m1", "m2", "m3"),
                                                                  "2026-01-01T10:00:00.000Z", messages[-1])
    await conversations.delete_messages(["m1"])
    gate.set()
    await background.drain()
    [stored] = (await settled(engine.records, "thread:t", timeout_s=5)).buffered_observation_chunks
    assert stored["messageIds"] == ["m0", "m2", "m3"]


@pytest.mark.anyio
async def test_a_failing_background_observer_reports_and_never_raises(libsql: LibSQLStore) -> None:
    messages = [message("m0", "user", "2026-01-01T10:00:00.000Z", text=f"{FACT} [[observer-fail]]"),
                message("m1", "assistant", "2026-01-01T10:01:00.000Z")]
    _, engine, record, background, llm, model = await with_background(libsql, messages, 10)
    parts: list[DataPart] = []
    sink = PartSink(engine.records, "t")
    sink.emit = lambda part, durable=True: parts.append(part)  # type: ignore[method-assign]
    ctx = CycleContext(llm, model, "t", None, sink.emit)
    assert await Buffering(engine, background).start_observation(ctx, record, messages, sink)
    await background.drain()
    assert [p.name for p in parts] == ["om-buffering-start", "om-buffering-failed"]
    assert parts[1].data["cycleId"] == parts[0].data["cycleId"] and parts[1].data["error"]
    assert background.stats()["failed"] == 0  # the job itself did not raise
    active = await engine.records.active("thread:t")
    assert active.buffered_observation_chunks is None and active.is_buffering_observation is None


def test_resource_sections_merge_by_thread_and_date() -> None:
    from xxhash import xxh32_intdigest as xxh32

    from dev_server.om.engine.resource import batches, merge_section, section_id

    assert [xxh32(b""), xxh32(b"abc"), xxh32(b"Nobody inspects the spammish repetition")] == [
        0x02CC5D05, 0x32D153FF, 0xE2293B2F]
    assert section_id("trip", True) == format(xxh32(b"trip"), "08x") and section_id("trip", False) == "trip"
    log = merge_section("", "a", "Date: Jan 1, 2026\n* 🔴 one", "2026-01-01T10:00:00.000Z")
    assert log == '<thread id="a">\nDate: Jan 1, 2026\n* 🔴 one\n</thread>'
    log = merge_section(log, "a", "Date: Jan 1, 2026\n* 🔴 two", "2026-01-01T11:00:00.000Z")
    assert log == '<thread id="a">\nDate: Jan 1, 2026\n* 🔴 one\n* 🔴 two\n</thread>'  # same thread, same date
    log = merge_section(log, "b", "Date: Jan 1, 2026\n* 🔴 three", "2026-01-01T12:00:00.000Z")
    assert log.endswith('--- message boundary (2026-01-01T12:00:00.000Z) ---\n\n<thread id="b">\n'
                        'Date: Jan 1, 2026\n* 🔴 three\n</thread>')
    log = merge_section(log, "a", "Date: Jan 2, 2026\n* 🔴 four", "2026-01-02T10:00:00.000Z")
    assert log.count('<thread id="a">') == 2  # a new day: a new section
    by_thread = {"x": [message("x1", "user", "2026-01-01T10:00:00.000Z")],
                 "y": [message("y1", "user", "2026-01-01T09:00:00.000Z")],
                 "z": [message("z1", "user", "2026-01-01T11:00:00.000Z", text=FACT * 40)]}
    assert batches(by_thread, 100) == [["y", "x"], ["z"]]


@pytest.mark.anyio
async def test_a_background_observer_sees_the_buffered_heading_only_after_an_active_log(libsql: LibSQLStore) -> None:
    _, record = await _record_with_chunks(libsql, [chunk(1, 100), chunk(2, 100)])
    assert previously_observed(record) == "- 🔴 fact 1\n\n- 🔴 fact 2"  # nothing active yet: no heading
    active = dataclasses.replace(record, active_observations="- 🔴 earlier")
    assert previously_observed(active) == "- 🔴 earlier\n\n--- BUFFERED (pending activation) ---\n\n" \
                                          "- 🔴 fact 1\n\n- 🔴 fact 2"
    assert previously_observed(dataclasses.replace(active, buffered_observation_chunks=None)) == "- 🔴 earlier"
