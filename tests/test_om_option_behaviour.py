"""What Mastra's OM options change (issue 28, items 10 and 15), on a real SQLite file with the
scripted model at the provider seam: ``observeAttachments`` decides which files the observer
is sent (tool results' too); an extractor's functions get the run context, ``onExtracted``
replaces a value or records a failure, ``metadataKeyPath: false`` keeps a value out of the
thread's metadata; the standalone class applies the observation- and reflection-level
activation triggers and reports ``onDebugEvent``. ``bufferOnIdle`` under ``observation``
through a live gateway is ``tests/test_om_async_features.py``."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

import pytest

from dev_server.kernel.clock import ManualClock
from dev_server.kernel.messages import Message
from dev_server.kernel.model import ResolvedModel
from dev_server.llm.content import media_type_of
from dev_server.llm.scripted import ScriptedModel
from dev_server.memory.memory import Memory, MemoryOptions
from dev_server.om.engine.cycle_context import CycleContext
from dev_server.om.manual import ObservationalMemory
from dev_server.om.options.extractors import ExtractedContext, ExtractorContext
from dev_server.om.tokens.counting import count_messages
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from dev_server.storage.om_records import thread_om
from tests.kit.builders import seed_threads, stored_text, stored_tool_invocation

pytestmark = pytest.mark.anyio
FACT = "My name is Ada Lovelace and I keep bees on the roof of my flat in Leeds."


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


PNG, PDF, CSV = (f"data:image/png;base64,{b64('png')}", f"data:application/pdf;base64,{b64('pdf')}",
                 f"data:text/csv;base64,{b64('a,b')}")
CHART, NOTES = b64("chart"), b64("notes")


@pytest.fixture
def db(sqlite_store: LibSQLStore) -> LibSQLStore:
    return sqlite_store


def with_attachments() -> list[Message]:
    """A user message with an image, a PDF and a CSV; a reply whose tool returned an image and a text file."""
    files = [{"type": "text", "text": FACT}, {"type": "file", "mimeType": "image/png", "data": PNG},
             {"type": "file", "mimeType": "application/pdf", "data": PDF, "filename": "plan.pdf"},
             {"type": "file", "mimeType": "text/csv", "data": CSV, "filename": "hives.csv"}]
    result = {"type": "content", "value": [{"type": "text", "text": "Here is the chart."},
                                           {"type": "image-data", "data": CHART, "mediaType": "image/png"},
                                           {"type": "file-data", "data": NOTES, "mediaType": "text/plain",
                                            "filename": "notes.txt"}]}
    user = stored_text("m0", "user", FACT, 0)
    user.content["parts"] = files
    reply = stored_text("m1", "assistant", "Drawn.", 1)
    reply.content["parts"] = [stored_tool_invocation("c1", "chart", {"of": "hives"}, result),
                              {"type": "text", "text": "Drawn."}]
    return [user, reply]


def actor(*, vision: bool, known: bool) -> ResolvedModel:
    """The agent's model, which observes (no OM model is configured and the default one is local)."""
    return ResolvedModel("deepseek/deepseek-chat", "deepseek", "deepseek-chat", "deepseek/deepseek-chat", False,
                         vision=vision, pdf_input=vision, capabilities_known=known)


async def observe_once(db: LibSQLStore, messages: list[Message], options: dict[str, Any], llm: ScriptedModel, *,
                       agent_model: ResolvedModel | None = None, agent_id: str | None = None,
                       log: str | None = None) -> tuple[Any, Memory]:
    """One synchronous observation of ``messages`` by a memory with OM ``options`` (after
    ``log``, when given): its ``data-om-*`` parts and the memory."""
    conversations = ConversationStore(db)
    await seed_threads(conversations, messages)
    memory = Memory(MemoryOptions(observational_memory=options), conversations, agent_id=agent_id)
    engine = memory.observational_memory()
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={}, timezone=None)
    if log is not None:
        record = await engine.records.update_active_observations(
            record.id, observations=log, token_count=20, last_observed_at="2026-01-01T09:00:00.000Z",
            observed_ids=[])
    parts: list[Any] = []
    ctx = CycleContext(llm, agent_model or await llm.resolve("openai/gpt-4o-mini"), "t", None,
                       lambda part, durable=False: parts.append(part))
    assert await engine.observe(ctx, record, messages, count_messages(messages)) is not None
    return parts, memory


# -- observeAttachments -------------------------------------------------------------------------


ALL = [PNG, PDF, CSV, f"data:image/png;base64,{CHART}", f"data:text/plain;base64,{NOTES}"]


