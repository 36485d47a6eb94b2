"""The per-step processor protocol (``dev_server.kernel.processors``) through the real step
loop (``dev_server.kernel.loop``) and a scripted model: a processor takes part before every
model call and sees every step's output after it, and what it keeps for a turn lives on
the turn object its ``start_turn`` returned, never shared between turns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dev_server.kernel.events import PREVIOUS_REPLY, DataPart, StepFinish
from dev_server.kernel.loop import ReplyParts, run_steps
from dev_server.kernel.processors import StepContext, TurnProcessor, TurnProcessors, start_turn
from dev_server.kernel.tools import Tool, ToolContext
from dev_server.llm.scripted import Call, Reply, ScriptedModel


async def echo(arguments: Any, context: ToolContext) -> dict[str, Any]:
    return {"echoed": arguments["text"]}


ECHO = Tool("echo", "Echo the text back", function=echo,
            schema={"type": "object", "properties": {"text": {"type": "string"}}})


class Counting:
    """A processor: each turn gets its own ``CountingTurn``."""

    name = "counting"

    def __init__(self) -> None:
        self.turns: list[CountingTurn] = []

    def start_turn(self, step: StepContext) -> CountingTurn:
        self.turns.append(CountingTurn())
        return self.turns[-1]


class CountingTurn(TurnProcessor):
    """Loads the conversation on its first step only (its own state), marks every step's
    context with the step's index, and keeps what each step produced."""

    name = "counting"

    def __init__(self) -> None:
        self.loaded = False
        self.moments: list[tuple[str, int]] = []
        self.outputs: list[StepFinish] = []

    async def before_step(self, step: StepContext) -> None:
        if not self.loaded:
            self.loaded = True
            step.history = [{"role": "user", "content": "echo hi, then say done"}]
        step.system.append({"role": "system", "content": f"this is step {step.index}"})
        self.moments.append(("before", step.index))

    async def after_step(self, step: StepContext, output: StepFinish) -> None:
        self.moments.append(("after", output.index))
        self.outputs.append(output)


def tool_turn() -> ScriptedModel:
    return ScriptedModel([Reply(tool_calls=[Call("echo", {"text": "hi"}, id="call-1")]), Reply("done.")])


async def run_turn(model: ScriptedModel, processors: list[Counting]) -> tuple[list[Any], list[TurnProcessor]]:
    step = StepContext("agent", "run", "You are terse.", thread=None, resource_id=None, agent_tools=(ECHO,))
    turn = start_turn(processors, step)
    resolved = await model.resolve("openai/gpt-4o-mini")
    events = [event async for event in run_steps(model, resolved, step, TurnProcessors(turn), 5, ReplyParts())]
    return events, turn


@pytest.mark.anyio
async def test_every_step_calls_the_processor_before_its_model_call_and_shows_it_the_step_after() -> None:
    model, processor = tool_turn(), Counting()
    events, [turn] = await run_turn(model, [processor])

    assert turn.moments == [("before", 0), ("after", 0), ("before", 1), ("after", 1)]
    # before_step shaped each step's own model call: the step index it wrote reached that call
    first, second = (r.messages for r in model.requests)
    assert {"role": "system", "content": "this is step 0"} in first
    assert {"role": "system", "content": "this is step 1"} in second
    assert {"role": "system", "content": "this is step 0"} not in second  # system messages start over each step
    # after_step saw what each step produced: the tool call and its result, then the text
    tool_step, text_step = turn.outputs
    assert [c.name for c in tool_step.tool_calls] == ["echo"] and tool_step.continued
    assert [r.output for r in tool_step.tool_results] == [{"echoed": "hi"}]
    assert text_step.text == "done." and not text_step.continued and not text_step.tool_calls
    assert [e for e in events if isinstance(e, StepFinish)] == turn.outputs  # the same outputs the loop yields


@pytest.mark.anyio
async def test_each_turn_keeps_its_own_state_on_its_own_turn_object() -> None:
    processor = Counting()
    _, [first] = await run_turn(tool_turn(), [processor])
    _, [second] = await run_turn(tool_turn(), [processor])

    assert processor.turns == [first, second] and first is not second
    assert first.moments == second.moments == [("before", 0), ("after", 0), ("before", 1), ("after", 1)]
    assert second.loaded and len(second.outputs) == 2  # loaded on its own first step, not skipped by the first turn's


