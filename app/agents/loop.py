"""The step loop: model call, tool calls, results back to the model, until it answers.

A turn runs at most ``max_steps`` steps. Each step first runs the input processors on the
turn's ``StepContext`` (``app.agents.processors``: they build the messages and may add
tools), then streams the model with the step's tools (litellm function calling); the
step's ``StepStart`` is yielded only once the model's first event arrived, so a provider
(or a processor) that fails at once still fails before any response starts. The complete tool calls (``ToolCall``, assembled by the client) are then executed
one by one (``app.agents.tools.execute``: a bad argument, a raise or a timeout is a tool
error, and the step goes on) and fed back as an assistant ``tool_calls`` message plus one
``tool`` message per call (``StepContext.progress``). Each execution is wrapped in
``LoopHooks.tool_call`` (the runner's ``tool_call`` span). A step without tool calls ends the turn with its own finish
reason; a step with tool calls at ``max_steps`` ends it with ``tool-calls``.

What the reply is made of accumulates on ``ReplyParts`` as stored (Mastra format 2)
parts: per step a ``step-start``, its text, and its ``tool-invocation`` parts (state
``result``; ``isError`` for a tool error), so a checkpoint or the final save writes
exactly what was streamed so far.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.context import Context

from app.agents.events import LoopEvent, StepFinish, StepStart, ToolCallEvent, ToolErrorEvent, ToolResultEvent
from app.agents.processors import InputProcessor, StepContext
from app.agents.tools import ToolContext, ToolOutcome, execute
from app.llm import Finish, LLMClient, ModelRequest, ResolvedModel, TextDelta, ToolCall, Usage
from app.streaming.sse import repair_text


@dataclass
class ReplyParts:
    parts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(p["text"] for p in self.parts if p["type"] == "text")

    @property
    def empty(self) -> bool:
        return all(p["type"] == "step-start" for p in self.parts)

    def step(self) -> None:
        self.parts.append({"type": "step-start"})

    def add_text(self, text: str) -> None:
        if self.parts and self.parts[-1]["type"] == "text":
            self.parts[-1]["text"] += text
        else:
            self.parts.append({"type": "text", "text": text})

    def add_tool(self, call_id: str, name: str, args: Any, result: Any, error: bool) -> None:
        invocation = {"state": "result", "toolCallId": call_id, "toolName": name, "args": args, "result": result}
        if error:
            invocation["isError"] = True
        self.parts.append({"type": "tool-invocation", "toolInvocation": invocation})

    def snapshot(self) -> list[dict[str, Any]]:
        return [{**p, "toolInvocation": dict(p["toolInvocation"])} if "toolInvocation" in p else dict(p)
                for p in self.parts]


def parse_input(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
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
                    processors: list[InputProcessor], max_steps: int, reply: ReplyParts,
                    hooks: LoopHooks | None = None) -> AsyncIterator[LoopEvent]:
    """The turn's events; ``reply`` accumulates the parts. Each step runs the input
    processors on ``step`` first (``app.agents.processors``), then the model."""
    hooks = hooks or LoopHooks()
    input_tokens = output_tokens = 0
    for index in range(max(1, max_steps)):
        step.begin_step(index)
        hooks.step_started(index)
        for processor in processors:
            await processor.process_step(step)
        tools = dict(step.tools)
        messages = step.messages()
        hooks.model_called(index, messages)
        stream = llm.stream(ModelRequest(model=model, messages=messages,
                                         tools=tuple(tool.openai_spec() for tool in tools.values())))
        calls: list[ToolCall] = []
        finish: Finish | None = None
        started = False
        try:
            async for event in stream:
                if not started:
                    started = True
                    reply.step()
                    yield StepStart(index)
                if isinstance(event, TextDelta):
                    event = TextDelta(repair_text(event.text))
                    reply.add_text(event.text)
                    yield event
                elif isinstance(event, ToolCall):
                    calls.append(event)
                else:
                    finish = event
        finally:
            await stream.aclose()
        usage = finish.usage if finish else Usage(0, 0)
        input_tokens, output_tokens = input_tokens + usage.input_tokens, output_tokens + usage.output_tokens
        step_text = "".join(p["text"] for p in reply.parts[_last_step_start(reply):] if p["type"] == "text")
        announced: list[ToolCallEvent] = []
        results: list[dict[str, Any]] = []
        for call in calls:
            announced.append(ToolCallEvent(call.id, call.name, parse_input(call.arguments)))
            yield announced[-1]
            with hooks.tool_call(call, announced[-1].input) as trace_context:
                context = ToolContext(call_id=call.id, agent_id=step.agent_id, run_id=step.run_id,
                                      thread_id=step.thread.id if step.thread else None,
                                      resource_id=step.resource_id, trace_context=trace_context)
                outcome = await execute(tools, call.name, call.arguments, context)
                hooks.tool_finished(outcome)
            if outcome.error is not None:
                reply.add_tool(call.id, call.name, outcome.input, outcome.error, error=True)
                yield ToolErrorEvent(call.id, call.name, outcome.input, outcome.error)
                content = json.dumps({"error": outcome.error})
            else:
                reply.add_tool(call.id, call.name, outcome.input, outcome.output, error=False)
                yield ToolResultEvent(call.id, call.name, outcome.input, outcome.output)
                content = json.dumps(outcome.output, default=str)
            results.append({"role": "tool", "tool_call_id": call.id, "content": content})
        reason = "tool-calls" if calls else (finish.finish_reason if finish else "other")
        continued = bool(calls) and index + 1 < max_steps
        yield StepFinish(index, reason, usage, continued, step_text, tuple(announced))
        if not continued:
            yield Finish(reason, Usage(input_tokens, output_tokens))
            return
        step.progress.append(assistant_tool_calls(step_text, [(c.id, c.name, c.arguments) for c in calls]))
        step.progress.extend(results)


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