@pytest.mark.parametrize(("setting", "model", "sent"), [
    (None, None, [PNG, PDF, ALL[3]]),  # Mastra's default: images and PDFs
    (True, None, ALL), (["*"], None, ALL), (False, None, []), ([], None, []),
    (["IMAGE/*"], None, [PNG, ALL[3]]),
    (["text/csv", "text/plain"], None, [CSV, ALL[4]]),
    ("auto", actor(vision=False, known=True), []),  # a text-only model gets the placeholders only
    ("auto", actor(vision=True, known=True), ALL),
    ("auto", actor(vision=False, known=False), ALL),  # capabilities unknown: sent
])
async def test_observe_attachments_decides_what_the_observer_is_sent(db: LibSQLStore, setting: Any,
                                                                      model: ResolvedModel | None,
                                                                      sent: list[str]) -> None:
    llm = ScriptedModel()
    observation: dict[str, Any] = {"messageTokens": 100_000, "bufferTokens": False}
    if setting is not None:
        observation["observeAttachments"] = setting
    await observe_once(db, with_attachments(), {"observation": observation}, llm, agent_model=model)
    [request] = llm.requests_for("observer")
    history = request.messages[-1]["content"]
    text = history if isinstance(history, str) else history[0]["text"]
    forwarded = [] if isinstance(history, str) else history[1:]
    urls = [p["image_url"]["url"] if p["type"] == "image_url" else p["file"]["file_data"] for p in forwarded]
    assert urls == sent
    assert [media_type_of(p) for p in forwarded] == [u[5:].split(";")[0] for u in sent]
    # the placeholders are always there; the tool result names its files instead of carrying them
    for placeholder in ("[Image #1: image/png]", "[File #1: plan.pdf]", "[File #2: hives.csv]",
                        "[Image #2: image/png]", "[File #3: notes.txt]"):
        assert placeholder in text
    assert CHART not in text and NOTES not in text and "Here is the chart." in text


@pytest.mark.parametrize(("previous_tokens", "shown"), [(0, False), (2000, True), (False, True)])
async def test_previous_observer_tokens_zero_leaves_the_log_out_of_the_observers_task(
        db: LibSQLStore, previous_tokens: Any, shown: bool) -> None:
    llm = ScriptedModel()
    options = {"observation": {"messageTokens": 100_000, "bufferTokens": False, "truncatePreviousObservations": True,
                               "previousObserverTokens": previous_tokens}}
    await observe_once(db, [stored_text("m0", "user", FACT, 0)], options, llm,
                       log="* 🔴 (09:00) User has a dog named Rex")
    task = llm.requests_for("observer")[0].messages[1]["content"]
    assert ("dog named Rex" in task) is shown


# -- extractors ---------------------------------------------------------------------------------


OBSERVED = ("<observations>\n* 🔴 (10:00) User Ada keeps bees in Leeds\n</observations>\n"
            "<mood>cheerful</mood>\n<kept>as written</kept>\n<secret>s3cret</secret>\n<broken>b</broken>\n"
            "<wrong>w</wrong>")


