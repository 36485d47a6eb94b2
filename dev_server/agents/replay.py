"""A stored reply told again as the loop's events, for a retried turn (``dev_server.memory.turn_rules``).

A client that sends a turn whose reply is already stored (its connection dropped, it failed
over to another replica) gets that reply, not a second one: the stored parts become the
events a live turn would have produced (``dev_server.kernel.events``), so each edge encodes them
as it encodes any turn (AI SDK chunks on the gateway, Mastra chunks on the studio), under
the stored reply's id. Transient parts (OM status, progress) were never stored and are not
replayed; durable ``data-*`` parts are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dev_server.kernel.events import (
    DataPart,
    LoopEvent,
    StepFinish,
    StepStart,
    ToolCallEvent,
    ToolErrorEvent,
    ToolResultEvent,
)
from dev_server.kernel.messages import Message
from dev_server.kernel.model import Finish, ReasoningDelta, TextDelta, Usage


def reply_events(reply: Message) -> Iterator[LoopEvent]:
    metadata = reply.content.get("metadata") or {}
    usage = _usage(metadata.get("usage"))
    step = -1
    calls: list[ToolCallEvent] = []
    for part in reply.content.get("parts") or []:
        kind = part.get("type")
        if kind == "step-start" or step < 0:
            if step >= 0:
                yield StepFinish(step, "tool-calls", Usage(0, 0), continued=True, tool_calls=tuple(calls))
                calls = []
            step += 1
            yield StepStart(step)
            if kind == "step-start":
                continue
        if kind == "text" and part.get("text"):
            yield TextDelta(part["text"])
        elif kind == "reasoning" and part.get("reasoning"):
            yield ReasoningDelta(part["reasoning"])
        elif kind == "tool-invocation":
            yield from _tool_events(part.get("toolInvocation") or {}, calls)
        elif isinstance(kind, str) and kind.startswith("data-"):
            yield DataPart(kind.removeprefix("data-"), part.get("data"), part.get("id"))
    reason = str(metadata.get("finishReason") or "stop")
    if step >= 0:
        yield StepFinish(step, reason, usage, continued=False, tool_calls=tuple(calls))
    yield Finish(reason, usage)


def _tool_events(invocation: dict[str, Any], calls: list[ToolCallEvent]) -> Iterator[LoopEvent]:
    call_id, name, args = invocation.get("toolCallId", ""), invocation.get("toolName", ""), invocation.get("args")
    call = ToolCallEvent(call_id, name, args, client=invocation.get("state") == "call")
    calls.append(call)
    yield call
    if invocation.get("state") != "result":
        return
    if invocation.get("isError"):
        yield ToolErrorEvent(call_id, name, args, str(invocation.get("result")))
    else:
        yield ToolResultEvent(call_id, name, args, invocation.get("result"))


def _usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage(0, 0)
    return Usage(int(usage.get("inputTokens") or 0), int(usage.get("outputTokens") or 0))
