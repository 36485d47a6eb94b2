"""A model answer is checked before it becomes memory (``dev_server.om.engine.output_check``, issue 25).

An observer or reflector answer that is not observations (prose, a refusal, an empty block,
repetition, a reflection far too small) is a failed cycle: a ``-failed`` part naming the
problem, the record as it was, retried where the cycle retries (the observer once, the
reflector a compression level up). Also: a manual observe while buffered chunks wait does
not get their messages into the log twice. Real SQLite files; the local model observes and
reflects (its ``[[observer-*]]`` / ``[[reflector-*]]`` triggers pick the bad answers), and
a ``ScriptedModel`` (``dev_server.llm.scripted``) puts chosen answers in front of it for the retry tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from dev_server.background import BackgroundWork
from dev_server.kernel.events import DataPart
from dev_server.kernel.messages import Message, Thread
from dev_server.kernel.model import LLMClient, Usage
from dev_server.kernel.processors import StepContext
from dev_server.llm import LiteLLMClient
from dev_server.llm.scripted import Reply, ScriptedModel
from dev_server.om import manual
from dev_server.om.engine.activation import Trigger, activate
from dev_server.om.engine.buffering import Buffering, PartSink
from dev_server.om.engine.cycle_context import CycleContext
from dev_server.om.engine.flags import settled
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om.engine.output_check import format_problem, reflection_problem
from dev_server.om.engine.record_store import om_record_store
from dev_server.om.options.config import observational_memory_options
from dev_server.om.tokens.counting import count_messages, estimate_tokens
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore

pytestmark = pytest.mark.anyio
FACT = "My name is Ada and I keep bees on the roof of my flat in Leeds."


def scripted(*, observer: Sequence[str] = (), reflector: Sequence[str] = ()) -> ScriptedModel:
    """The local model, except that the observer's and the reflector's next answers are
    scripted (used in order, then the local model's); every request is recorded."""
    return ScriptedModel(observer=[Reply(text, usage=Usage(10, 10)) for text in observer],
                         reflector=[Reply(text, usage=Usage(10, 10)) for text in reflector])


@pytest.fixture
def db(sqlite_store: LibSQLStore) -> LibSQLStore:
    return sqlite_store


def text_message(index: int, text: str) -> Message:
    role = "user" if index % 2 == 0 else "assistant"
    return Message(f"m{index}", "t", "r", role, {"format": 2, "parts": [{"type": "text", "text": text}],
                                                  "content": text}, f"2026-01-01T10:{index:02d}:00.000Z")


def log_with(trigger: str, lines: int = 40) -> str:
    """A log of ~1,000 tokens whose first statement carries a reflector trigger."""
    body = [f'* 🔴 (10:{i:02d}) User stated: "Day {i}: {FACT} We also talked about the garden and the weather."'
            for i in range(lines)]
    body[0] = body[0][:-1] + f' {trigger}"'
    return "Date: Jan 1, 2026\n" + "\n".join(body)


async def engine_with(db: LibSQLStore, options: dict[str, Any], llm: LLMClient | None = None,
                      messages: list[Message] = ()):
    conversations = ConversationStore(db)
    await conversations.save_thread(Thread("t", "r"))
    if messages:
        await conversations.append_messages("t", list(messages))
    engine = ObservationEngine(observational_memory_options(options), om_record_store(db))
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    llm = llm or LiteLLMClient(force_local=True)
    parts: list[DataPart] = []
    ctx = CycleContext(llm, await llm.resolve("openai/gpt-4o-mini"), "t", None,
                       lambda part, durable=False: parts.append(part))
    return conversations, engine, record, ctx, parts


async def with_log(engine: ObservationEngine, record: Any, log: str) -> Any:
    return await engine.records.update_active_observations(
        record.id, observations=log, token_count=estimate_tokens(log), last_observed_at="2026-01-01T09:00:00.000Z",
        observed_ids=[])


def chatty_log() -> str:
    """~1,100 tokens, most of them low-priority replies the local reflector drops (~430 kept)."""
    red = [f'* 🔴 (10:{i:02d}) User stated: "Day {i}: {FACT} We also talked about the garden and the weather."'
           for i in range(10)]
    green = [f'* 🟢 (11:{i:02d}) Assistant replied: "Lovely, tell me more about day {i}."' for i in range(30)]
    return "Date: Jan 1, 2026\n" + "\n".join(red + green)


SYNC_REFLECTION = {"observation": {"bufferTokens": False}, "reflection": {"observationTokens": 300}}


# -- the checks themselves ------------------------------------------------------------

def test_what_counts_as_observations() -> None:
    assert format_problem("Date: Jan 1, 2026\n* 🔴 (10:00) User stated: hi") is None
    assert format_problem("🟡 (10:00) User asked about bees") is None  # an emoji line without a bullet
    assert format_problem("(10:00) User asked about bees") is None
    assert "no observation lines" in format_problem("Date: Jan 1, 2026\nThe user talked about bees.")
    assert "no observation lines" in format_problem('<thread id="a">\n</thread>\n--- message boundary (x) ---')
    assert "empty" in format_problem("  \n")
    assert "refusal" in format_problem("- I'm sorry, but I can't help with that.\n* 🔴 I cannot do this")
    assert format_problem("* 🔴 (10:00) User stated: I can't make it on Friday") is None  # the user, not the model
    assert "repeated" in format_problem("* 🔴 (10:00) User stated the same thing\n" * 12)
    assert reflection_problem("* 🔴 one", False, tokens=5, source_tokens=400) is None  # a small log may shrink so
    assert "far too small" in reflection_problem("* 🔴 one", False, tokens=5, source_tokens=1000)
    assert reflection_problem("* 🔴 one", False, tokens=50, source_tokens=1000) is None
    assert "degenerate" in reflection_problem("", True, tokens=0, source_tokens=1000)


# -- reflection -----------------------------------------------------------------------

@pytest.mark.parametrize(("trigger", "reason"), [
    ("[[reflector-prose]]", "no observation lines"), ("[[reflector-refusal]]", "no observation lines"),
    ("[[reflector-empty]]", "empty"), ("[[reflector-degenerate]]", "degenerate"),
    ("[[reflector-collapse]]", "far too small")])
async def test_a_reflection_that_is_not_observations_fails_and_the_log_stays(db: LibSQLStore, trigger: str,
                                                                             reason: str) -> None:
    _, engine, record, ctx, parts = await engine_with(db, SYNC_REFLECTION)
    record = await with_log(engine, record, log_with(trigger))
    result = await engine.maybe_reflect(ctx, record)
    assert result.id == record.id and result.generation_count == 0
    history = await engine.records.history("thread:t")
    assert len(history) == 1 and history[0].active_observations == record.active_observations
    names = [p.name for p in parts]
    assert names[-1] == "om-observation-failed" and "om-observation-end" not in names
    failures = [p.data for p in parts if p.name == "om-observation-failed"]
    assert all(f["operationType"] == "reflection" and reason in f["error"] for f in failures)
    assert names.count("om-observation-start") == len(failures) > 1  # the ladder was climbed, each rung a cycle
    assert "retrying at level" in failures[0]["error"] and "no retry left" in failures[-1]["error"]


async def test_a_rejected_reflection_is_retried_a_level_up_and_the_valid_answer_is_kept(db: LibSQLStore) -> None:
    prose = "I looked at these observations and the user seems nice."
    llm = scripted(reflector=[prose])
    options = {"observation": {"bufferTokens": False}, "reflection": {"observationTokens": 500}}
    _, engine, record, ctx, parts = await engine_with(db, options, llm)
    record = await with_log(engine, record, chatty_log())
    result = await engine.maybe_reflect(ctx, record)
    assert len(llm.requests_for("reflector")) == 2
    assert result.generation_count == 1 and prose not in result.active_observations
    assert "Day 9" in result.active_observations and "Assistant replied" not in result.active_observations
    [failed] = [p.data for p in parts if p.name == "om-observation-failed"]
    assert "no observation lines" in failed["error"] and "retrying at level 2" in failed["error"]
    assert [p.name for p in parts] == ["om-observation-start", "om-observation-failed", "om-observation-start",
                                       "om-observation-end"]


async def test_a_manual_reflect_of_prose_leaves_the_log(db: LibSQLStore) -> None:
    conversations, engine, record, ctx, _ = await engine_with(db, SYNC_REFLECTION)
    record = await with_log(engine, record, log_with("[[reflector-prose]]"))
    result = await manual.reflect(engine, conversations, ctx.llm, ctx.agent_model, thread_id="t", resource_id="r")
    assert not result.reflected and result.record.active_observations == record.active_observations
    assert any(p["type"] == "data-om-observation-failed" and "no observation lines" in p["data"]["error"]
               for p in result.parts)


# -- observation ----------------------------------------------------------------------

@pytest.mark.parametrize(("trigger", "reason"), [("[[observer-prose]]", "no observation lines"),
                                                 ("[[observer-refusal]]", "refusal")])
async def test_an_observer_answer_that_is_not_observations_fails_and_nothing_is_appended(
        db: LibSQLStore, trigger: str, reason: str) -> None:
    messages = [text_message(0, FACT), text_message(1, "Noted."), text_message(2, f"{FACT} {trigger}")]
    llm = scripted()
    _, engine, record, ctx, parts = await engine_with(db, {"observation": {"bufferTokens": False}}, llm, messages)
    assert await engine.observe(ctx, record, messages, count_messages(messages)) is None
    assert len(llm.requests_for("observer")) == 2  # asked once more before giving up
    [start, failed] = parts
    assert (start.name, failed.name) == ("om-observation-start", "om-observation-failed")
    assert failed.data["cycleId"] == start.data["cycleId"] and reason in failed.data["error"]
    active = await engine.records.active("thread:t")
    assert (active.active_observations, active.last_observed_at, active.observed_message_ids) == ("", None, None)


async def test_a_rejected_observer_answer_is_asked_again_and_the_second_is_used(db: LibSQLStore) -> None:
    messages = [text_message(0, FACT), text_message(1, "Noted.")]
    llm = scripted(observer=["<observations>\n</observations>"])
    _, engine, record, ctx, parts = await engine_with(db, {"observation": {"bufferTokens": False}}, llm, messages)
    observed = await engine.observe(ctx, record, messages, count_messages(messages))
    assert observed is not None and "Ada" in observed.active_observations
    assert len(llm.requests_for("observer")) == 2
    assert [p.name for p in parts] == ["om-observation-start", "om-observation-end"]


async def test_resource_scope_rejects_a_prose_answer_for_the_thread(libsql: LibSQLStore) -> None:
    store = ConversationStore(libsql)
    await store.save_thread(Thread("t1", "r1"))
    om = manual.ObservationalMemory(store, model="local/observer", llm=LiteLLMClient(), options={
        "scope": "resource", "observation": {"messageTokens": 500, "bufferTokens": False}})
    result = await om.observe("t1", "r1", messages=[{"role": "user", "content": f"{FACT} [[observer-prose]]"}])
    assert not result.observed and result.record.active_observations == ""
    [failed] = [p["data"] for p in result.parts if p["type"] == "data-om-observation-failed"]
    assert "no observation lines" in failed["error"]


# -- buffered cycles ------------------------------------------------------------------

async def buffering_with(db: LibSQLStore, messages: list[Message], options: dict[str, Any]):
    conversations, engine, record, ctx, _ = await engine_with(db, options, messages=messages)
    background = BackgroundWork()
    await background.start()
    streamed: list[DataPart] = []
    step = StepContext("agent", "run", "", None, "r")  # a live turn: what it streams is its ``emit``
    step.emit = lambda part, durable=False: streamed.append(part)  # type: ignore[method-assign]
    sink = PartSink(engine.records, "t", step)
    return conversations, engine, record, replace(ctx, emit=sink.emit), sink, background, streamed


async def test_a_buffered_observation_that_is_not_observations_stores_no_chunk(db: LibSQLStore) -> None:
    messages = [text_message(0, FACT), text_message(1, "Noted."), text_message(2, f"{FACT} [[observer-prose]]"),
                text_message(3, "Noted again.")]
    conversations, engine, record, ctx, sink, background, streamed = await buffering_with(
        db, messages, {"observation": {"messageTokens": 1000, "bufferTokens": 10}})
    assert await Buffering(engine, background).start_observation(ctx, record, messages, sink)
    await background.drain()
    assert [p.name for p in streamed] == ["om-buffering-start", "om-buffering-failed"]
    assert "no observation lines" in streamed[1].data["error"]
    active = await settled(engine.records, "thread:t", timeout_s=5)
    assert active.buffered_observation_chunks is None and active.active_observations == ""
    # the observation-failed copy is stored on the reply, not streamed
    reply = await conversations.get_message("m3")
    [stored] = [p for p in reply.content["parts"] if p["type"] == "data-om-observation-failed"]
    assert stored["data"]["cycleId"] == streamed[0].data["cycleId"]
    assert "no observation lines" in stored["data"]["error"]


@pytest.mark.parametrize(("trigger", "reason"), [("[[reflector-prose]]", "no observation lines"),
                                                 ("[[reflector-collapse]]", "far too small")])
async def test_a_buffered_reflection_that_is_not_observations_is_not_kept(db: LibSQLStore, trigger: str,
                                                                          reason: str) -> None:
    conversations, engine, record, ctx, sink, background, streamed = await buffering_with(
        db, [], {"observation": {"messageTokens": 1000, "bufferTokens": 200},
                 "reflection": {"observationTokens": 2000}})
    record = await with_log(engine, record, log_with(trigger))
    assert await Buffering(engine, background).start_reflection(ctx, record, sink)
    await background.drain()
    assert [p.name for p in streamed] == ["om-buffering-start", "om-buffering-failed"]
    assert streamed[1].data["operationType"] == "reflection" and reason in streamed[1].data["error"]
    active = await settled(engine.records, "thread:t", flags=("is_buffering_reflection",), timeout_s=5)
    assert active.buffered_reflection is None and active.active_observations == record.active_observations


# -- manual observe and buffered chunks -----------------------------------------------

async def test_a_manual_observe_while_chunks_wait_then_activation_does_not_duplicate(libsql: LibSQLStore) -> None:
    messages = [text_message(i, f"Turn {i}. {FACT}" if i % 2 == 0 else "Noted.") for i in range(4)]
    conversations, engine, record, ctx, sink, background, _ = await buffering_with(
        libsql, messages, {"observation": {"messageTokens": 1000, "bufferTokens": 10}})
    assert await Buffering(engine, background).start_observation(ctx, record, messages, sink)
    await background.drain()
    waiting = await settled(engine.records, "thread:t", timeout_s=5)
    assert len(waiting.buffered_observation_chunks) == 1 and waiting.active_observations == ""
    later = [text_message(4, f"Turn 4. {FACT}"), text_message(5, "Noted.")]
    await conversations.append_messages("t", later)
    result = await manual.observe(engine, conversations, ctx.llm, ctx.agent_model, thread_id="t", resource_id="r")
    assert result.observed
    observed = result.record
    assert all(f"Turn {i}. My name is Ada" in observed.active_observations for i in (0, 2, 4))
    await activate(engine.options, engine.records, observed, Trigger("threshold"), "t")
    final = await engine.records.active("thread:t")
    assert final.active_observations.count("Turn 0. My name is Ada") == 1  # not once more from the chunk
    assert final.active_observations == observed.active_observations
    assert observed.buffered_observation_chunks is None  # this cycle observed the chunk's messages itself


async def test_a_chunk_of_messages_a_sync_observation_already_observed_is_not_stored(libsql: LibSQLStore) -> None:
    store = om_record_store(libsql)
    record = await store.initialize(scope="thread", thread_id="t", resource_id="r", config={}, timezone="UTC")
    # the sync observation of m1 and m2 landed first; its cursor is m2's time exactly
    await store.update_active_observations(record.id, observations="* 🔴 m1 and m2", token_count=5,
                                           last_observed_at="2026-01-01T10:02:00.000Z", observed_ids=["m1", "m2"])
    late = {"id": "ombuf-1", "cycleId": "buffer-obs-1", "observations": "* 🔴 m1 and m2 again", "tokenCount": 6,
            "messageIds": ["m1", "m2"], "messageTokens": 40, "lastObservedAt": "2026-01-01T10:02:00.001Z",
            "createdAt": "2026-01-01T10:03:00.000Z"}
    assert await store.add_buffered_chunk("thread:t", late) is None
    assert (await store.active("thread:t")).buffered_observation_chunks is None
