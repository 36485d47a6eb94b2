"""The one event union a turn produces, and the walk both wire encoders read it through.

The loop (``dev_server.kernel.loop``) yields ``StepStart``, ``ReasoningDelta``, ``TextDelta``,
``ToolInputStart`` + ``ToolCallDelta``s (a call's argument text as the model streams it),
``ToolCallEvent`` (the input complete), ``ToolResultEvent`` / ``ToolErrorEvent`` (none for a
client tool: the turn stops there), ``DataPart`` (a ``data-<name>`` part, stored unless
``transient``), ``StepFinish`` and, last, ``Finish``. ``edge_events`` adds what only the edge
needs: ``TextStart``/``TextEnd`` and ``ReasoningStart``/``ReasoningEnd`` around each run of
text or reasoning (a new part per run), and an ``ErrorEvent`` for a failure at any point, so
a stream never ends without saying why. As the AI SDK's and Mastra's own servers do, a
failure leaves an open part open (no end follows the error); the ``ErrorEvent`` says whether
it broke into a step (``in_step``: a ``StepStart`` without its ``StepFinish``), which the
encoders close after the error (``finish-step`` / ``step-finish``, then a finish with the
reason ``error``). The gateway
(AI SDK UI chunks, ``dev_server.streaming.ui_chunks``) and the studio (Mastra chunks,
``dev_server.streaming.mastra_chunks``) only translate these. This module imports nothing from
the rest of the agents layer, so the streaming layer may use it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from dev_server.kernel.model import Finish, ReasoningDelta, TextDelta, ToolCallDelta, Usage
from dev_server.kernel.stream_errors import StreamError, stream_error


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
class ReasoningStart:
    step: int


@dataclass(frozen=True)
class ReasoningEnd:
    step: int


@dataclass(frozen=True)
class ToolInputStart:
    """A tool call begins; its argument text follows as ``ToolCallDelta``s."""

    call_id: str
    name: str


@dataclass(frozen=True)
class ToolCallEvent:
    """The model's call, its input complete (``tool-input-available``). A ``client`` call
    is not executed here: the turn stops and the client returns its output."""

    call_id: str
    name: str
    input: Any
    client: bool = False


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
class DataPart:
    """A ``data-<name>`` part (AI SDK) / chunk (Mastra); ``transient`` ones are streamed only."""

    name: str
    data: Any
    id: str | None = None
    transient: bool = False
    kept_data: Any = None  # what a durable copy keeps instead of ``data`` (a smaller form), when set


# Where a processor's durable part is kept (``StepContext.keep``): True, on the reply in
# progress; PREVIOUS_REPLY, on the thread's newest stored reply while the turn's own is not
# stored yet (a fresh reply's first step), as Mastra writes the markers of background work.
PREVIOUS_REPLY: Literal["previous-reply"] = "previous-reply"
Durable = bool | Literal["previous-reply"]


@dataclass(frozen=True)
class StepFinish:
    index: int
    reason: str
    usage: Usage
    continued: bool  # another step follows (the model called tools)
    text: str = ""
    tool_calls: tuple[ToolCallEvent, ...] = ()
    tool_results: tuple[ToolResultEvent | ToolErrorEvent, ...] = ()


@dataclass(frozen=True)
class ErrorEvent:
    error: StreamError
    in_step: bool = False  # the failure broke into a step that had started


LoopEvent = (StepStart | ReasoningDelta | TextDelta | ToolInputStart | ToolCallDelta | ToolCallEvent | ToolResultEvent
             | ToolErrorEvent | DataPart | StepFinish | Finish)
EdgeEvent = LoopEvent | TextStart | TextEnd | ReasoningStart | ReasoningEnd | ErrorEvent

_RUNS: dict[type, tuple[type, type]] = {TextDelta: (TextStart, TextEnd), ReasoningDelta: (ReasoningStart, ReasoningEnd)}


async def edge_events(first: LoopEvent, events: AsyncIterator[LoopEvent]) -> AsyncIterator[EdgeEvent]:
    step = 0
    in_step = False
    open_run: type | None = None  # TextDelta or ReasoningDelta while such a part is open
    try:
        event: LoopEvent | None = first
        while event is not None:
            if isinstance(event, StepStart):
                step, in_step = event.index, True
            elif isinstance(event, StepFinish):
                in_step = False
            if open_run is not None and type(event) is not open_run:
                yield _RUNS[open_run][1](step)
                open_run = None
            if open_run is None and type(event) in _RUNS:
                open_run = type(event)
                yield _RUNS[open_run][0](step)
            yield event
            event = await anext(events, None)
    except Exception as exc:
        yield ErrorEvent(stream_error(exc), in_step)
