"""Mastra's own stream chunks, what the Studio and ``@mastra/client-js`` read (Mastra's Studio REST API: agent runs).

Every chunk is ``{type, runId, from: "AGENT", payload}``. ``encode_run`` translates a run's
events (``dev_server.kernel.events``) into the sequence Mastra's server sends: start, then
per step step-start, reasoning-start/-delta/-end, text-start, text-delta..., text-end, per
tool call tool-call-input-streaming-start, tool-call-delta (``argsTextDelta``)...,
tool-call-input-streaming-end, tool-call, then tool-result / tool-error (none for a client
tool: client-js runs it when the finish says ``tool-calls``), ``data-*`` chunks
(``{type, data, id?, transient?}``, no payload, as Mastra's ``DataChunkType``), step-finish
(``isContinued`` when another step follows), and a final finish; a failure at any point
becomes an ``error`` chunk. The frames and the response around them are
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
    metadata = {"modelId": ids.model.model_id, "provider": ids.model.provider, "local": ids.model.is_local}
    yield chunk("start", run, {"id": ids.agent_id, "messageId": message_id})
    text: list[str] = []  # the whole run's text
    async for event in edge_events(first, events):
        match event:
            case StepStart(index=index):
                index += first_step
                text_id = f"text-{message_id}" if index == 0 else f"text-{message_id}-{index}"
                reasoning_id = text_id.replace("text-", "reasoning-", 1)
                yield chunk("step-start", run, {"messageId": message_id, "request": {}, "warnings": []})
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
                output = {"text": event.text, "toolCalls": [_call_payload(c) for c in event.tool_calls],
                          "usage": usage_payload(event.usage)}
                yield chunk("step-finish", run, {"messageId": message_id, "metadata": metadata, "output": output,
                                                 "stepResult": {"reason": event.reason,
                                                                "isContinued": event.continued}})
            case Finish():
                yield chunk("finish", run, {"messageId": message_id, "stepResult": {"reason": event.finish_reason},
                                            "output": {"text": "".join(text), "usage": usage_payload(event.usage)},
                                            "metadata": metadata, "messages": {"all": [], "user": [], "nonUser": []}})
            case ErrorEvent(error=error):
                yield error_chunk(run, error)


def _call_payload(event: ToolCallEvent | ToolResultEvent | ToolErrorEvent) -> dict[str, Any]:
    return {"toolCallId": event.call_id, "toolName": event.name, "args": event.input}
