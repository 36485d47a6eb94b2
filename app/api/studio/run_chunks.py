"""A run's events as Mastra's chunk stream (STUDIO-REST.md 4.3), what the Studio and client-js read.

``encode_run`` translates the turn's events (``app.agents.events``) into the sequence
Mastra's server sends: start, then per step step-start, text-start, text-delta...,
text-end, tool-call / tool-result / tool-error, step-finish (``isContinued`` when another
step follows), and a final finish; a failure at any point becomes an ``error`` chunk.
The chunk shapes are ``app.streaming.mastra_chunks``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.agents.events import (ErrorEvent, LoopEvent, StepFinish, StepStart, TextEnd, TextStart, ToolCallEvent,
                               ToolErrorEvent, ToolResultEvent, edge_events)
from app.llm import Finish, TextDelta
from app.streaming.mastra_chunks import RunIds, chunk, error_chunk, usage_payload


async def encode_run(ids: RunIds, first: LoopEvent, events: AsyncIterator[LoopEvent]) -> AsyncIterator[dict[str, Any]]:
    """The Mastra chunks of one run."""
    run, message_id = ids.run_id, ids.message_id
    text_id = f"text-{message_id}"
    metadata = {"modelId": ids.model.model_id, "provider": ids.model.provider, "local": ids.model.is_local}
    yield chunk("start", run, {"id": ids.agent_id, "messageId": message_id})
    text: list[str] = []  # the whole run's text
    async for event in edge_events(first, events):
        match event:
            case StepStart(index=index):
                text_id = f"text-{message_id}" if index == 0 else f"text-{message_id}-{index}"
                yield chunk("step-start", run, {"messageId": message_id, "request": {}, "warnings": []})
            case TextStart():
                yield chunk("text-start", run, {"id": text_id})
            case TextDelta(text=piece):
                text.append(piece)
                yield chunk("text-delta", run, {"id": text_id, "text": piece})
            case TextEnd():
                yield chunk("text-end", run, {"id": text_id})
            case ToolCallEvent():
                yield chunk("tool-call", run, _call_payload(event))
            case ToolResultEvent():
                yield chunk("tool-result", run, {**_call_payload(event), "result": event.output})
            case ToolErrorEvent():
                yield chunk("tool-error", run, {**_call_payload(event), "error": {"message": event.error}})
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
