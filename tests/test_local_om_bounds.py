"""The local observer and reflector stay within a real model's bounds (issue 31 item 2).

An observer call writes a few thousand tokens whatever it reads, keeping the newest and
most salient observations and counting the rest; a reflection writes less at every
compression level and lands under the reflection threshold; both are deterministic. And so
Observational Memory on a long offline conversation keeps its log under the threshold, cycle
after cycle (``ObservationEngine`` on a real SQLite file, the local model as observer and
reflector). Requests are built as OM builds them and answers read as OM reads them.
"""

from __future__ import annotations

import re
from datetime import UTC
from functools import cache
from typing import Any

import pytest

from dev_server.kernel.messages import Message, Thread
from dev_server.llm import LiteLLMClient
from dev_server.llm.local_model import LocalReply, compose_reply
from dev_server.llm.local_observer import OBSERVATION_TOKENS, WORKING_MEMORY_TOKENS, observer_answer
from dev_server.llm.local_om_budget import weight
from dev_server.om.engine.cycle_context import CycleContext
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om.engine.output_check import distinct_observations, observer_problem, reflection_problem
from dev_server.om.engine.record_store import om_record_store
from dev_server.om.options.config import observational_memory_options
from dev_server.om.options.extractors import working_memory_extractor
from dev_server.om.prompting.parsing import parse_observer_output, parse_reflector_output
from dev_server.om.prompting.prompts import (
    observer_messages,
    observer_system_prompt,
    reflector_messages,
    reflector_system_prompt,
)
from dev_server.om.prompting.transcript import format_transcript
from dev_server.om.tokens.counting import count_messages, estimate_tokens
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.kit.om import generated_conversation, generated_log

NAME = "My name is Ada Lovelace and I live in Leeds with two cats."
LINE = re.compile(r"^\s*\* (?:🔴|🟡|🟢|✅) \(\d{2}:\d{2}\) \S")
HINTS_TOKENS = 300  # what the hint sections add to a call's observations at most


def said(text: str, when: str, role: str = "user", id: str = "name") -> Message:
    return Message(id, "t", "r", role, {"format": 2, "parts": [{"type": "text", "text": text}], "content": text}, when)


def observer_request(messages: list[Message]) -> list[dict[str, Any]]:
    transcript, _ = format_transcript(messages, tz=UTC)
    return [{"role": "system", "content": observer_system_prompt()},
            *observer_messages(transcript, previous_observations=None, prior_current_task=None,
                               prior_suggested_response=None)]


@cache
def huge() -> tuple[list[Message], list[dict[str, Any]], LocalReply]:
    """A conversation of over 1 M tokens, the user's name said in its first message only;
    the observer request and the local model's reply."""
    messages = [said(NAME, "2024-12-31T09:00:00.000Z"), *generated_conversation(27_000)]
    request = observer_request(messages)
    return messages, request, compose_reply(request)


def test_an_observer_call_on_a_million_tokens_writes_a_few_thousand() -> None:
    messages, _, reply = huge()
    assert reply.input_tokens > 1_000_000 and not reply.fail and reply.output_tokens == estimate_tokens(reply.text)
    assert reply.output_tokens <= OBSERVATION_TOKENS + HINTS_TOKENS
    parsed = parse_observer_output(reply.text)
    assert observer_problem(parsed.observations, parsed.degenerate) is None
    assert estimate_tokens(parsed.observations) <= OBSERVATION_TOKENS
    lines = parsed.observations.split("\n")
    assert lines[0] == "Date: Dec 31, 2024" and all(LINE.match(line) for line in lines if not line.startswith("Date:"))
    assert {mark for line in lines for mark in "🔴🟡🟢✅" if mark in line} == set("🔴🟡🟢✅")
    # the newest exchange in full, the user's name from the oldest message, and the rest counted, not lost
    last_reply, last_user = messages[-1].content["content"], messages[-2].content["content"]
    assert lines[-1] == f'* 🟢 (17:57) Assistant replied: "{last_reply}"'
    assert f'User stated: "{NAME}"' in parsed.observations
    tool_calls = sum(1 for m in messages for p in m.content["parts"] if p["type"] == "tool-invocation")
    assert sum(weight(line) for line in lines if not line.startswith("Date:")) == len(messages) + tool_calls
    assert "Earlier: " in parsed.observations and parsed.current_task == f'Respond to: "{last_user}"'
    # what the observations kept is what the local model, as the actor, then remembers
    actor = compose_reply([{"role": "system", "content": parsed.observations},
                           {"role": "user", "content": "What is my name?"}])
    assert "Your name is Ada Lovelace." in actor.text


def test_an_observer_call_is_deterministic() -> None:
    _, request, reply = huge()
    assert observer_answer(request) == reply.text


