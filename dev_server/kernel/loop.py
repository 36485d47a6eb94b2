"""The step loop: model call, tool calls, results back to the model, until it answers.

A turn runs at most ``max_steps`` steps. Each step first calls the turn's processors'
``before_step`` on the turn's ``StepContext`` (``dev_server.kernel.processors``: they build the
messages and may add tools), then streams the model with the step's tools (litellm function calling)
and the turn's ``x-thread-id`` / ``x-resource-id`` headers (``memory_headers``); the
step's ``StepStart`` is yielded only once the model's first event arrived, so a provider
(or a processor) that fails at once still fails before any response starts, and is preceded
by the data parts the processors emitted for the step (Mastra streams OM's status and cycle
parts ahead of the step's ``start-step``); what background work emits while the turn runs
is streamed at the loop's next pause (``arrived``): after a step's ``StepStart`` (before the
model's first event), after each tool ran (before its result), at the step's end (before its
``StepFinish``) and before the turn's ``Finish``. Reasoning,
text and each call's argument text (``ToolInputStart`` + ``ToolCallDelta``) stream as they
come. The complete tool calls (``ToolCall``, assembled by the client) are then executed
one by one (``dev_server.kernel.tools.execute``: a bad argument, a raise or a timeout is a tool
error, and the step goes on) and fed back as an assistant ``tool_calls`` message plus one
``tool`` message per call (``StepContext.progress``). Each execution is wrapped in
``LoopHooks.tool_call`` (the runner's ``tool_call`` span). Every step the model answered
ends with the processors' ``after_step``, given the step's ``StepFinish`` (its text, tool
calls and results), before that event is yielded. A step without tool calls ends the turn
with its own finish reason.

A call of a *client tool* (no server function) is not executed: the step's server tools
still run, then the turn ends with ``tool-calls`` and the call stays pending (stored in
state ``call``) until the client sends its output (``dev_server.memory.tool_results``); the turn
that continues from there starts from the same stored parts (``ReplyParts(parts=...)``).

A model still calling tools at ``max_steps`` ends the turn with ``tool-calls`` after one
more, model-less step that says so: a ``data-max-steps`` part (``{maxSteps, message}``) and
the same message as text, so useChat, the Studio and a reload all show why the turn
stopped. It is a step of its own so that useChat's ``lastAssistantMessageIsCompleteWithToolCalls``
(which looks at the last step only) does not re-send the finished tool calls.

What the reply is made of accumulates on ``ReplyParts`` as stored (Mastra format 2)
parts: per step its reasoning and text, its ``tool-invocation`` parts (state ``result``,
``isError`` for a tool error; state ``call`` for a client tool) and its non-transient data
parts, with a ``step-start`` between two steps (as Mastra stores a reply: none before the
first step, though the stream still opens every step with ``start-step``; it goes in as the
step the turn goes on from ends, so the reply so far that the next step's processors see
ends with it, as Mastra's does), so a checkpoint or the final save writes exactly what was
streamed so far. A ``step-start`` carries what Mastra's carries: ``createdAt`` (epoch ms, when
the loop has a clock) from when it goes in, and the ``model`` (``provider/model``) of the step
it opens once that step's model has answered (``ReplyParts.name_step_model``). Mastra's token
counter prices a ``step-start`` by its JSON, so these fields count in Observational Memory's
thresholds as they do in Mastra's (docs/observational-memory.md#tokens).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context

from dev_server.kernel.clock import Clock, epoch_ms
from dev_server.kernel.events import (
    DataPart,
    LoopEvent,
    StepFinish,
    StepStart,
    ToolCallEvent,
    ToolErrorEvent,
    ToolInputStart,
    ToolResultEvent,
)
from dev_server.kernel.model import (
    Finish,
    LLMClient,
    ModelRequest,
    ReasoningDelta,
    ResolvedModel,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from dev_server.kernel.processors import StepContext, TurnProcessor
from dev_server.kernel.text import repair_text
from dev_server.kernel.tools import AskAgent, ToolContext, ToolOutcome, execute, parse_arguments


def step_count(parts: list[dict[str, Any]]) -> int:
    """How many steps stored ``parts`` hold: one per ``step-start``, plus the first step when
    it has no ``step-start`` of its own (content before the first one). Replies stored before
    Mastra's form was followed open with a ``step-start``; they count the same."""
    steps = 0
    content_before = False
    for part in parts:
        kind = str(part.get("type", ""))
        if kind == "step-start":
            steps += 1
        elif steps == 0 and not kind.startswith("data-"):
            content_before = True
    return steps + content_before


