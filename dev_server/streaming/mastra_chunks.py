"""Mastra's own stream chunks, what the Studio and ``@mastra/client-js`` read (Mastra's Studio REST API: agent runs).

Every chunk is ``{type, runId, from: "AGENT", payload}``. ``encode_run`` translates a run's
events (``dev_server.kernel.events``) into the sequence Mastra's server sends: start, then
per step step-start, reasoning-start/-delta/-end, text-start, text-delta..., text-end, per
tool call tool-call-input-streaming-start, tool-call-delta (``argsTextDelta``)...,
tool-call-input-streaming-end, tool-call, then tool-result / tool-error (none for a client
tool: client-js runs it when the finish says ``tool-calls``), ``data-*`` chunks
(``{type, data, id?, transient?}``, no payload, as Mastra's ``DataChunkType``), step-finish
(``isContinued`` when another step follows), and a final finish whose ``stepResult`` is the
last step's (``{reason, isContinued: false}``) and whose ``output.toolCalls`` are that step's
calls. A turn that stopped at a client tool's call ends with reason ``tool-calls``, as
Mastra's own server ends it (the Studio, which runs no client tools, shows that as its
"reached maxSteps" card, on Mastra as here: docs/studio.md#client-tools-in-the-studios-chat).

A failure at any point ends the run as Mastra's loop ends a failed step
(docs/studio.md#how-streams-end): an ``error`` chunk, then ``step-finish`` and ``finish``
with the reason ``error`` (``isContinued: false``). Mastra opens a step before it calls the
model, so a failure between two steps (the next model call refused at once) gets its
``step-start`` first. The frames and the response around them are
``dev_server.streaming.sse``'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from dev_server.kernel.events import (
    DataPart,
    ErrorEvent,
    LoopEvent,
    ReasoningEnd,
    ReasoningStart,
    StepFinish,
    StepStart,
    TextEnd,
    TextStart,
    ToolCallEvent,
    ToolErrorEvent,
    ToolInputStart,
    ToolResultEvent,
    edge_events,
)
from dev_server.kernel.model import Finish, ReasoningDelta, ResolvedModel, TextDelta, ToolCallDelta, Usage
from dev_server.kernel.stream_errors import StreamError


@dataclass(frozen=True)
class RunIds:
    """Who is speaking in a run's chunks."""

    run_id: str
    message_id: str  # the assistant message that will be stored
    agent_id: str
    model: ResolvedModel


def chunk(kind: str, run_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "runId": run_id, "from": "AGENT", "payload": payload}


def error_chunk(run_id: str, error: StreamError) -> dict[str, Any]:
    return chunk("error", run_id, {"error": {"name": error.kind, "message": error.message}})


def usage_payload(usage: Usage | None) -> dict[str, int]:
    if usage is None:
        return {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
    return {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
            "totalTokens": usage.input_tokens + usage.output_tokens}


async def encode_run(ids: RunIds, first: LoopEvent, events: AsyncIterator[LoopEvent],
                     first_step: int = 0) -> AsyncIterator[dict[str, Any]]:
    """The Mastra chunks of one run (``first_step``: steps the reply already has stored)."""
    run, message_id = ids.run_id, ids.message_id
    text_id = reasoning_id = f"text-{message_id}"
    metadata = {"modelId": ids.model.model_id, "provider": ids.model.provider, "local": ids.model.is_local,
                "modelMetadata": {"modelId": ids.model.model_id, "modelVersion": "v2",
                                  "modelProvider": ids.model.provider}}
    yield chunk("start", run, {"id": ids.agent_id, "messageId": message_id})
    text: list[str] = []  # the whole run's text
    step_text: list[str] = []  # the current step's
    last_calls: list[dict[str, Any]] = []  # the last finished step's tool calls
    usage = Usage(0, 0)  # of the finished steps

    def step_start() -> dict[str, Any]:
        return chunk("step-start", run, {"messageId": message_id, "request": {}, "warnings": []})

    def step_finish(reason: str, continued: bool, step_usage: Usage, calls: list[dict[str, Any]]) -> dict[str, Any]:
        output = {"text": "".join(step_text), "toolCalls": calls, "usage": usage_payload(step_usage)}
        return chunk("step-finish", run, {"messageId": message_id, "metadata": metadata, "output": output,
                                          "stepResult": {"reason": reason, "isContinued": continued}})

    def finish(reason: str, total: Usage) -> dict[str, Any]:
        output = {"text": "".join(text), "toolCalls": last_calls, "usage": usage_payload(total)}
        return chunk("finish", run, {"messageId": message_id, "stepResult": {"reason": reason, "isContinued": False},
                                     "output": output, "metadata": metadata,
                                     "messages": {"all": [], "user": [], "nonUser": []}})

    async for event in edge_events(first, events):
        match event:
            case StepStart(index=index):
                index += first_step
                text_id = f"text-{message_id}" if index == 0 else f"text-{message_id}-{index}"
                reasoning_id = text_id.replace("text-", "reasoning-", 1)
                step_text = []
                yield step_start()
            case ReasoningStart():
                yield chunk("reasoning-start", run, {"id": reasoning_id})
            case ReasoningDelta(text=piece):
                yield chunk("reasoning-delta", run, {"id": reasoning_id, "text": piece})
            case ReasoningEnd():
                yield chunk("reasoning-end", run, {"id": reasoning_id})
            case ToolInputStart(call_id=call_id, name=name):
                yield chunk("tool-call-input-streaming-start", run, {"toolCallId": call_id, "toolName": name})
            case ToolCallDelta(call_id=call_id, name=name, delta=delta):
                yield chunk("tool-call-delta", run, {"toolCallId": call_id, "toolName": name, "argsTextDelta": delta})
            case TextStart():
                yield chunk("text-start", run, {"id": text_id})
            case TextDelta(text=piece):
                text.append(piece)
                step_text.append(piece)
                yield chunk("text-delta", run, {"id": text_id, "text": piece})
            case TextEnd():
                yield chunk("text-end", run, {"id": text_id})
            case ToolCallEvent():
                yield chunk("tool-call-input-streaming-end", run, {"toolCallId": event.call_id})
                yield chunk("tool-call", run, _call_payload(event))
            case ToolResultEvent():
                yield chunk("tool-result", run, {**_call_payload(event), "result": event.output})
            case ToolErrorEvent():
                yield chunk("tool-error", run, {**_call_payload(event), "error": {"message": event.error}})
            case DataPart(name=name, data=data, id=data_id, transient=transient):
                yield {"type": f"data-{name}", "data": data, **({"id": data_id} if data_id else {}),
                       **({"transient": True} if transient else {})}
            case StepFinish():
                last_calls = [_call_payload(c) for c in event.tool_calls]
                usage = Usage(usage.input_tokens + event.usage.input_tokens,
                              usage.output_tokens + event.usage.output_tokens)
                yield step_finish(event.reason, event.continued, event.usage, last_calls)
            case Finish():
                yield finish(event.finish_reason, event.usage)
            case ErrorEvent(error=error, in_step=in_step):
                if not in_step:
                    step_text = []
                    yield step_start()
                yield error_chunk(run, error)
                last_calls = []
                yield step_finish("error", False, Usage(0, 0), [])
                yield finish("error", usage)


def _call_payload(event: ToolCallEvent | ToolResultEvent | ToolErrorEvent) -> dict[str, Any]:
    return {"toolCallId": event.call_id, "toolName": event.name, "args": event.input}
