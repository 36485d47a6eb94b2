"""Observational Memory's retrieval mode (issue 13, item 6; OBSERVATIONAL-MEMORY.md 4.4, 4.5, 7).

On real SQLite files with the built-in local model as observer, reflector and actor: the
``retrieval`` options and their checks, observation groups written by a real observation
cycle (range = the first and last visible message), reflection re-wrapped into groups, the
groups and the recall instructions in the actor's system messages, the ``recall`` tool's
three modes and the limits of its scopes, and one real turn in which the model calls it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.agents.processors import StepContext
from app.factory import create_app
from app.llm import LiteLLMClient, ModelRequest
from app.memory.memory import Memory, MemoryOptions
from app.om.config import RetrievalConfig, describe_om, observational_memory_options
from app.om.context import build_context_system_messages
from app.om.engine import CycleContext
from app.om.groups import message_range, parse_groups, rewrap_reflection, strip_groups, wrap_group
from app.om.prompts import reflector_messages
from app.om.recall_tool import Caller, Recall, RecallInput
from app.om.retrieval import ADDITIONAL_GUIDANCE_HEADING, retrieval_instructions
from app.settings import Settings
from app.storage.conversations import ConversationStore, Message, Thread
from app.storage.libsql import LibSQLStore
from tests.support import LiveApp
from tests.test_om_gateway import FACT, reply_text, turn

HEX16 = re.compile(r"^[0-9a-f]{16}$")
LONG = " ".join(f"word{i}" for i in range(3000))  # far over one part's budget and a page's


# -- options -------------------------------------------------------------------------------


def test_retrieval_true_gives_mastras_defaults_and_the_config_reports_it() -> None:
    om = observational_memory_options({"retrieval": True})
    assert om.retrieval == RetrievalConfig(vector=False, scope="resource", instructions=None)
    custom = observational_memory_options({"retrieval": {"vector": True, "scope": "thread", "instructions": " Ask. "}})
    assert custom.retrieval == RetrievalConfig(vector=True, scope="thread", instructions="Ask.")
    assert observational_memory_options({"retrieval": False}).retrieval is None
    assert observational_memory_options(True).retrieval is None
    assert describe_om(custom)["retrieval"] == {"vector": True, "scope": "thread", "instructions": "Ask."}
    assert describe_om(observational_memory_options(True))["retrieval"] is False


@pytest.mark.parametrize(("retrieval", "field"), [
    ("yes", "observationalMemory.retrieval must be"),
    (1, "observationalMemory.retrieval must be"),
    ({"scope": "everywhere"}, "observationalMemory.retrieval.scope"),
    ({"vector": "yes"}, "observationalMemory.retrieval.vector"),
    ({"instructions": 42}, "observationalMemory.retrieval.instructions"),
    ({"topK": 3}, "observationalMemory.retrieval.topK is not an option"),
])
def test_a_bad_retrieval_value_fails_at_construction_naming_the_field(retrieval: Any, field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(field)):
        observational_memory_options({"retrieval": retrieval})
    with pytest.raises(ValueError, match=re.escape(field)):
        MemoryOptions(observational_memory={"retrieval": retrieval})
    with pytest.raises(ValueError, match=re.escape(f"DEV_SERVER_OM_*: {field}")):
        Settings(om_options={"retrieval": retrieval})


# -- groups --------------------------------------------------------------------------------


def text_message(message_id: str, role: str, text: str, minute: int, thread: str = "t",
                 resource: str = "r") -> Message:
    return Message(message_id, thread, resource, role, {"format": 2, "parts": [{"type": "text", "text": text}],
                                                        "content": text}, f"2026-01-01T10:{minute:02d}:00.000Z")


def data_message(message_id: str, minute: int, thread: str = "t") -> Message:
    parts = [{"type": "step-start"}, {"type": "data-om-observation-end", "data": {"cycleId": "c"}}]
    return Message(message_id, thread, "r", "assistant", {"format": 2, "parts": parts},
                   f"2026-01-01T10:{minute:02d}:00.000Z")


class RecordingLLM(LiteLLMClient):
    """The local model, keeping every request it was sent (the observer's, the reflector's)."""

    def __init__(self) -> None:
        super().__init__(force_local=True)
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        self.requests.append(request)
        async for event in super().stream(request):
            yield event


async def om_setup(db: LibSQLStore, messages: list[Message], options: dict[str, Any]) -> tuple[Memory, Any, Any]:
    conversations = ConversationStore(db)
    for thread_id, resource_id in dict.fromkeys((m.thread_id, m.resource_id) for m in messages):
        await conversations.save_thread(Thread(thread_id, resource_id, title=f"About {thread_id}"))
    for message in messages:
        await conversations.append_messages(message.thread_id, [message])
    memory = Memory(MemoryOptions(observational_memory=options))
    memory.attach(conversations)
    engine = memory.observational_memory()
    llm = RecordingLLM()
    ctx = CycleContext(llm, await llm.resolve("openai/gpt-4o-mini"), "t", None, lambda part, durable=False: None)
    return memory, engine, ctx


anyio = pytest.mark.anyio


@anyio
async def test_an_observation_cycle_is_one_group_ranging_over_its_visible_messages(libsql: LibSQLStore) -> None:
    messages = [data_message("d0", 0), text_message("m1", "user", FACT, 1), text_message("m2", "assistant", "Noted.", 2),
                text_message("m3", "user", "We leave in June.", 3), data_message("d4", 4)]
    memory, engine, ctx = await om_setup(libsql, messages, {"retrieval": True})
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    first = await engine.observe(ctx, record, messages, 500)
    second_batch = [text_message("m5", "assistant", "Have a good trip.", 5), data_message("d6", 6)]
    await memory.store.append_messages("t", second_batch)
    second = await engine.observe(ctx, first, second_batch, 500)
    groups = parse_groups(second.active_observations)
    assert [g.range for g in groups] == ["m1:m3", "m5:m5"]  # the data-only messages are no ends
    assert all(HEX16.match(g.id) for g in groups) and groups[0].id != groups[1].id
    assert "Ada Lovelace" in groups[0].content and groups[0].kind is None
    assert second.active_observations.startswith(f'<observation-group id="{groups[0].id}" range="m1:m3">\n')
    assert "--- message boundary" in second.active_observations.split("</observation-group>")[1]
    # without retrieval nothing is wrapped
    plain = await om_setup_plain(libsql)
    assert "<observation-group" not in plain


async def om_setup_plain(db: LibSQLStore) -> str:
    messages = [text_message("p1", "user", FACT, 1, thread="plain")]
    memory, engine, ctx = await om_setup(db, messages, {})
    record = await engine.records.initialize(scope="thread", thread_id="plain", resource_id="r", config={},
                                             timezone="UTC")
    observed = await engine.observe(ctx, record, messages, 500)
    return observed.active_observations


@anyio
async def test_reflection_reads_the_log_without_tags_and_is_one_reflection_group_over_the_sources(
        libsql: LibSQLStore) -> None:
    messages = [text_message(f"m{i}", "user" if i % 2 == 0 else "assistant",
                             f"{FACT} Day {i} of the diary, with some small talk about the weather.", i)
                for i in range(10)]
    memory, engine, ctx = await om_setup(libsql, messages, {"retrieval": True,
                                                            "reflection": {"observationTokens": 150}})
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    record = await engine.observe(ctx, record, messages[:5], 500)
    record = await engine.observe(ctx, record, messages[5:], 500)
    assert [g.range for g in parse_groups(record.active_observations)] == ["m0:m4", "m5:m9"]
    reflected = await engine.maybe_reflect(ctx, record)
    assert reflected.generation_count == 1
    [group] = parse_groups(reflected.active_observations)
    assert (group.range, group.kind) == ("m0:m9", "reflection") and HEX16.match(group.id)
    assert reflected.active_observations.startswith(f'<observation-group id="{group.id}" range="m0:m9" '
                                                    'kind="reflection">')
    reflector_prompts = [r.messages[-1]["content"] for r in ctx.llm.requests if "OBSERVATIONS TO REFLECT ON"
                         in r.messages[-1]["content"]]
    assert reflector_prompts and all("observation-group" not in p for p in reflector_prompts)
    assert "Ada Lovelace" in reflector_prompts[0]


def test_group_sections_of_a_reflection_map_back_to_their_sources() -> None:
    source = "\n\n".join([wrap_group("* 🔴 User lives in Leeds.", "a1:a4", group_id="aaaa000000000001"),
                          wrap_group("* 🔴 User keeps bees.\n* 🟢 Bees are calm.", "b1:b3",
                                     group_id="bbbb000000000002"),
                          wrap_group("* 🔴 User plans a trip.", "c1:c9", group_id="cccc000000000003")])
    reflection = ("## Group `aaaa000000000001`\n_range: `a1:a4`_\n\n* 🔴 User lives in Leeds (since 2020).\n\n"
                  "## Group `new`\n* 🔴 User keeps bees.\n* 🔴 User plans a trip.")
    first, second = parse_groups(rewrap_reflection(reflection, source))
    assert (first.id, first.range, first.kind) == ("aaaa000000000001", "a1:a4", "reflection")
    assert first.content == "* 🔴 User lives in Leeds (since 2020)."  # the _range_ line is not content
    assert second.range == "b1:c9" and HEX16.match(second.id)  # lines shared with two sources: their span
    assert rewrap_reflection("* 🔴 Just facts.", "no groups here") == "* 🔴 Just facts."
    assert strip_groups(source).startswith("* 🔴 User lives in Leeds.\n\n* 🔴 User keeps bees.")
    assert "observation-group" not in reflector_messages(source, level=1)[0]["content"]
    assert message_range([data_message("x", 1)]) == "x:x"  # nothing visible: all of them


# -- what the actor sees -------------------------------------------------------------------


def test_the_actor_sees_each_group_with_its_range_and_the_recall_instructions() -> None:
    from datetime import datetime, timezone

    log = wrap_group("Date: Jan 1, 2026\n* 🔴 (10:00) User stated: [pinned] their name is Ada", "m1:m3",
                     group_id="0123456789abcdef")
    instructions = retrieval_instructions(RetrievalConfig(instructions="Prefer the newest thread."))
    messages = build_context_system_messages(log, now=datetime(2026, 1, 2, tzinfo=timezone.utc),
                                             retrieval_instructions=instructions)
    assert messages[0].endswith(instructions) and messages[1] == "<observations>"
    assert "## Group `0123456789abcdef`\n_range: `m1:m3`_\n\nDate: Jan 1, 2026 (yesterday)" in messages[2]
    assert "[pinned]" in messages[2]  # not optimised: retrieval keeps the text as the groups hold it
    assert "<observation-group" not in "".join(messages[1:])
    assert instructions.endswith(f"{ADDITIONAL_GUIDANCE_HEADING}\nPrefer the newest thread.")
    for needed in ("range", "cursor", 'page: -1', "partIndex", "nextCharOffset", "charOffset", 'detail: "high"',
                   'mode: "threads"', 'mode: "search"', "not needed", "another conversation"):
        assert needed in instructions, needed
    thread_only = retrieval_instructions(RetrievalConfig(scope="thread"))
    assert "limited to the current conversation thread" in thread_only and ADDITIONAL_GUIDANCE_HEADING not in thread_only


@anyio
async def test_every_step_gets_the_instructions_and_the_recall_tool(libsql: LibSQLStore) -> None:
    messages = [text_message("m1", "user", FACT, 1), text_message("m2", "assistant", "Noted.", 2)]
    memory, engine, ctx = await om_setup(libsql, messages, {"retrieval": {"instructions": "Recall often."}})
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    await engine.observe(ctx, record, messages, 500)
    await memory.store.append_messages("t", [text_message("m3", "user", "What did I say?", 3)])
    [processor] = memory.input_processors()
    thread = await memory.store.get_thread("t")
    step = StepContext("chat-agent", "run", "You are helpful.", thread, "r")
    for index in range(2):
        step.begin_step(index)
        await processor.process_step(step)
        system = [m["content"] for m in step.system]
        assert "## Recall: reading the original messages" in system[1] and "Recall often." in system[1]
        assert any("## Group `" in s and "_range: `m1:m2`_" in s for s in system)
        assert "recall" in step.tools and step.tools["recall"].json_schema()["properties"]["mode"]
    # retrieval scope resource: the instructions come even before anything was observed
    fresh, _, _ = await om_setup(libsql, [text_message("n1", "user", "Hello", 1, thread="new")], {"retrieval": True})
    step = StepContext("chat-agent", "run", "You are helpful.", await fresh.store.get_thread("new"), "r")
    step.begin_step(0)
    await fresh.input_processors()[0].process_step(step)
    assert len(step.system) == 2 and "## Recall" in step.system[1]["content"] and "recall" in step.tools


# -- the recall tool -----------------------------------------------------------------------


def tool_invocation(call_id: str, name: str, args: dict[str, Any], result: Any) -> dict[str, Any]:
    return {"type": "tool-invocation", "toolInvocation": {"state": "result", "toolCallId": call_id, "toolName": name,
                                                          "args": args, "result": result}}


async def recall_setup(db: LibSQLStore, scope: str = "resource", vector: bool = False) -> tuple[Recall, Memory,
                                                                                              Any]:
    """Thread ``t`` (30 messages: m00..m29, a data-only one at m07, a long text at m12, a
    calculator call at m15, a huge part at m20), thread ``u`` and ``v`` of the same
    resource, thread ``x`` of another one. ``t``'s messages m00..m09 are an observation group."""
    messages = []
    for i in range(30):
        role = "user" if i % 2 == 0 else "assistant"
        if i == 7:
            messages.append(data_message("m07", 7))
            continue
        text = f"Message {i} about the garden." if i not in (12, 20) else (LONG if i == 20 else " ".join(
            ["The long story of the beehive."] * 60))
        message = text_message(f"m{i:02d}", role, text, i)
        if i == 15:
            message.content["parts"].append(tool_invocation("call_1", "calculator", {"expression": "6 * 7"},
                                                            {"expression": "6 * 7", "result": 42}))
        messages.append(message)
    messages += [text_message("u1", "user", "Plans for the Alps hiking trip.", 40, thread="u"),
                 text_message("v1", "user", "Shopping list: eggs.", 41, thread="v"),
                 text_message("x1", "user", "Secret Alps hiking notes of someone else.", 42, thread="x",
                              resource="other")]
    memory, engine, ctx = await om_setup(db, messages, {"retrieval": {"scope": scope, "vector": vector}})
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    await engine.observe(ctx, record, messages[:10], 500)
    recall = Recall(memory, engine, engine.options.retrieval)
    caller = Caller(await memory.store.get_thread("t"), "r")
    return recall, memory, caller