@dataclass
class ReplyParts:
    parts: list[dict[str, Any]] = field(default_factory=list)
    steps: int = -1  # steps the parts hold; -1: count them (a reply continued from stored parts)
    separated: bool = False  # the last step ended with the step-start of the next (``end_step``)
    clock: Clock | None = None  # stamps each step-start's ``createdAt``; None: no stamp

    def __post_init__(self) -> None:
        if self.steps < 0:
            self.steps = step_count(self.parts)

    @property
    def text(self) -> str:
        return "".join(p["text"] for p in self.parts if p["type"] == "text")

    @property
    def empty(self) -> bool:
        """Nothing the model made: only step starts and data parts (memory's markers)."""
        return all(p["type"] == "step-start" or p["type"].startswith("data-") for p in self.parts)

    def step(self) -> None:
        """A step begins: a ``step-start`` separates it from the step before (the first has
        none), unless the step before put it in when it ended (``end_step``)."""
        if self.steps and not self.separated:
            self.parts.append(self._step_start())
        self.steps += 1
        self.separated = False

    def end_step(self) -> None:
        """A step the turn goes on from ends: the ``step-start`` that separates it from the next
        goes in now, as Mastra's reply holds it between its steps (a reply split before the
        next step keeps it at the end of the part split off)."""
        self.parts.append(self._step_start())
        self.separated = True

    def _step_start(self) -> dict[str, Any]:
        part: dict[str, Any] = {"type": "step-start"}
        if self.clock is not None:
            part["createdAt"] = epoch_ms(self.clock)
        return part

    def name_step_model(self, model: str) -> None:
        """The step that just called ``model`` is named on its ``step-start`` (the reply's
        last one, if it has no model yet), as Mastra names it after the step's model call."""
        for part in reversed(self.parts):
            if part["type"] == "step-start":
                if "model" not in part:
                    part["model"] = model
                return

    def seal(self) -> None:
        """Mark where the reply so far ends before it is split off (Mastra's seal): its last
        part gets ``metadata.mastra.sealedAt`` (epoch ms), which Mastra's token counter prices
        with the part when the part is one it reads as JSON (a ``step-start``)."""
        if not self.parts or self.clock is None:
            return
        last = self.parts[-1]
        metadata = last.get("metadata") if isinstance(last.get("metadata"), dict) else {}
        mastra = metadata.get("mastra") if isinstance(metadata.get("mastra"), dict) else {}
        last["metadata"] = {**metadata, "mastra": {**mastra, "sealedAt": epoch_ms(self.clock)}}

    def take(self) -> list[dict[str, Any]]:
        """The parts so far, handed over: the reply goes on empty, as a message of its own
        whose first step has no ``step-start`` (a split, ``ReplySoFar``)."""
        parts, self.parts, self.steps, self.separated = self.parts, [], 0, False
        return parts

    def add_text(self, text: str) -> None:
        if self.parts and self.parts[-1]["type"] == "text":
            self.parts[-1]["text"] += text
        else:
            self.parts.append({"type": "text", "text": text})

    def add_reasoning(self, text: str) -> None:
        if self.parts and self.parts[-1]["type"] == "reasoning":
            self.parts[-1]["reasoning"] += text
            self.parts[-1]["details"][0]["text"] += text
        else:
            self.parts.append({"type": "reasoning", "reasoning": text, "details": [{"type": "text", "text": text}]})

    def add_tool(self, call_id: str, name: str, args: Any, result: Any, error: bool) -> None:
        invocation = {"state": "result", "toolCallId": call_id, "toolName": name, "args": args, "result": result}
        if error:
            invocation["isError"] = True
        self.parts.append({"type": "tool-invocation", "toolInvocation": invocation})

    def add_pending_call(self, call_id: str, name: str, args: Any) -> None:
        """A client tool's call, waiting for the client's output."""
        self.parts.append({"type": "tool-invocation",
                           "toolInvocation": {"state": "call", "toolCallId": call_id, "toolName": name, "args": args}})

    def add_data(self, data: DataPart) -> None:
        if not data.transient:
            part = {"type": f"data-{data.name}", "data": data.data}
            self.parts.append({**part, "id": data.id} if data.id else part)

    def snapshot(self) -> list[dict[str, Any]]:
        return [{**p, "toolInvocation": dict(p["toolInvocation"])} if "toolInvocation" in p
                else {**p, "details": [dict(d) for d in p["details"]]} if p["type"] == "reasoning" and "details" in p
                else dict(p) for p in self.parts]