async def test_extractor_functions_get_the_run_context_and_on_extracted_decides(db: LibSQLStore) -> None:
    seen: list[ExtractorContext] = []

    def mood_instructions(context: ExtractorContext) -> str:
        seen.append(context)
        return f"The user's mood, for the {context.source} of thread {context.thread_id}."

    async def shout(context: ExtractedContext) -> str:
        seen.append(context)
        return context.current.upper()

    def refuse(context: ExtractedContext) -> Any:
        raise RuntimeError("not today")

    def profile_schema(context: ExtractorContext) -> dict[str, Any]:
        return {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

    extract = [
        {"name": "Mood", "instructions": mood_instructions, "onExtracted": shout},
        {"name": "Kept", "instructions": "Anything.", "onExtracted": lambda context: None},  # None keeps the value
        {"name": "Secret", "instructions": "A secret.", "metadataKeyPath": False},
        {"name": "Broken", "instructions": "Anything.", "onExtracted": refuse},
        {"name": "Wrong", "instructions": "Anything.", "onExtracted": lambda context: object()},
        {"name": "Profile", "instructions": "Who the user is.", "schema": profile_schema,
         "metadataKeyPath": "people.user", "onExtracted": lambda context: {"name": 7}},  # does not fit
        {"name": "Named", "instructions": "Who the user is.", "schema": profile_schema,
         "onExtracted": lambda context: {"name": context.current["name"] + "!"}},
    ]
    llm = ScriptedModel(observer=OBSERVED, extractor=['{"name": "Ada"}', '{"name": "Ada"}'])
    messages = [stored_text("m0", "user", FACT, 0), stored_text("m1", "assistant", "Noted.", 1)]
    parts, memory = await observe_once(db, messages, {"observation": {"messageTokens": 100_000, "bufferTokens": False,
                                                                      "extract": extract}}, llm, agent_id="keeper")
    end = next(p.data for p in parts if p.name == "om-observation-end")
    values, failures = end["extractedValues"], end["extractionFailures"]
    assert values["mood"] == "CHEERFUL" and values["kept"] == "as written" and values["secret"] == "s3cret"
    assert values["named"] == {"name": "Ada!"}
    assert "broken" not in values and failures["broken"] == "not today"
    assert "wrong" not in values and "not JSON" in failures["wrong"]
    assert "profile" not in values and "does not fit the schema" in failures["profile"]
    # the instructions function was called with the run context, and its words reached the observer
    context = seen[0]
    assert (context.source, context.thread_id, context.resource_id, context.agent_id) == ("observer", "t", "r",
                                                                                            "keeper")
    assert context.memory is memory and context.request_context is None
    assert "The user's mood, for the observer of thread t." in llm.requests_for("observer")[0].messages[0]["content"]
    hooked = seen[1]
    assert isinstance(hooked, ExtractedContext) and hooked.current == "cheerful" and hooked.previous is None
    assert hooked.extractor is not None and hooked.extractor.slug == "mood"
    # what is kept: under each metadataKeyPath, nothing for false, nothing that failed
    thread = await memory.store.get_thread("t")
    om = thread_om(thread.metadata)
    assert om["extracted"] == {"mood": "CHEERFUL", "kept": "as written", "named": {"name": "Ada!"}}
    assert "people" not in om and "s3cret" not in str(thread.metadata)


async def test_a_raising_instructions_function_is_an_extraction_failure(db: LibSQLStore) -> None:
    def unavailable(context: ExtractorContext) -> str:
        raise LookupError("no instructions for this thread")

    extract = [{"name": "Mood", "instructions": unavailable}, {"name": "Kept", "instructions": "Anything."}]
    llm = ScriptedModel(observer=OBSERVED)
    messages = [stored_text("m0", "user", FACT, 0)]
    parts, _ = await observe_once(db, messages, {"observation": {"messageTokens": 100_000, "bufferTokens": False,
                                                                 "extract": extract}}, llm)
    end = next(p.data for p in parts if p.name == "om-observation-end")
    assert end["extractionFailures"] == {"mood": "no instructions for this thread"}
    assert end["extractedValues"]["kept"] == "as written" and "mood" not in end["extractedValues"]


# -- the standalone class -----------------------------------------------------------------------


CHUNK = {"id": "ombuf-1", "cycleId": "c1", "observations": "* 🔴 (10:00) User keeps bees in Leeds",
         "tokenCount": 12, "messageIds": ["m0", "m1"], "messageTokens": 40,
         "lastObservedAt": "2026-01-01T10:01:00.001Z", "createdAt": "2026-01-01T10:02:00.000Z"}


async def standalone_with_a_chunk(db: LibSQLStore, options: dict[str, Any], clock: ManualClock,
                                  replied_by: str = "openai/gpt-4o-mini") -> ObservationalMemory:
    """A standalone OM on a thread whose two messages wait in a buffered chunk (as an agent
    sharing the database left them); the reply came from ``replied_by``."""
    store = ConversationStore(db, clock=clock)
    reply = stored_text("m1", "assistant", "Noted.", 1)
    provider, _, model_id = replied_by.partition("/")
    reply.content["metadata"] = {"provider": provider, "modelId": model_id}
    await seed_threads(store, [stored_text("m0", "user", FACT, 0), reply])
    om = ObservationalMemory(store, "local/observer", options=options, llm=ScriptedModel())
    await om.engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={}, timezone=None)
    assert await om.engine.records.add_buffered_chunk("thread:t", CHUNK) is not None
    return om


BUFFERED = {"observation": {"messageTokens": 5_000, "bufferTokens": 1_000}}


async def test_the_standalone_class_activates_by_the_observation_level_idle_time(db: LibSQLStore) -> None:
    clock = ManualClock("2026-01-01T10:04:00Z")
    options = {"observation": {**BUFFERED["observation"], "activateAfterIdle": "5m"}}
    # through an agent's memory the observation-level trigger is not in force (Mastra's Memory drops it)
    assert MemoryOptions(observational_memory=options).om.observation_triggers.after_idle is None
    om = await standalone_with_a_chunk(db, options, clock)
    early = await om.activate("t", "r")
    assert early.parts == [] and early.record.buffered_observation_chunks  # 3 minutes idle, below the threshold
    clock.set("2026-01-01T10:07:00Z")
    late = await om.activate("t", "r")
    [part] = late.parts
    assert part["type"] == "data-om-activation" and part["data"]["triggeredBy"] == "ttl"
    assert part["data"]["config"]["activateAfterIdle"] == 300_000 and part["data"]["ttlExpiredMs"] == 360_000
    assert not late.record.buffered_observation_chunks and "keeps bees" in late.record.active_observations