async def call(recall: Recall, caller: Caller, **args: Any) -> dict[str, Any]:
    return await recall.run(RecallInput.model_validate(args), caller)


def shown_ids(result: dict[str, Any]) -> list[str]:
    return re.findall(r"^\*\*\w+ \([^)]*\)\*\* \[([^\]]+)\]:$", result["messages"], re.M)


@anyio
async def test_messages_page_forward_and_back_from_a_cursor(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    forward = await call(recall, caller, cursor="m04", limit=4)
    assert shown_ids(forward) == ["m05", "m06", "m08", "m09"]  # the data-only m07 takes no room
    assert (forward["hasNextPage"], forward["hasPrevPage"], forward["count"], forward["page"]) == (True, False, 4, 1)
    assert "**user (2026-01-01 10:06:00Z)** [m06]:\n  [p0] Message 6 about the garden." in forward["messages"]
    page_two = await call(recall, caller, cursor="m04", limit=4, page=2)
    assert shown_ids(page_two) == ["m10", "m11", "m12", "m13"] and page_two["hasPrevPage"] is True
    back = await call(recall, caller, cursor="m04", page=-1, limit=3)
    assert shown_ids(back) == ["m01", "m02", "m03"] and back["hasPrevPage"] is True and back["hasNextPage"] is False
    first = await call(recall, caller, cursor="m04", page=-2, limit=3)
    assert shown_ids(first) == ["m00"] and first["hasPrevPage"] is False and first["hasNextPage"] is True
    # without a cursor: from the start, or back from the end
    start = await call(recall, caller, limit=2)
    assert shown_ids(start) == ["m00", "m01"] and start["cursor"] == "m00" and start["hasNextPage"] is True
    end = await call(recall, caller, anchor="end", limit=2)
    assert shown_ids(end) == ["m28", "m29"] and end["hasPrevPage"] is True and end["hasNextPage"] is False
    # a range is not a cursor
    ranged = await call(recall, caller, cursor="m00:m09")
    assert ranged["count"] == 0 and 'start="m00" or end="m09"' in ranged["messages"]


@anyio
async def test_low_detail_cuts_parts_with_a_hint_and_a_page_stays_within_its_budget(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    page = await call(recall, caller, cursor="m11", limit=1)
    [line] = [ln for ln in page["messages"].split("\n") if ln.startswith("  [p0]")]
    assert line.endswith('… [recall cursor="m12" partIndex=0 detail="high" for more]')  # user text, cut at 200
    assert page["truncated"] is False
    tools = await call(recall, caller, cursor="m14", limit=1)
    assert "[p1] [Tool Result: calculator]" in tools["messages"]
    only_tools = await call(recall, caller, cursor="m00", partType="tool-result", toolName="calculator")
    assert shown_ids(only_tools) == ["m15"] and "[p0]" not in only_tools["messages"]
    assert shown_ids(await call(recall, caller, cursor="m00", toolName="search")) == []
    full = await call(recall, caller, cursor="m15", limit=10)  # ten messages, one of them 3,000 words
    assert full["truncated"] is False and "partIndex=0 detail=\"high\" for more" in full["messages"]
    budget = await call(recall, caller, cursor="m12", detail="high")
    assert budget["truncated"] is False and "next message" in budget["messages"]
    huge = await call(recall, caller, cursor="m19", detail="high")
    assert shown_ids(huge) == ["m20"] and huge["truncated"] is True and huge["tokenOffset"] > 0
    assert 'charOffset=0 (then follow nextCharOffset)' in huge["messages"]


@anyio
async def test_one_part_is_read_whole_in_chunks_by_char_offset(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    result = await call(recall, caller, cursor="m15", partIndex=1)
    assert result["type"] == "tool-result" and '"result": 42' in result["text"] and result["truncated"] is False
    chunks, offset = [], 0
    while True:
        chunk = await call(recall, caller, cursor="m20", partIndex=0, charOffset=offset)
        assert chunk["charOffset"] == offset and chunk["messageId"] == "m20" and chunk["role"] == "user"
        chunks.append(chunk["text"])
        if "nextCharOffset" not in chunk:
            assert chunk["truncated"] is False
            break
        assert chunk["truncated"] is True and f'charOffset={chunk["nextCharOffset"]}' in chunk["note"]
        offset = chunk["nextCharOffset"]
    assert len(chunks) >= 2 and "".join(chunks) == LONG
    assert "no part 5" in (await call(recall, caller, cursor="m15", partIndex=5))["error"]
    assert "past the end" in (await call(recall, caller, cursor="m15", partIndex=0, charOffset=10_000))["error"]
    assert "need a cursor" in (await call(recall, caller, partIndex=0))["error"]


@anyio
async def test_threads_lists_the_resources_threads_with_the_current_one_marked(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    listed = await call(recall, caller, mode="threads")
    assert listed["count"] == 3 and listed["hasMore"] is False and listed["page"] == 0
    assert "- **About t** ← current\n  id: t\n  updated: " in listed["threads"]
    assert "id: u" in listed["threads"] and "id: v" in listed["threads"] and "id: x" not in listed["threads"]
    first = await call(recall, caller, mode="threads", limit=2)
    second = await call(recall, caller, mode="threads", limit=2, page=1)
    assert (first["count"], first["hasMore"], second["count"], second["hasMore"]) == (2, True, 1, False)
    assert (await call(recall, caller, mode="threads", before="2000-01-01"))["count"] == 0
    assert (await call(recall, caller, mode="threads", after="2000-01-01"))["count"] == 3
    assert "not a date" in (await call(recall, caller, mode="threads", before="last week"))["error"]
    other = await call(recall, caller, threadId="u")
    assert shown_ids(other) == ["u1"] and other["threadId"] == "u"


@anyio
async def test_search_finds_keywords_across_the_resource_and_reports_the_group(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    found = await call(recall, caller, mode="search", query="Alps hiking")
    assert found["count"] == 1 and found["searchMode"] == "keyword" and "note" not in found
    assert "- thread: u (About u)" in found["results"] and "Secret" not in found["results"]
    grouped = await call(recall, caller, mode="search", query="Message 3 about")
    group = parse_groups((await recall.engine.records.active("thread:t")).active_observations)[0]
    assert f"- observation group: {group.id}" in grouped["results"] and "range `m00:m09`" in grouped["results"]
    assert "- thread: t (About t) ← current" in grouped["results"] and "- score: 1.00" in grouped["results"]
    unobserved = await call(recall, caller, mode="search", query="Message 25 about")
    assert unobserved["count"] == 1 and "source: message m25 (assistant" in unobserved["results"]  # no group covers it yet
    assert (await call(recall, caller, mode="search", query="zeppelin"))["count"] == 0
    assert "needs a query" in (await call(recall, caller, mode="search"))["error"]
    # the turn's own question is not a hit for itself
    asking = Caller(caller.thread, "r", frozenset({"u1"}))
    assert (await recall.run(RecallInput(mode="search", query="Alps hiking"), asking))["count"] == 0


@anyio
async def test_search_by_meaning_falls_back_to_keywords_when_unavailable(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql, vector=True)  # a memory without an embedder
    found = await call(recall, caller, mode="search", query="Alps hiking")
    assert found["searchMode"] == "keyword" and found["count"] == 1
    assert "Search by meaning is unavailable" in found["note"]


@anyio
async def test_thread_scope_reads_the_current_thread_only(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql, scope="thread")
    assert shown_ids(await call(recall, caller, cursor="m00", limit=1)) == ["m01"]
    refused = await call(recall, caller, cursor="u1")
    assert "limited to the current thread" in refused["error"] and "Alps" not in json.dumps(refused)
    assert "limited to the current thread" in (await call(recall, caller, threadId="u"))["error"]
    assert "limited to the current thread" in (await call(recall, caller, mode="threads", threadId="u"))["note"]
    listed = await call(recall, caller, mode="threads")
    assert listed["count"] == 1 and "← current" in listed["threads"] and "id: u" not in listed["threads"]
    searched = await call(recall, caller, mode="search", query="Alps hiking")
    assert searched["count"] == 0
    assert (await call(recall, caller, mode="search", query="Message 3 about"))["count"] == 1
    assert (await call(recall, caller, threadId="current", limit=1))["threadId"] == "t"


@anyio
async def test_another_resources_thread_or_cursor_reads_as_not_found(libsql: LibSQLStore) -> None:
    recall, _, caller = await recall_setup(libsql)
    assert (await call(recall, caller, cursor="x1"))["error"] == 'Could not find message "x1".'
    assert (await call(recall, caller, cursor="nope"))["error"] == 'Could not find message "nope".'
    assert (await call(recall, caller, cursor="x1", partIndex=0))["error"] == 'Could not find message "x1".'
    assert "was not found" in (await call(recall, caller, threadId="x"))["error"]
    assert "was not found" in (await call(recall, caller, threadId="x", mode="search", query="Alps"))["error"]
    assert "not in thread" in (await call(recall, caller, threadId="u", cursor="m03"))["error"]
    # a cursor of another thread of the same resource pages in that thread
    assert shown_ids(await call(recall, caller, cursor="u1", page=-1)) == []


# -- through a live gateway ----------------------------------------------------------------


def tool_result(text: str) -> dict[str, Any]:
    assert "The recall tool returned: " in text, text
    return json.loads(text.split("The recall tool returned: ", 1)[1].rstrip("."))


def test_the_model_calls_recall_in_a_real_turn_and_reads_what_was_observed(tmp_path: Path) -> None:
    options = {"retrieval": True, "observation": {"messageTokens": 300, "bufferTokens": False},
               "reflection": {"observationTokens": 5000}}
    settings = Settings(data_dir=tmp_path, telemetry=False, om_options=options)
    with LiveApp(create_app("gateway", settings)) as server:
        results = [turn(server, "trip", f"t{i}", f"Turn {i}. {FACT}") for i in range(1, 6)]
        assert any(c["type"] == "data-om-observation-end" for r in results for c in r["chunks"])
        with sqlite3.connect(tmp_path / "dev-server.db") as conn:
            [(log,)] = conn.execute("SELECT active_observations FROM mastra_observational_memory"
                                    " WHERE lookup_key = 'thread:trip'").fetchall()
        group = parse_groups(log)[0]
        assert group.start == "t1" and HEX16.match(group.id)  # the first user message of the thread
        listed = tool_result(reply_text(turn(server, "trip", "t-threads", 'call recall with {"mode": "threads"}')))
        assert listed["count"] == 1 and "id: trip" in listed["threads"] and "← current" in listed["threads"]
        paged = tool_result(reply_text(turn(server, "trip", "t-page", 'call recall with {"cursor": "t1", "limit": 2}')))
        assert paged["count"] == 2 and "[t2]:" in paged["messages"] and "Turn 2." in paged["messages"]


@anyio
async def test_search_by_meaning_reports_the_group_holding_each_hit(libsql: LibSQLStore) -> None:
    from app.llm.embeddings import local_embedder
    from app.recall.service import SemanticIndex

    texts = ["The weather was grey all week.", FACT, "Our kettle broke again.", "Football on Sunday.",
             "I repainted the kitchen.", "Dinner was pasta."]
    messages = [text_message(f"m{i}", "user" if i % 2 == 0 else "assistant", text, i) for i, text in enumerate(texts)]
    memory, engine, ctx = await om_setup(libsql, messages, {"retrieval": {"vector": True}})
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    record = await engine.observe(ctx, record, messages[:3], 500)
    memory.semantic_index = index = SemanticIndex(libsql, local_embedder())
    try:
        await index.start()
        assert await index.ready()
        await index.indexer.settled()
        recall = Recall(memory, engine, engine.options.retrieval)
        found = await recall.run(RecallInput(mode="search", query="mountain holiday with the children", limit=1),
                                 Caller(await memory.store.get_thread("t"), "r"))
    finally:
        await index.stop()
    [group] = parse_groups(record.active_observations)
    assert found["searchMode"] == "vector" and found["count"] == 1 and "note" not in found
    assert f"- observation group: {group.id}" in found["results"] and "range `m0:m2`" in found["results"]
    assert "Alps" in found["results"] and re.search(r"- score: 0\.\d\d", found["results"])


@anyio
async def test_a_buffered_reflection_never_cuts_a_group_in_two(libsql: LibSQLStore) -> None:
    from app.background import BackgroundWork
    from app.om.buffering import Buffering, PartSink
    from app.om.groups import cut_points

    reply = "That sounds like a wonderful plan for the whole family, and I would be glad to help you prepare."
    messages = [text_message(f"m{i:02d}", "user" if i % 2 == 0 else "assistant",
                             f"Day {i}: {FACT}" if i % 2 == 0 else reply, i) for i in range(18)]
    memory, engine, ctx = await om_setup(libsql, messages, {"retrieval": True,
                                                            "reflection": {"observationTokens": 700}})
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    for batch in (messages[:6], messages[6:12], messages[12:]):
        record = await engine.observe(ctx, record, batch, 500)
    lines = record.active_observations.split("\n")
    planned = int(engine.options.reflection.activation_point // (record.observation_token_count / len(lines)))
    assert planned not in cut_points(lines)  # the plain line count would split a group
    work = BackgroundWork(workers=1)
    await work.start()
    assert await Buffering(engine, work).start_reflection(ctx, record, PartSink(engine.records, "t"))
    await work.drain()
    buffered = await engine.records.active("thread:t")
    assert buffered.buffered_reflection and buffered.reflected_observation_line_count in cut_points(lines)
    _, new = await engine.records.activate_buffered_reflection(buffered.id)
    groups = parse_groups(new.active_observations)
    assert new.active_observations.count("<observation-group") == new.active_observations.count(
        "</observation-group>") == len(groups)
    assert groups[0].kind == "reflection" and groups[0].start == "m00" and groups[-1].range == "m12:m17"


@anyio
async def test_resource_scope_keeps_a_group_per_thread_and_search_finds_it(libsql: LibSQLStore) -> None:
    from app.om.resource import observe_resource

    trip = [text_message("a1", "user", FACT, 1, thread="trip"), text_message("a2", "assistant", "Lovely.", 2,
                                                                             thread="trip")]
    chores = [text_message("b1", "user", "Remind me to water the ferns on Friday.", 3, thread="chores")]
    memory, engine, ctx = await om_setup(libsql, trip + chores, {"scope": "resource", "retrieval": True})
    record = await engine.records.initialize(scope="resource", thread_id=None, resource_id="r", config={},
                                             timezone="UTC")
    observed = await observe_resource(engine, ctx, record, {"trip": trip, "chores": chores})
    log = observed.active_observations
    assert re.search(r'<thread id="trip">\n<observation-group id="[0-9a-f]{16}" range="a1:a2">', log)
    assert re.search(r'<thread id="chores">\n<observation-group id="[0-9a-f]{16}" range="b1:b1">', log)
    recall = Recall(memory, engine, engine.options.retrieval)
    found = await recall.run(RecallInput(mode="search", query="water the ferns"),
                             Caller(await memory.store.get_thread("trip"), "r"))
    [group] = [g for g in parse_groups(log) if g.range == "b1:b1"]
    assert found["count"] == 1 and f"- observation group: {group.id}" in found["results"]
    assert "- thread: chores (About chores)\n" in found["results"]