def parse_input(arguments: str) -> Any:
    try:
        return parse_arguments(arguments)
    except ValueError:  # shown as sent; executing the call reports why
        return arguments


class LoopHooks:
    """What the runner observes of the loop (spans); the defaults observe nothing."""

    def step_started(self, index: int) -> None:
        pass

    def model_called(self, index: int, messages: list[dict[str, Any]]) -> None:
        pass

    @contextmanager
    def tool_call(self, call: ToolCall, input: Any) -> Iterator[Context | None]:
        """Around one tool's execution; yields the trace context its own spans hang from."""
        yield None

    def tool_finished(self, outcome: ToolOutcome) -> None:
        pass


async def run_steps(llm: LLMClient, model: ResolvedModel, step: StepContext,
                    processors: TurnProcessor, max_steps: int, reply: ReplyParts,
                    hooks: LoopHooks | None = None, ask_agent: AskAgent | None = None,
                    clock: Clock | None = None) -> AsyncIterator[LoopEvent]:
    """The turn's events; ``reply`` accumulates the parts. Each step calls the processors'
    ``before_step`` on ``step`` first (``dev_server.kernel.processors``: the turn's, seen as
    one), then the model, then their ``after_step``. Tools get ``ask_agent`` on their
    context (agent as tool). ``clock`` stamps the reply's ``step-start`` parts."""
    hooks = hooks or LoopHooks()
    if clock is not None:
        reply.clock = clock
    max_steps = max(1, max_steps)
    step.fresh_reply = not reply.parts
    input_tokens = output_tokens = 0
    for index in range(max_steps):
        step.begin_step(index)
        hooks.step_started(index)
        await processors.before_step(step)
        emitted = step.take_emitted()
        for part, durable in emitted:
            if durable:
                step.keep(part, durable, reply)
        tools = dict(step.tools)
        messages = step.messages()
        hooks.model_called(index, messages)
        stream = llm.stream(ModelRequest(model=model, messages=messages,
                                         tools=tuple(tool.openai_spec() for tool in tools.values()),
                                         options=memory_headers(step)))
        calls: list[ToolCall] = []
        streaming_inputs: set[str] = set()  # calls whose ToolInputStart was sent
        finish: Finish | None = None
        started = False
        try:
            async for event in stream:
                if not started:
                    started = True
                    for part, _ in emitted:  # the step's own parts open it
                        yield part
                    reply.step()
                    yield StepStart(index)
                    for part in arrived(step, reply):  # what background work reported before the model answered
                        yield part
                if isinstance(event, TextDelta):
                    event = TextDelta(repair_text(event.text))
                    reply.add_text(event.text)
                    yield event
                elif isinstance(event, ReasoningDelta):
                    event = ReasoningDelta(repair_text(event.text))
                    reply.add_reasoning(event.text)
                    yield event
                elif isinstance(event, ToolCallDelta):
                    if event.call_id not in streaming_inputs:
                        streaming_inputs.add(event.call_id)
                        yield ToolInputStart(event.call_id, event.name)
                    if event.delta:
                        yield ToolCallDelta(event.call_id, event.name, repair_text(event.delta))
                elif isinstance(event, ToolCall):
                    calls.append(event)
                else:
                    finish = event
        finally:
            await stream.aclose()
        reply.name_step_model(f"{model.provider}/{model.model_id}")
        usage = finish.usage if finish else Usage(0, 0)
        input_tokens, output_tokens = input_tokens + usage.input_tokens, output_tokens + usage.output_tokens
        step_text = "".join(p["text"] for p in reply.parts[_last_step_start(reply):] if p["type"] == "text")
        announced: list[ToolCallEvent] = []
        outcomes: list[ToolResultEvent | ToolErrorEvent] = []
        results: list[dict[str, Any]] = []
        waiting = False  # a client tool was called: the client has to answer first
        for call in calls:
            tool = tools.get(call.name)
            if call.id not in streaming_inputs:
                yield ToolInputStart(call.id, call.name)
            announced.append(ToolCallEvent(call.id, call.name, parse_input(call.arguments),
                                           client=tool is not None and tool.client))
            yield announced[-1]
            if announced[-1].client:
                waiting = True
                reply.add_pending_call(call.id, call.name, announced[-1].input)
                continue
            with hooks.tool_call(call, announced[-1].input) as trace_context:
                context = ToolContext(call_id=call.id, agent_id=step.agent_id, run_id=step.run_id,
                                      thread_id=step.thread.id if step.thread else None,
                                      resource_id=step.resource_id, trace_context=trace_context,
                                      ask_agent=ask_agent)
                outcome = await execute(tools, call.name, call.arguments, context)
                hooks.tool_finished(outcome)
            for part in arrived(step, reply):  # what background work reported while the tool ran
                yield part
            if outcome.error is not None:
                reply.add_tool(call.id, call.name, outcome.input, outcome.error, error=True)
                outcomes.append(ToolErrorEvent(call.id, call.name, outcome.input, outcome.error))
                content = json.dumps({"error": outcome.error})
            else:
                reply.add_tool(call.id, call.name, outcome.input, outcome.output, error=False)
                outcomes.append(ToolResultEvent(call.id, call.name, outcome.input, outcome.output))
                content = json.dumps(outcome.output, default=str)
            yield outcomes[-1]
            results.append({"role": "tool", "tool_call_id": call.id, "content": content})
        reason = "tool-calls" if calls else (finish.finish_reason if finish else "other")
        continued = bool(calls) and not waiting and index + 1 < max_steps
        output = StepFinish(index, reason, usage, continued, step_text, tuple(announced), tuple(outcomes))
        await processors.after_step(step, output)
        for part in arrived(step, reply):  # what background work reported while the model streamed
            yield part
        yield output
        if not continued:
            if calls and not waiting:
                async for event in _max_steps_note(index + 1, max_steps, reply):
                    yield event
            for part in arrived(step, reply):  # background work that reported meanwhile
                yield part
            yield Finish(reason, Usage(input_tokens, output_tokens))
            return
        reply.end_step()
        step.progress.append(assistant_tool_calls(step_text, [(c.id, c.name, c.arguments) for c in calls]))
        step.progress.extend(results)


