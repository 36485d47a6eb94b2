"""The one event union a turn produces, and the walk both wire encoders read it through.

The loop (``app.agents.loop``) yields ``StepStart``, ``TextDelta``, ``ToolCallEvent``,
``ToolResultEvent``, ``ToolErrorEvent``, ``StepFinish`` and, last, ``Finish``.
``edge_events`` adds what only the edge needs: ``TextStart``/``TextEnd`` around each run of
text (a new text part per step), and an ``ErrorEvent`` for a failure at any point (an open
text part is closed first), so a stream never ends without saying why. The gateway (AI SDK
UI chunks, ``app.api.chat``) and the studio (Mastra chunks,
``app.streaming.mastra_chunks``) only translate these. This module imports nothing from
the rest of the agents layer, so the streaming layer may use it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from app.llm import Finish, TextDelta, Usage
from app.streaming.text_events import StreamError, stream_error


@dataclass(frozen=True)
class StepStart:
    index: int


@dataclass(frozen=True)
class TextStart:
    step: int


@dataclass(frozen=True)
class TextEnd:
    step: int


@dataclass(frozen=True)
class ToolCallEvent:
    """The model's call, its input complete (``tool-input-available``)."""

    call_id: str
    name: str
    input: Any


@dataclass(frozen=True)
class ToolResultEvent:
    call_id: str
    name: str
    input: Any
    output: Any


@dataclass(frozen=True)
class ToolErrorEvent:
    call_id: str
    name: str
    input: Any
    error: str


@dataclass(frozen=True)
class StepFinish:
    index: int
    reason: str
    usage: Usage
    continued: bool  # another step follows (the model called tools)
    text: str = ""
    tool_calls: tuple[ToolCallEvent, ...] = ()


@dataclass(frozen=True)
class ErrorEvent:
    error: StreamError


LoopEvent = StepStart | TextDelta | ToolCallEvent | ToolResultEvent | ToolErrorEvent | StepFinish | Finish
EdgeEvent = LoopEvent | TextStart | TextEnd | ErrorEvent


async def edge_events(first: LoopEvent, events: AsyncIterator[LoopEvent]) -> AsyncIterator[EdgeEvent]:
    step = 0
    text_open = False
    try:
        event: LoopEvent | None = first
        while event is not None:
            if isinstance(event, StepStart):
                step = event.index
            if isinstance(event, TextDelta):
                if not text_open:
                    text_open = True
                    yield TextStart(step)
            elif text_open:
                text_open = False
                yield TextEnd(step)
            yield event
            event = await anext(events, None)
    except Exception as exc:
        if text_open:
            yield TextEnd(step)
        yield ErrorEvent(stream_error(exc))
