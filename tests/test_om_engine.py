"""The observation and reflection cycles on a real SQLite file, with the local model as
observer and reflector (``dev_server.om.engine.observation_engine``): one cycle per record across processes, the
reflector's escalation, failures that leave the record as it was."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from dev_server.kernel.messages import Message, Thread
from dev_server.llm import LiteLLMClient
from dev_server.llm.scripted import ScriptedModel
from dev_server.om.engine.cycle_context import CycleContext
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om.engine.record_store import om_record_store
from dev_server.om.engine.thread_metadata import activation_patch
from dev_server.om.options.config import observational_memory_options
from dev_server.om.tokens.counting import count_messages
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.om_records import thread_om

pytestmark = pytest.mark.anyio
FACT = "My name is Ada and I keep bees on the roof of my flat in Leeds."


@pytest.fixture
async def db(libsql: LibSQLStore) -> LibSQLStore:
    return libsql


async def setup(db: LibSQLStore, texts: list[str], **options: Any):
    conversations = ConversationStore(db)
    await conversations.save_thread(Thread("t", "r"))
    messages = [Message(f"m{i}", "t", "r", "user" if i % 2 == 0 else "assistant",
                        {"format": 2, "parts": [{"type": "text", "text": text}], "content": text},
                        f"2026-01-01T10:{i:02d}:00.000Z") for i, text in enumerate(texts)]
    await conversations.append_messages("t", messages)
    engine = ObservationEngine(observational_memory_options(options or True), om_record_store(db))
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={}, timezone="UTC")
    llm = LiteLLMClient(force_local=True)
    parts: list[tuple[Any, bool]] = []
    ctx = CycleContext(llm, await llm.resolve("openai/gpt-4o-mini"), "t", None,
                       lambda part, durable=False: parts.append((part, durable)))
    return engine, record, messages, ctx, parts


async def test_a_second_process_with_a_stale_record_does_not_observe_again(db: LibSQLStore) -> None:
    engine, record, messages, ctx, parts = await setup(db, [FACT, "Noted.", FACT, "Noted again."])
    observed = await engine.observe(ctx, record, messages, count_messages(messages))
    assert observed is not None and "Ada" in observed.active_observations
    assert [p.name for p, _ in parts] == ["om-observation-start", "om-observation-end"] and all(d for _, d in parts)
    other = ObservationEngine(engine.options, om_record_store(db))  # another process, still holding `record`
    assert await other.observe(ctx, record, messages, 100) is None
    assert (await engine.records.active("thread:t")).active_observations == observed.active_observations
    assert (await engine.records.active("thread:t")).is_observing is None  # the flag was released


async def test_a_failing_observer_reports_and_changes_nothing(db: LibSQLStore) -> None:
    engine, record, messages, ctx, parts = await setup(db, [FACT, "Noted.", f"{FACT} [[observer-fail]]"])
    assert await engine.observe(ctx, record, messages, 500) is None
    [(start, _), (failed, durable)] = parts
    assert failed.name == "om-observation-failed" and durable and failed.data["cycleId"] == start.data["cycleId"]
    active = await engine.records.active("thread:t")
    assert (active.active_observations, active.last_observed_at, active.is_observing) == ("", None, None)


async def test_reflection_escalates_until_the_log_fits_and_writes_the_next_generation(db: LibSQLStore) -> None:
    texts = [f"{FACT} Day {i} of the diary, with some ordinary small talk about the weather." for i in range(12)]
    engine, record, messages, ctx, parts = await setup(db, texts, reflection={"observationTokens": 120})
    observed = await engine.observe(ctx, record, messages, 1000)
    assert observed is not None and observed.observation_token_count >= 120
    parts.clear()
    reflected = await engine.maybe_reflect(ctx, observed)
    assert (reflected.generation_count, reflected.origin_type) == (1, "reflection")
    assert reflected.observation_token_count < observed.observation_token_count
    names = [p.name for p, _ in parts]
    assert names[0] == "om-observation-start" and names[-1] == "om-observation-end"
    assert all(p.data["operationType"] == "reflection" for p, _ in parts)
    retries = [p.data["error"] for p, _ in parts if p.name == "om-observation-failed"]
    assert all("retrying at level" in error for error in retries)
    assert len(names) == 2 + 2 * len(retries)  # each retry is a failed cycle and a new start
    history = await engine.records.history("thread:t")
    assert ([r.generation_count for r in history] == [1, 0]
            and history[1].active_observations == observed.active_observations)


async def test_the_reflectors_hints_replace_the_threads_when_it_gives_them(db: LibSQLStore) -> None:
    """A synchronous reflection's ``<current-task>`` and ``<suggested-response>`` become the
    thread's hints (measured on Mastra 1.31); a reflection without them leaves the hints."""
    texts = [f"{FACT} Day {i} of the diary." for i in range(6)]
    engine, record, messages, ctx, _ = await setup(db, texts, reflection={"observationTokens": 40})
    log = "* 🔴 (10:00) User stated they keep bees in Leeds"
    reflector = ScriptedModel(reflector=[
        f"<observations>\n{log}\n</observations>\n<current-task>Plan the bee inspection</current-task>\n"
        "<suggested-response>Ask which hive needs checking</suggested-response>",
        f"<observations>\n{log}\n</observations>"])
    ctx = replace(ctx, llm=reflector)
    observed = await engine.observe(ctx, record, messages, 1000)
    assert observed is not None and observed.observation_token_count >= 40
    before = thread_om((await ConversationStore(db).get_thread("t")).metadata)
    assert before["currentTask"] and before["currentTask"] != "Plan the bee inspection"
    reflected = await engine.maybe_reflect(ctx, observed)
    assert reflected.generation_count == 1
    hints = thread_om((await ConversationStore(db).get_thread("t")).metadata)
    assert (hints["currentTask"], hints["suggestedResponse"]) == ("Plan the bee inspection",
                                                                  "Ask which hive needs checking")
    assert ctx.hints is not None and ctx.hints["currentTask"] == "Plan the bee inspection"  # what the turn injects
    again = await engine.reflect(ctx, reflected, 1000)
    assert again.generation_count == 2
    kept = thread_om((await ConversationStore(db).get_thread("t")).metadata)
    assert (kept["currentTask"], kept["suggestedResponse"]) == ("Plan the bee inspection",
                                                                "Ask which hive needs checking")