def test_the_working_memory_section_keeps_its_newest_items_within_its_budget() -> None:
    messages = [said(NAME, "2024-12-31T09:00:00.000Z"), *generated_conversation(2_000)]
    transcript, _ = format_transcript(messages, tz=UTC)
    prior = "# About the user\n- Likes tea"
    request = [{"role": "system", "content": observer_system_prompt(extractors=[working_memory_extractor(None)])},
               *observer_messages(transcript, previous_observations=None, prior_current_task=None,
                                  prior_suggested_response=None, prior_extracted=[("working-memory", prior)])]
    document = parse_observer_output(observer_answer(request), ["working-memory"]).extracted["working-memory"]
    items = document.split("\n")
    assert items[0] == "# About the user" and estimate_tokens(document) <= WORKING_MEMORY_TOKENS + 20
    assert items[-1] == f"- {messages[-2].content['content']}" and "- Likes tea" not in items  # the oldest go


def reflect(log: str, level: int) -> str:
    request = [{"role": "system", "content": reflector_system_prompt()}, *reflector_messages(log, level=level)]
    return parse_reflector_output(compose_reply(request).text).observations


def test_a_big_log_is_reflected_under_the_threshold_smaller_at_every_level() -> None:
    log = generated_log(5_000)
    source = estimate_tokens(log)
    assert source > 100_000
    newest_fact = next(line for line in reversed(log.split("\n")) if "🔴" in line)
    reflections = [reflect(log, level) for level in range(1, 5)]  # the local model starts at level 1
    sizes = [estimate_tokens(text) for text in reflections]
    assert sizes[0] < 40_000 and sizes == sorted(set(sizes), reverse=True)  # under Mastra's default, then smaller
    for text, tokens in zip(reflections, sizes, strict=True):
        assert reflection_problem(text, False, tokens=tokens,
                                  source_tokens=estimate_tokens(distinct_observations(log))) is None
        assert text.startswith("Date: ") and "✅" in text and "Earlier: " in text
        assert newest_fact in text
    assert reflect(log, 3) == reflections[2]


@pytest.fixture
async def engine(sqlite_store: LibSQLStore):
    await ConversationStore(sqlite_store).save_thread(Thread("t", "r"))
    engine = ObservationEngine(observational_memory_options({"reflection": {"observationTokens": 10_000}}),
                               om_record_store(sqlite_store))
    record = await engine.records.initialize(scope="thread", thread_id="t", resource_id="r", config={},
                                             timezone="UTC")
    llm = LiteLLMClient(force_local=True)
    parts: list[Any] = []
    ctx = CycleContext(llm, await llm.resolve("openai/gpt-4o-mini"), "t", None,
                       lambda part, durable=False: parts.append(part))
    return engine, record, ctx, parts


@pytest.mark.anyio
async def test_each_retry_of_a_reflection_is_smaller_until_it_fits(engine) -> None:
    engine, record, ctx, parts = engine
    batch = [said(NAME, "2024-12-31T09:00:00.000Z"), *generated_conversation(4_000)]
    observed = await engine.observe(ctx, record, batch, count_messages(batch))
    assert observed is not None and observed.observation_token_count > 2_000
    parts.clear()
    target = round(0.2 * observed.observation_token_count)
    reflected = await engine.reflect(ctx, observed, target)
    retried = [p.data["error"] for p in parts if p.name == "om-observation-failed"]
    sizes = [int(m.group(1)) for error in retried if (m := re.search(r"→ (\d+), target", error))]
    assert len(sizes) == len(retried) == 3 and all("retrying at level" in error for error in retried)
    assert reflected.generation_count == 1 and sizes == sorted(set(sizes), reverse=True)
    assert sizes[-1] > reflected.observation_token_count and reflected.observation_token_count < target
    assert "Ada Lovelace" in reflected.active_observations


@pytest.mark.anyio
async def test_a_long_offline_conversation_keeps_its_log_under_the_reflection_threshold(engine) -> None:
    """40 cycles of 200 messages each, every one observed and the log reflected when it
    reaches 10,000 tokens: the log never stays at or over the threshold, reflections keep
    coming, and what the user said about themselves in the first message is still there."""
    engine, record, ctx, _ = engine
    sizes, start = [], 0
    for cycle in range(40):
        batch = generated_conversation(200, start=start)
        if cycle == 0:
            batch.insert(0, said(NAME, "2024-12-31T09:00:00.000Z"))
        start += 200
        observed = await engine.observe(ctx, record, batch, count_messages(batch))
        assert observed is not None
        record = await engine.maybe_reflect(ctx, observed)
        sizes.append(record.observation_token_count)
    assert max(sizes) < 10_000 and record.generation_count >= 5
    assert "Ada Lovelace" in record.active_observations
    assert 'User stated: "Use the tracker to list the open tickets of Tundra sprint 3999."' in (
        record.active_observations)  # the newest statement