def memory_headers(step: StepContext) -> dict[str, Any] | None:
    """The HTTP headers naming the turn's thread and resource (``x-thread-id``,
    ``x-resource-id``), as Mastra sends them with every model call of a turn that has
    memory, for gateways that enrich by conversation: litellm's ``extra_headers``, which
    providers that take headers send and the others ignore. None without a thread."""
    headers = {}
    if step.thread is not None:
        headers["x-thread-id"] = step.thread.id
    if step.resource_id:
        headers["x-resource-id"] = step.resource_id
    return {"extra_headers": headers} if headers else None


def arrived(step: StepContext, reply: ReplyParts) -> list[DataPart]:
    """What background work emitted into the turn since the loop last looked: streamed
    now, and the durable parts kept in the reply where they are streamed."""
    parts = []
    for part, durable in step.take_emitted():
        if durable:
            step.keep(part, durable, reply)
        parts.append(part)
    return parts


def max_steps_message(max_steps: int) -> str:
    return (f"Stopped after {max_steps} {'step' if max_steps == 1 else 'steps'}: the model was still calling "
            f"tools when the agent's step limit (max_steps) was reached.")


async def _max_steps_note(index: int, max_steps: int, reply: ReplyParts) -> AsyncIterator[LoopEvent]:
    """The model-less last step of a turn cut short by ``max_steps`` (see the module docstring)."""
    message = max_steps_message(max_steps)
    reply.step()
    yield StepStart(index)
    note = DataPart("max-steps", {"maxSteps": max_steps, "message": message})
    reply.add_data(note)
    yield note
    reply.add_text(message)
    yield TextDelta(message)
    yield StepFinish(index, "tool-calls", Usage(0, 0), False, message)


def assistant_tool_calls(text: str, calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The OpenAI assistant message that asked for ``calls`` (id, name, JSON arguments)."""
    return {"role": "assistant", "content": text or None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                           for call_id, name, arguments in calls]}


def _last_step_start(reply: ReplyParts) -> int:
    for i in range(len(reply.parts) - 1, -1, -1):
        if reply.parts[i]["type"] == "step-start":
            return i
    return 0