async def test_observation_false_overrides_the_top_level_and_check_threshold_false_forces(db: LibSQLStore) -> None:
    clock = ManualClock("2026-01-01T12:00:00Z")
    options = {"activateAfterIdle": "5m", "observation": {**BUFFERED["observation"], "activateAfterIdle": False}}
    om = await standalone_with_a_chunk(db, options, clock)
    assert (await om.activate("t", "r")).parts == []  # two hours idle, but off for observations here
    forced = await om.activate("t", "r", check_threshold=False)
    assert [p["data"]["triggeredBy"] for p in forced.parts] == ["threshold"]


async def test_the_standalone_class_activates_on_a_provider_change(db: LibSQLStore) -> None:
    clock = ManualClock("2026-01-01T10:03:00Z")
    options = {"activateOnProviderChange": True, "observation": BUFFERED["observation"]}  # inherited
    om = await standalone_with_a_chunk(db, options, clock)
    assert (await om.activate("t", "r", model="openai/gpt-4o-mini")).parts == []  # the same model
    changed = await om.activate("t", "r", model="anthropic/claude-sonnet-4-5")
    [part] = changed.parts
    assert part["data"]["triggeredBy"] == "provider_change"
    assert (part["data"]["previousModel"], part["data"]["currentModel"]) == ("openai/gpt-4o-mini",
                                                                              "anthropic/claude-sonnet-4-5")


async def test_the_standalone_class_swaps_a_buffered_reflection_by_its_own_trigger(db: LibSQLStore) -> None:
    clock = ManualClock("2026-01-01T11:00:00Z")
    options = {"observation": BUFFERED["observation"],
               "reflection": {"observationTokens": 400, "activateAfterIdle": "30m"}}
    assert MemoryOptions(observational_memory=options).om.reflection_triggers.after_idle is None  # through Memory
    om = await standalone_with_a_chunk(db, options, clock)
    await om.activate("t", "r", check_threshold=False)  # the chunk becomes the log
    record = await om.get_record("t", "r")
    lines = [f"* 🟡 (10:{i:02d}) User mentioned hive number {i} and its queen, a Buckfast" for i in range(40)]
    record = await om.engine.records.update_active_observations(
        record.id, observations="\n".join(lines), token_count=390, last_observed_at=record.last_observed_at,
        observed_ids=[])
    await om.engine.records.store_buffered_reflection(record.id, reflection="* 🟡 User keeps 40 hives of Buckfasts",
                                                      tokens=10, input_tokens=100, line_count=10)
    result = await om.activate("t", "r")
    [part] = result.parts
    assert (part["data"]["operationType"], part["data"]["triggeredBy"]) == ("reflection", "ttl")
    assert result.record.generation_count == record.generation_count + 1
    assert result.record.active_observations.startswith("* 🟡 User keeps 40 hives of Buckfasts")


async def test_on_debug_event_reports_each_cycle_of_the_standalone_class(db: LibSQLStore) -> None:
    events: list[dict[str, Any]] = []
    clock = ManualClock("2026-01-01T11:00:00Z")
    store = ConversationStore(db, clock=clock)
    await seed_threads(store, [stored_text("m0", "user", FACT, 0), stored_text("m1", "assistant", "Noted.", 1)])

    def listen(event: dict[str, Any]) -> None:
        events.append(event)
        raise RuntimeError("a broken listener changes nothing")

    om = ObservationalMemory(store, "local/observer", llm=ScriptedModel(),
                             options={"onDebugEvent": listen, "observation": {"bufferTokens": False}})
    assert (await om.observe("t", "r")).observed
    assert (await om.reflect("t", "r")).reflected
    assert [e["type"] for e in events] == ["observation_triggered", "observation_complete", "reflection_triggered",
                                           "reflection_complete"]
    assert all(e["threadId"] == "t" and e["resourceId"] == "r" and isinstance(e["timestamp"], datetime)
               for e in events)
    assert events[0]["pendingTokens"] > 0 and "Ada" in events[1]["observations"]
    assert events[2]["inputTokens"] > 0 and events[3]["outputTokens"] > 0 and events[3]["observations"]