async def test_the_threads_om_metadata_holds_the_keys_mastra_writes(db: LibSQLStore) -> None:
    engine, record, messages, ctx, _ = await setup(db, [FACT, "Noted."])
    records = engine.records
    await records.patch_thread_om("t", {"threadTitle": "an old title", "currentTask": "an old task"})
    ctx = replace(ctx, hints=thread_om((await ConversationStore(db).get_thread("t")).metadata))
    assert await engine.observe(ctx, record, messages, 100) is not None
    om = thread_om((await ConversationStore(db).get_thread("t")).metadata)
    # thread scope: this cycle's hints (an absent title removed), extracted, the message cursor; no lastObservedAt
    assert set(om) == {"currentTask", "suggestedResponse", "extracted", "lastObservedMessageCursor"}
    assert om["extracted"] == {} and om["currentTask"] != "an old task"
    assert om["lastObservedMessageCursor"] == {"createdAt": messages[-1].created_at, "id": messages[-1].id}
    # an activation writes the newest chunk's hints and title (a background observer's has no hints)
    chunks = [{"cycleId": "a", "threadTitle": "older"}, {"cycleId": "b", "threadTitle": "Bees in Leeds"}]
    assert activation_patch(chunks) == {"suggestedResponse": None, "currentTask": None, "threadTitle": "Bees in Leeds"}
    await records.patch_thread_om("t", activation_patch(chunks))
    om = thread_om((await ConversationStore(db).get_thread("t")).metadata)
    assert set(om) == {"threadTitle", "extracted", "lastObservedMessageCursor"}


async def test_a_title_update_names_an_untitled_threads_old_title_as_empty(db: LibSQLStore) -> None:
    _, _, _, ctx, parts = await setup(db, [FACT])
    conversations = ConversationStore(db)
    engine = ObservationEngine(observational_memory_options(True), om_record_store(db), threads=conversations)
    assert await engine.extraction.update_title(ctx, "  Bees in   Leeds ", "c1")
    [(update, durable)] = parts
    assert update.name == "om-thread-update" and durable  # stored with the cycle's markers, as Mastra's
    assert (update.data["oldTitle"], update.data["newTitle"]) == ("", "Bees in Leeds")
    assert await engine.extraction.update_title(ctx, "Beekeeping", "c2")
    assert parts[-1][0].data["oldTitle"] == "Bees in Leeds"
