"""A reply's steps as stored: a ``step-start`` part only between two steps, as Mastra stores
a reply (none before the first), while the stream still opens every step with its start.
Replies stored before (a ``step-start`` at the head of the first step) are rewritten by
migration 0013, so Observational Memory counts what Mastra would count."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dev_server.kernel.clock import ManualClock
from dev_server.kernel.convert import assistant_message
from dev_server.kernel.events import StepStart
from dev_server.kernel.loop import ReplyParts, run_steps, step_count
from dev_server.kernel.processors import StepContext, TurnProcessors, start_turn
from dev_server.kernel.tools import Tool, ToolContext
from dev_server.llm.scripted import Call, Reply, ScriptedModel
from dev_server.om.tokens.counting import count_message, estimate_tokens
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.libsql import LibSQLStore
from tests.kit.builders import database_at_version


async def echo(arguments: Any, context: ToolContext) -> dict[str, Any]:
    return {"echoed": arguments["text"]}


ECHO = Tool("echo", "Echo the text back", function=echo,
            schema={"type": "object", "properties": {"text": {"type": "string"}}})


async def turn(model: ScriptedModel, reply: ReplyParts | None = None,
               clock: ManualClock | None = None) -> tuple[list[Any], ReplyParts]:
    step = StepContext("agent", "run", "You are terse.", thread=None, resource_id=None, agent_tools=(ECHO,))
    reply = reply if reply is not None else ReplyParts()
    resolved = await model.resolve("openai/gpt-4o-mini")
    events = [e async for e in run_steps(model, resolved, step, TurnProcessors(start_turn([], step)), 5, reply,
                                         clock=clock)]
    return events, reply


@pytest.mark.anyio
async def test_a_step_start_carries_its_time_and_the_model_of_the_step_it_opens_as_mastras_does() -> None:
    clock = ManualClock("2026-01-05T09:00:00Z")
    model = ScriptedModel([Reply(tool_calls=[Call("echo", {"text": "hi"}, id="call-1")]),
                           Reply(tool_calls=[Call("echo", {"text": "again"}, id="call-2")]), Reply("done.")])
    _, reply = await turn(model, clock=clock)
    starts = [p for p in reply.parts if p["type"] == "step-start"]
    assert starts == [{"type": "step-start", "createdAt": 1767603600000, "model": "openai/gpt-4o-mini"}] * 2
    # Mastra's counter prices the part by its JSON: its time and model count
    assert count_message({"role": "assistant", "content": {"parts": starts[:1]}}, cache=False) > \
        count_message({"role": "assistant", "content": {"parts": [{"type": "step-start"}]}}, cache=False)
    # the reply so far, sealed before it is split off: its last part carries sealedAt
    sealed = ReplyParts(parts=[dict(p) for p in reply.parts[:2]], clock=clock)
    sealed.seal()
    assert sealed.parts[-1]["metadata"] == {"mastra": {"sealedAt": 1767603600000}}


@pytest.mark.anyio
async def test_a_reply_stores_a_step_start_only_between_its_steps_while_every_step_streams_its_start() -> None:
    events, one = await turn(ScriptedModel([Reply("Hello there.")]))
    assert [p["type"] for p in one.parts] == ["text"]
    assert [e.index for e in events if isinstance(e, StepStart)] == [0]

    tool_turn = ScriptedModel([Reply(tool_calls=[Call("echo", {"text": "hi"}, id="call-1")]), Reply("done.")])
    events, two = await turn(tool_turn)
    assert [p["type"] for p in two.parts] == ["tool-invocation", "step-start", "text"]
    assert [e.index for e in events if isinstance(e, StepStart)] == [0, 1]  # the wire's start-step, per step


@pytest.mark.anyio
async def test_a_continued_reply_counts_the_steps_it_already_holds() -> None:
    new_form = [{"type": "tool-invocation", "toolInvocation": {"state": "result", "toolCallId": "c"}}]
    legacy = [{"type": "data-om-status", "data": {}}, {"type": "step-start"}, *new_form]
    assert step_count(new_form) == step_count(legacy) == 1
    assert step_count([{"type": "data-om-observation-end", "data": {}}]) == 0
    assert step_count([*new_form, {"type": "step-start"}, {"type": "text", "text": "x"}]) == 2

    _, continued = await turn(ScriptedModel([Reply("It is done.")]), ReplyParts(parts=list(new_form)))
    assert [p["type"] for p in continued.parts] == ["tool-invocation", "step-start", "text"]
    assert continued.steps == 2


def test_om_counts_a_one_step_reply_without_a_step_start() -> None:
    """Mastra's counter prices a step-start part as its JSON (7 tokens); a reply Mastra stores
    has none before its first step, so a one-step reply costs its role, text and framing only."""
    reply = assistant_message("a1", "t", "r", [{"type": "text", "text": "Hello there, how are you?"}],
                              "2026-01-01T00:00:00.000Z", {})
    assert count_message(reply) == round(estimate_tokens("assistant") + estimate_tokens("Hello there, how are you?")
                                         + 3.8)
    legacy = assistant_message("a0", "t", "r", [{"type": "step-start"}, *reply.content["parts"]],
                               "2026-01-01T00:00:00.000Z", {})
    assert count_message(legacy) == count_message(reply) + 7


@pytest.mark.anyio
async def test_replies_stored_with_a_leading_step_start_lose_it_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    database_at_version(path, 12)
    text = {"type": "text", "text": "the zebra answer"}
    marker = {"type": "data-om-observation-end", "data": {"cycleId": "c"}}
    tool = {"type": "tool-invocation", "toolInvocation": {"state": "result", "toolCallId": "c1", "toolName": "x"}}
    rows = {
        "a1": ("assistant", [{"type": "step-start"}, text]),
        "a2": ("assistant", [marker, {"type": "step-start"}, tool, {"type": "step-start"}, text]),
        "a3": ("assistant", [tool, {"type": "step-start"}, text]),  # already Mastra's form
        "u1": ("user", [{"type": "step-start"}, text]),  # not a reply: left alone
    }
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO threads (id, resource_id, created_at, updated_at) VALUES"
                     " ('old', 'r', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')")
        for minute, (message_id, (role, parts)) in enumerate(rows.items()):
            content = {"format": 2, "parts": parts, "content": "the zebra answer"}
            conn.execute("INSERT INTO messages (id, thread_id, resource_id, role, content, created_at)"
                         " VALUES (?, 'old', 'r', ?, ?, ?)",
                         (message_id, role, json.dumps(content), f"2026-01-01T00:0{minute}:00.000Z"))
    store = LibSQLStore(f"file:{path}")
    await store.open()
    try:
        conversations = ConversationStore(store)
        stored = {m.id: [p["type"] for p in m.content["parts"]] for m in
                  await conversations.messages_since("old", None)}
        assert stored == {"a1": ["text"], "a2": ["data-om-observation-end", "tool-invocation", "step-start", "text"],
                          "a3": ["tool-invocation", "step-start", "text"], "u1": ["step-start", "text"]}
        hits = await conversations.search_messages("zebra", resource_id="r", thread_id="old", limit=10)
        assert len(hits) == 4  # the search index followed the rewrite
    finally:
        await store.close()