class Marking(TurnProcessor):
    """Emits, before every step, a part kept on the reply in progress and one kept as Mastra
    keeps a background cycle's markers (``PREVIOUS_REPLY``)."""

    name = "marking"

    async def before_step(self, step: StepContext) -> None:
        if step.index == 0:
            step.history = [{"role": "user", "content": "echo hi, then say done"}]
        step.emit(DataPart("om-observation-start", {"step": step.index}, transient=True), durable=True)
        step.emit(DataPart("om-buffering-start", {"step": step.index}, transient=True), durable=PREVIOUS_REPLY)


@pytest.mark.anyio
@pytest.mark.parametrize("continued", [False, True])
async def test_durable_parts_of_a_fresh_replys_first_step_are_kept_for_the_previous_reply(continued: bool) -> None:
    model = tool_turn()
    step = StepContext("agent", "run", "You are terse.", thread=None, resource_id=None, agent_tools=(ECHO,))
    reply = ReplyParts()
    if continued:  # a reply continued from its stored parts is the last assistant message already
        reply.add_text("so far")
    resolved = await model.resolve("openai/gpt-4o-mini")
    events = [e async for e in run_steps(model, resolved, step, TurnProcessors([Marking()]), 5, reply)]

    streamed = [(e.name, e.data["step"]) for e in events if isinstance(e, DataPart)]
    assert streamed == [("om-observation-start", 0), ("om-buffering-start", 0),
                        ("om-observation-start", 1), ("om-buffering-start", 1)]
    kept = [(p["type"], p["data"]["step"]) for p in reply.parts if p["type"].startswith("data-")]
    if continued:
        assert step.for_previous_reply == []
        assert kept == [("data-om-observation-start", 0), ("data-om-buffering-start", 0),
                        ("data-om-observation-start", 1), ("data-om-buffering-start", 1)]
    else:
        # step 0's buffering part waits for the previous reply (the runner appends it there);
        # a synchronous cycle's part and everything of later steps stay on this reply
        assert [(p.name, p.data["step"], p.transient) for p in step.for_previous_reply] == [
            ("om-buffering-start", 0, False)]
        assert kept == [("data-om-observation-start", 0), ("data-om-observation-start", 1),
                        ("data-om-buffering-start", 1)]


class Reporting(TurnProcessor):
    """Emits a part for each step before its model call, and starts background work on the
    first step that reports while the model's text streams."""

    name = "reporting"

    def __init__(self) -> None:
        self.background: asyncio.Task[None] | None = None

    async def before_step(self, step: StepContext) -> None:
        step.emit(DataPart("status", {"step": step.index}, transient=True))
        if step.index == 1:
            self.background = asyncio.create_task(self.report(step))

    async def report(self, step: StepContext) -> None:
        await asyncio.sleep(0.02)  # lands inside the step's text, which streams a piece every 50 ms
        step.emit(DataPart("late", {"done": True}), durable=True)


@pytest.mark.anyio
async def test_a_steps_parts_open_it_and_background_parts_wait_for_a_pause_and_are_kept() -> None:
    model = ScriptedModel([Reply(tool_calls=[Call("echo", {"text": "hi"}, id="call-1")]),
                           Reply(["done", " and", " dusted."], piece_delay_s=0.05)])
    step = StepContext("agent", "run", "You are terse.", thread=None, resource_id=None, agent_tools=(ECHO,))
    processor = Reporting()
    reply = ReplyParts()
    resolved = await model.resolve("openai/gpt-4o-mini")
    events = [event async for event in run_steps(model, resolved, step, TurnProcessors([processor]), 5, reply)]

    kinds = [type(e).__name__ if not isinstance(e, DataPart) else e.name for e in events]
    # each step's own part comes before its StepStart (Mastra's order)
    assert kinds[:2] == ["status", "StepStart"] and kinds[kinds.index("StepStart", 2) - 1] == "status"
    # the background part never splits the text run; it is streamed before the turn ends
    texts = [i for i, kind in enumerate(kinds) if kind == "TextDelta"]
    late = kinds.index("late")
    assert late > texts[-1] and late < kinds.index("Finish")
    assert texts == list(range(texts[0], texts[-1] + 1))
    # the durable one is kept in the reply where it was streamed, after the step's one text part
    assert [p["type"] for p in reply.parts] == ["tool-invocation", "step-start", "text", "data-late"]
