"""Observational Memory decides at every step of a turn, as Mastra's does (issue 28, items 1, 3,
6 and 9; docs/observational-memory.md#decision-order), through a gateway in this process
(real uvicorn, a real SQLite file) with the scripted model at the provider seam and a clock
that moves 1 ms per read:

* each step recomputes ``data-om-status`` on the thread's unobserved messages plus the reply
  so far; a step that crosses a buffering interval hands the reply so far to the background
  observer, and the reply is split there (the handed part stored as a sealed message of its
  own, the rest of the reply in a new one); a later step that reaches the threshold
  activates the chunks, and that step's model sees only what is left;
* a threshold reached at a later step observes the reply so far synchronously, splits it,
  and the observed part leaves the model's view at once;
* after a synchronous observation the status counts nothing pending (the input kept in view
  is observed), and the actor gets that observation's current task, suggested response and
  extracted values in the same step;
* parts come in Mastra's order: a step's cycle parts, its status, the start of a background
  observer it started, then its ``start-step``; a background cycle that ends while the reply
  streams is streamed where it ended (here while a tool runs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dev_server.agents import chat_agent
from dev_server.agents.definition import AgentDefinition
from dev_server.kernel.clock import ManualClock
from dev_server.kernel.tools import Tool, ToolContext
from dev_server.llm.scripted import Call, Reply, ScriptedModel
from dev_server.memory.options import MemoryOptions
from dev_server.om.tokens.counting import count_message
from tests.kit.chat import turn
from tests.kit.om import FACT, parts, record_row, settled, stored_messages
from tests.kit.servers import InProcessServer, serve

THREAD = "steps"
FORECAST = {"place": "Chamonix", "days": [
    {"day": "Saturday", "high": 21, "low": 9,
     "summary": "sunny, light wind from the west, good visibility on the ridges"},
    {"day": "Sunday", "high": 18, "low": 8, "summary": "cloud building after noon, thunderstorms likely from 4 pm"}]}
TOOL_TURN = [Reply(tool_calls=[Call("forecast", {"place": "Chamonix"}, id="call-1")]),
             Reply(tool_calls=[Call("forecast", {"place": "Argentiere"}, id="call-2")]),
             "Saturday is the best day for the ridge."]


def forecast_tool(db: Path) -> Tool:
    """A forecast that answers once no background observer holds the thread's record: a
    buffering cycle started by the step then always ends while the tool runs."""
    async def forecast(arguments: Any, context: ToolContext) -> dict[str, Any]:
        deadline = time.monotonic() + 30
        while True:
            with sqlite3.connect(db) as conn:
                row = conn.execute("SELECT is_buffering_observation FROM mastra_observational_memory"
                                   " WHERE lookup_key = ?", (f"thread:{THREAD}",)).fetchone()
            if row is None or row[0] is None:
                return FORECAST
            assert time.monotonic() < deadline, "the buffering cycle never ended"
            await asyncio.sleep(0.01)

    return Tool("forecast", "The weather forecast for a place", function=forecast,
                schema={"type": "object", "properties": {"place": {"type": "string"}}})


def agent(options: dict[str, Any], db: Path) -> AgentDefinition:
    return dataclasses.replace(chat_agent.definition, tools=(forecast_tool(db),), memory=lambda: MemoryOptions(
        observational_memory=options))


@contextmanager
def gateway(data: Path, options: dict[str, Any], llm: ScriptedModel) -> Iterator[tuple[InProcessServer, ManualClock]]:
    clock = ManualClock("2026-01-05T09:00:00.000Z", tick=timedelta(milliseconds=1))
    # no DEV_SERVER_OM_* settings over the agent's own options
    with serve("gateway", data, inprocess=True, settings={"telemetry": False, "om_agents": ""}, llm=llm,
               agents=(agent(options, data / "dev-server.db"),), clock=clock) as server:
        yield server, clock


def chat(server: InProcessServer, clock: ManualClock, data: Path, texts: list[str], start: int = 0
         ) -> list[dict[str, Any]]:
    """One turn per text (user messages ``u<start>``, ...), a minute apart, each once its
    background work is done."""
    results = []
    for i, text in enumerate(texts, start=start):
        clock.advance(minutes=1)
        results.append(turn(server, THREAD, f"u{i}", text))
        if record(data / "dev-server.db", f"thread:{THREAD}"):  # thread scope: background work may run
            settled(data / "dev-server.db", THREAD)
    return results


def record(db: Path, key: str) -> dict[str, Any] | None:
    """The newest OM record of ``key`` (``thread:<id>``, ``resource:<id>``)."""
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM mastra_observational_memory WHERE lookup_key = ?"
                           " ORDER BY generation_count DESC LIMIT 1", (key,)).fetchone()
    return dict(row) if row else None


def opening(result: dict[str, Any]) -> list[list[str]]:
    """Per step, the chunk types streamed before and up to its ``start-step``; then the rest."""
    steps: list[list[str]] = [[]]
    for chunk in result["chunks"]:
        kind = chunk["type"]
        if kind in ("start", "text-delta", "tool-input-delta", "tool-input-start", "text-start", "text-end"):
            continue
        steps[-1].append(kind)
        if kind == "finish-step":
            steps.append([])
    return steps


def statuses(result: dict[str, Any]) -> list[dict[str, Any]]:
    return parts(result, "status")


def pending_of(status: dict[str, Any]) -> int:
    return status["windows"]["active"]["messages"]["tokens"]


def step_messages(llm: ScriptedModel, turn_index: int, counts: list[int]) -> list[list[dict[str, Any]]]:
    """The agent's requests of turn ``turn_index`` (``counts``: each turn's model calls)."""
    start = sum(counts[:turn_index])
    return [r.messages for r in llm.requests_for("agent")[start:start + counts[turn_index]]]


def said(messages: list[dict[str, Any]], text: str) -> bool:
    return any(text in str(m.get("content")) for m in messages if m["role"] != "system")


def test_a_tool_turn_decides_at_every_step_splits_the_buffered_reply_and_activates_at_a_later_step(
        tmp_path: Path) -> None:
    options = {"observation": {"messageTokens": 300, "bufferTokens": 100}, "reflection": {"observationTokens": 5000}}
    llm = ScriptedModel([*(f"Noted, point {i}." for i in range(3)), *TOOL_TURN])
    with gateway(tmp_path, options, llm) as (server, clock):
        texts = [f"Point {i}. {FACT}" for i in range(3)] + ["What is the weather for our trip?"]
        results = chat(server, clock, tmp_path, texts)
        # a retry of the tool turn is told the whole stored reply again, its split parts joined
        retried = turn(server, THREAD, "u3", texts[3])
    tool_turn = results[-1]
    first, second, third = statuses(tool_turn)
    assert [s["stepNumber"] for s in (first, second, third)] == [0, 1, 2]

    # step 1: the status counts the reply so far (step 0's call and result); the reply so far
    # is buffered, so it was split off there: stored, sealed, holding step 0's call
    db = tmp_path / "dev-server.db"
    messages = stored_messages(db, THREAD)
    replies = [m for m in messages if m.role == "assistant" and m.created_at > messages[-4].created_at]
    split_off, rest = replies[-2:]
    assert [p["type"] for p in split_off.content["parts"] if not p["type"].startswith("data-")] == [
        "tool-invocation", "step-start"]  # as Mastra's: the step-start of the step it was split before
    assert split_off.content["metadata"]["mastra"]["sealed"] is True
    step_start = [p for p in split_off.content["parts"] if not p["type"].startswith("data-")][-1]
    assert step_start["type"] == "step-start" and isinstance(step_start["createdAt"], int)
    assert isinstance(step_start["metadata"]["mastra"]["sealedAt"], int)
    # counted sealed, as Mastra's status counts it: the step-start is priced by its JSON,
    # its createdAt and sealedAt included
    unstamped = [p for p in split_off.content["parts"] if p["type"] != "step-start"] + [{"type": "step-start"}]
    plain = dataclasses.replace(split_off, content={**split_off.content, "parts": unstamped})
    assert count_message(split_off, cache=False) > count_message(plain, cache=False)
    assert pending_of(second) == pending_of(first) + count_message(split_off, cache=False)
    [started] = parts(tool_turn, "buffering-start")  # at step 1, on the reply so far
    activations = parts(tool_turn, "activation")
    chunks = json.loads(record_row(db, THREAD)["buffered_observation_chunks"] or "[]")
    holding = [c["cycleId"] for c in chunks if split_off.id in c["messageIds"]]
    assert holding == [started["cycleId"]] or started["cycleId"] in {a["cycleId"] for a in activations}

    # step 2: the window reached the threshold, the buffered chunks were activated, and the
    # model saw only the newest messages
    assert activations and all(a["triggeredBy"] == "threshold" for a in activations)
    assert pending_of(third) < pending_of(second) and third["windows"]["active"]["observations"]["tokens"] > 0
    step_1, step_2 = step_messages(llm, 3, [1, 1, 1, 3])[1:]
    assert said(step_1, "Point 0.") and not said(step_2, "Point 0.")
    assert said(step_2, "What is the weather for our trip?") and said(step_2, "thunderstorms likely")
    assert record_row(db, THREAD)["pending_message_tokens"] == pending_of(third)

    # the parts in Mastra's order: each step's cycle parts, its status, the start of a
    # background observer it started, then its start-step; the observer that ended while
    # step 1's tool ran is streamed there, before the tool's result
    step0, step1, step2, _ = opening(tool_turn)
    assert step0[:2] == ["data-om-status", "start-step"]
    assert step1[:3] == ["data-om-status", "data-om-buffering-start", "start-step"]
    assert step1[3:] == ["tool-input-available", "data-om-buffering-end", "tool-output-available", "finish-step"]
    assert step2[:step2.index("data-om-status")] == ["data-om-activation"] * len(activations)
    assert step2[step2.index("data-om-status") + 1] == "start-step"
    # stored where Mastra stores them: step 1 split the reply, so its buffering parts go onto the
    # part split off (the newest stored reply until step 2 stores the new one), after its
    # parts; the continuation holds step 2's, and as a message of its own it has no
    # step-start before its first step (Mastra's form)
    assert [p["type"] for p in split_off.content["parts"]] == [
        "tool-invocation", "step-start", "data-om-buffering-start", "data-om-buffering-end"]
    assert [p["type"] for p in rest.content["parts"]] == [
        "tool-invocation", "step-start", *["data-om-activation"] * len(activations), "text"]

    replayed = [c["type"] for c in retried["chunks"]]
    assert llm.pending == 0 and replayed.count("tool-output-available") == 2
    assert retried["message"]["id"] == split_off.id
    assert "Saturday is the best day" in "".join(c.get("delta", "") for c in retried["chunks"])


@pytest.mark.parametrize("scope", ["thread", "resource"])
def test_a_threshold_reached_at_a_later_step_observes_the_reply_so_far_and_leaves_only_the_observations(
        tmp_path: Path, scope: str) -> None:
    options = {"scope": scope, "observation": {"messageTokens": 300, "bufferTokens": False},
               "reflection": {"observationTokens": 5000}}
    observer = ["<observations>\nDate: Jan 5, 2026\n* 🔴 (09:04) User asked for the weather; Saturday is sunny in "
                "Chamonix\n</observations>\n<current-task>Pick the day for the ridge walk.</current-task>"]
    llm = ScriptedModel([*(f"Noted, point {i}." for i in range(3)), *TOOL_TURN, "Sure."], observer=observer)
    with gateway(tmp_path, options, llm) as (server, clock):
        texts = [f"Point {i}. {FACT}" for i in range(3)] + ["What is the weather for our trip?", "Thanks!"]
        results = chat(server, clock, tmp_path, texts)
    tool_turn = results[3]
    first, second, third = statuses(tool_turn)
    assert pending_of(first) < pending_of(second) < 300 and pending_of(third) == 0
    # step 2 observed everything, the reply so far included (the observer read both tool calls)
    [observer_request] = llm.requests_for("observer")
    transcript = str(observer_request.messages[-1]["content"])
    assert "Argentiere" in transcript and "Chamonix" in transcript and "What is the weather" in transcript
    step2 = opening(tool_turn)[2]
    assert step2[:4] == ["data-om-observation-start", "data-om-observation-end", "data-om-status", "start-step"]
    # ... and its model sees the observations and this very cycle's current task, no raw message
    step_2 = step_messages(llm, 3, [1, 1, 1, 3, 1])[2]
    assert not said(step_2, "What is the weather") and not said(step_2, "thunderstorms")
    system = "\n".join(m["content"] for m in step_2 if m["role"] == "system")
    assert "Saturday is sunny in Chamonix" in system and "Pick the day for the ridge walk." in system

    # the reply was split where it was observed: the observed part is out of the next turn's
    # window, the text that followed is in it
    db = tmp_path / "dev-server.db"
    row = record(db, f"thread:{THREAD}" if scope == "thread" else "resource:ai-chat")
    assert row is not None
    observed_ids = set(json.loads(row["observed_message_ids"]))
    replies = [m for m in stored_messages(db, THREAD) if m.role == "assistant"]
    split_off, rest = replies[3], replies[4]
    assert split_off.id in observed_ids and rest.id not in observed_ids
    assert [p["type"] for p in split_off.content["parts"] if p["type"] == "tool-invocation"] == ["tool-invocation"] * 2
    # the cycle's markers close the part split off, as Mastra writes them before it rotates
    # the reply; the reply goes on with the text alone
    assert [p["type"] for p in split_off.content["parts"]][-2:] == ["data-om-observation-start",
                                                                     "data-om-observation-end"]
    assert [p["type"] for p in rest.content["parts"]] == ["text"]
    next_turn = step_messages(llm, 4, [1, 1, 1, 3, 1])[0]
    assert said(next_turn, "Saturday is the best day for the ridge.") and not said(next_turn, "thunderstorms")


def test_after_a_synchronous_observation_nothing_is_pending_and_the_actor_has_its_hints_in_the_same_step(
        tmp_path: Path) -> None:
    options = {"observation": {"messageTokens": 250, "bufferTokens": False,
                               "extract": [{"name": "Topics", "instructions": "What the user talks about."}]},
               "reflection": {"observationTokens": 5000}}
    observer = ["<observations>\nDate: Jan 5, 2026\n* 🔴 (09:03) User Ada Lovelace plans an Alps trip\n"
                "</observations>\n"
                "<current-task>Plan the Alps trip with Ada.</current-task>\n"
                "<suggested-response>Ask which week suits the kids.</suggested-response>\n"
                "<topics>hiking in the Alps</topics>"]
    llm = ScriptedModel([f"Noted, point {i}." for i in range(5)], observer=observer)
    with gateway(tmp_path, options, llm) as (server, clock):
        results: list[dict[str, Any]] = []
        while not results or not parts(results[-1], "observation-end"):
            results += chat(server, clock, tmp_path, [f"Point {len(results)}. {FACT}"], start=len(results))
    observed = len(results) - 1
    [status] = statuses(results[observed])
    # the turn's input stays in view, observed: nothing is pending, in the status and the record
    assert pending_of(status) == 0
    assert record_row(tmp_path / "dev-server.db", THREAD)["pending_message_tokens"] == 0
    assert opening(results[observed])[0][:4] == ["data-om-observation-start", "data-om-observation-end",
                                                 "data-om-status", "start-step"]
    [actor] = step_messages(llm, observed, [1] * len(results))
    assert said(actor, f"Point {observed}.")  # the input itself is still shown
    system = "\n".join(m["content"] for m in actor if m["role"] == "system")
    assert "Plan the Alps trip with Ada." in system and "Ask which week suits the kids." in system
    assert "hiking in the Alps" in system
