"""Observational Memory's retrieval mode, its observation groups (issue 13, item 6;
docs/observational-memory.md#reflection, #retrieval).

On real SQLite files with the built-in local model as observer and reflector: the
``retrieval`` options and their checks, observation groups written by a real observation
cycle (range = the first and last visible message), reflection re-wrapped into groups (a
buffered one never cuts a group), and the groups, the recall instructions and the tool in
the actor's step. The ``recall`` tool itself: tests/test_om_recall.py.
"""

from __future__ import annotations

import re
from datetime import UTC
from typing import Any

import pytest

from dev_server.kernel.processors import StepContext
from dev_server.memory.memory import MemoryOptions
from dev_server.om.options.config import RetrievalConfig, describe_om, observational_memory_options
from dev_server.om.prompting.context import build_context_system_messages
from dev_server.om.prompting.groups import message_range, parse_groups, rewrap_reflection, strip_groups, wrap_group
from dev_server.om.prompting.prompts import reflector_messages
from dev_server.om.retrieval.instructions import ADDITIONAL_GUIDANCE_HEADING, retrieval_instructions
from dev_server.settings import Settings
from dev_server.storage.libsql import LibSQLStore
from tests.kit.builders import stored_data as data_message
from tests.kit.builders import stored_text as text_message
from tests.kit.om import FACT, HEX16
from tests.kit.om_agents import om_setup

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


anyio = pytest.mark.anyio


@anyio
async def test_an_observation_cycle_is_one_group_ranging_over_its_visible_messages(libsql: LibSQLStore) -> None:
    messages = [data_message("d0", 0), text_message("m1", "user", FACT, 1),
                text_message("m2", "assistant", "Noted.", 2), text_message("m3", "user", "We leave in June.", 3),
                data_message("d4", 4)]
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
    from datetime import datetime

    log = wrap_group("Date: Jan 1, 2026\n* 🔴 (10:00) User stated: [pinned] their name is Ada", "m1:m3",
                     group_id="0123456789abcdef")
    instructions = retrieval_instructions(RetrievalConfig(instructions="Prefer the newest thread."))
    messages = build_context_system_messages(log, now=datetime(2026, 1, 2, tzinfo=UTC),
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
    assert ("limited to the current conversation thread" in thread_only
            and ADDITIONAL_GUIDANCE_HEADING not in thread_only)


@anyio
async def test_every_step_gets_the_instructions_and_the_recall_tool(libsql: LibSQLStore) -> None:
    messages = [text_message("m1", "user", FACT, 1), text_message("m2", "assistant", "Noted.", 2)]
    memory, engine, ctx = await om_setup(libsql, messages, {"retrieval": {"instructions": "Recall often."}})
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    await engine.observe(ctx, record, messages, 500)
    await memory.store.append_messages("t", [text_message("m3", "user", "What did I say?", 3)])
    [processor, _] = memory.processors  # OM, its token estimates
    thread = await memory.store.get_thread("t")
    step = StepContext("chat-agent", "run", "You are helpful.", thread, "r")
    processor = processor.start_turn(step)
    for index in range(2):
        step.begin_step(index)
        await processor.before_step(step)
        system = [m["content"] for m in step.system]
        assert "## Recall: reading the original messages" in system[1] and "Recall often." in system[1]
        assert any("## Group `" in s and "_range: `m1:m2`_" in s for s in system)
        assert "recall" in step.tools and step.tools["recall"].json_schema()["properties"]["mode"]
    # retrieval scope resource: the instructions come even before anything was observed
    fresh, _, _ = await om_setup(libsql, [text_message("n1", "user", "Hello", 1, thread="new")], {"retrieval": True})
    step = StepContext("chat-agent", "run", "You are helpful.", await fresh.store.get_thread("new"), "r")
    step.begin_step(0)
    await fresh.processors[0].start_turn(step).before_step(step)
    assert len(step.system) == 2 and "## Recall" in step.system[1]["content"] and "recall" in step.tools


# -- the recall tool -----------------------------------------------------------------------



@anyio
async def test_a_buffered_reflection_never_cuts_a_group_in_two(libsql: LibSQLStore) -> None:
    from dev_server.background import BackgroundWork
    from dev_server.om.engine.buffering import Buffering, PartSink
    from dev_server.om.prompting.groups import cut_points

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
