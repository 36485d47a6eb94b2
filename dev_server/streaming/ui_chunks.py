"""Chunks of the AI SDK UI message stream v1 (the AI SDK's UI message stream protocol), as plain dicts,
and ``encode_reply``: a turn's events in, the gateway's chunks out.

A failure ends the stream as the SDK's own server (``streamText(...).toUIMessageStream()``)
ends it: inside a step ``error``, ``finish-step``, ``finish`` with ``finishReason: "error"``;
between steps ``error`` alone (``dev_server.kernel.events.ErrorEvent.in_step``;
docs/studio.md#how-streams-end). ``[DONE]`` follows either way (``dev_server.streaming.sse``).

The SDK rejects optional fields sent as ``null`` (``{"messageId": null}`` fails its
schema), so every constructor leaves out what it was not given instead of sending None.
Keys typed ``unknown`` in the SDK (``data``) are always present, even when null.
The frames and the response around these chunks are ``dev_server.streaming.sse``'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from dev_server.kernel.events import (
    DataPart,
    EdgeEvent,
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
from dev_server.kernel.model import Finish, ReasoningDelta, ResolvedModel, TextDelta, ToolCallDelta

FINISH_REASONS = {"stop", "length", "content-filter", "tool-calls", "error", "other"}


def _present(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def start(message_id: str | None = None, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "start", **_present(messageId=message_id, messageMetadata=metadata)}


def start_step() -> dict[str, Any]:
    return {"type": "start-step"}


def finish_step() -> dict[str, Any]:
    return {"type": "finish-step"}


def text_start(part_id: str) -> dict[str, Any]:
    return {"type": "text-start", "id": part_id}


def text_delta(part_id: str, delta: str) -> dict[str, Any]:
    return {"type": "text-delta", "id": part_id, "delta": delta}


def text_end(part_id: str) -> dict[str, Any]:
    return {"type": "text-end", "id": part_id}


def finish(reason: str | None = None, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    if reason is not None and reason not in FINISH_REASONS:
        reason = "other"
    return {"type": "finish", **_present(finishReason=reason, messageMetadata=metadata)}


def error(text: str) -> dict[str, Any]:
    return {"type": "error", "errorText": text}


def tool_input_start(call_id: str, name: str) -> dict[str, Any]:
    return {"type": "tool-input-start", "toolCallId": call_id, "toolName": name}


def tool_input_available(call_id: str, name: str, input: Any) -> dict[str, Any]:
    return {"type": "tool-input-available", "toolCallId": call_id, "toolName": name, "input": input}


def tool_output_available(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "tool-output-available", "toolCallId": call_id, "output": output}


def tool_output_error(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}


def tool_input_delta(call_id: str, delta: str) -> dict[str, Any]:
    return {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": delta}


def reasoning_start(part_id: str) -> dict[str, Any]:
    return {"type": "reasoning-start", "id": part_id}


def reasoning_delta(part_id: str, delta: str) -> dict[str, Any]:
    return {"type": "reasoning-delta", "id": part_id, "delta": delta}


def reasoning_end(part_id: str) -> dict[str, Any]:
    return {"type": "reasoning-end", "id": part_id}


def data_part(name: str, data: Any, part_id: str | None = None, transient: bool = False) -> dict[str, Any]:
    return {"type": f"data-{name}", **_present(id=part_id), "data": data, **({"transient": True} if transient else {})}


# -- a reply's events as chunks ----------------------------------------------------------


@dataclass(frozen=True)
class ReplyIds:
    """Who is speaking in a reply's chunks: the ``start`` chunk's metadata and the part ids."""

    reply_id: str  # the assistant message that will be stored
    agent_id: str
    model: ResolvedModel
    thread_id: str | None = None  # None: the turn has no thread (then no resource is named either)
    resource_id: str | None = None
    first_step: int = 0  # steps the reply already has: it continues a stored one (client tool output)

    def part_id(self, kind: str, step: int) -> str:
        """A text (or reasoning) part per step: ``text-<reply id>`` for the first, ``-<step>``
        after. A continued reply counts its steps on from the stored ones."""
        step += self.first_step
        return f"{kind}-{self.reply_id}" if step == 0 else f"{kind}-{self.reply_id}-{step}"

    def start_metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"agentId": self.agent_id, "model": self.model.mastra_id,
                                    "provider": self.model.provider, "local": self.model.is_local}
        if self.thread_id is not None:
            metadata["threadId"] = self.thread_id
            metadata["resourceId"] = self.resource_id
        return metadata


async def encode_reply(ids: ReplyIds, first: LoopEvent, events: AsyncIterator[LoopEvent]
                       ) -> AsyncIterator[dict[str, Any]]:
    """The AI SDK chunks of one reply: ``start``, then each event's (``event_chunks``)."""
    yield start(ids.reply_id, ids.start_metadata())
    part_id = ids.part_id("text", 0)
    async for event in edge_events(first, events):
        if isinstance(event, (TextStart, ReasoningStart)):
            part_id = ids.part_id("text" if isinstance(event, TextStart) else "reasoning", event.step)
        for chunk in event_chunks(event, part_id):
            yield chunk


def event_chunks(event: EdgeEvent, part_id: str) -> list[dict[str, Any]]:
    """The AI SDK chunks of one turn event (``part_id``: the text or reasoning part it is in)."""
    match event:
        case StepStart():
            return [start_step()]
        case TextStart():
            return [text_start(part_id)]
        case TextDelta(text=text):
            return [text_delta(part_id, text)]
        case TextEnd():
            return [text_end(part_id)]
        case ReasoningStart():
            return [reasoning_start(part_id)]
        case ReasoningDelta(text=text):
            return [reasoning_delta(part_id, text)]
        case ReasoningEnd():
            return [reasoning_end(part_id)]
        case ToolInputStart(call_id=call_id, name=name):
            return [tool_input_start(call_id, name)]
        case ToolCallDelta(call_id=call_id, delta=delta):
            return [tool_input_delta(call_id, delta)]
        case ToolCallEvent(call_id=call_id, name=name, input=input):
            return [tool_input_available(call_id, name, input)]
        case ToolResultEvent(call_id=call_id, output=output):
            return [tool_output_available(call_id, output)]
        case ToolErrorEvent(call_id=call_id, error=text):
            return [tool_output_error(call_id, text)]
        case DataPart(name=name, data=data, id=data_id, transient=transient):
            return [data_part(name, data, data_id, transient)]
        case StepFinish():
            return [finish_step()]
        case Finish():
            return [finish(event.finish_reason, _finish_metadata(event))]
        case ErrorEvent(error=failure, in_step=in_step):
            # As the SDK's streamText ends a step that failed: the error, then the step's and
            # the message's finish; a failure between steps (the next model call refused at
            # once) is the error alone.
            return [error(failure.message), finish_step(), finish("error")] if in_step else [error(failure.message)]
    return []


def _finish_metadata(event: Finish) -> dict[str, Any]:
    return {"usage": {"inputTokens": event.usage.input_tokens, "outputTokens": event.usage.output_tokens}}
