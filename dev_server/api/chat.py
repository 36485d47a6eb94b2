"""Gateway chat: ``POST /api/chat`` (and ``/api/agents/{agentId}/chat``) for ``useChat``.

The response is the AI SDK UI message stream v1 over SSE. Everything that can be refused
is refused before the stream starts, as a 4xx JSON error with nothing written: a bad
body (FastAPI validates ``ChatRequest``), an unknown agent, another resource's thread, a
thread still busy with another reply past the wait bound (409), a caller past the turn
rate limit (429, ``dev_server.api.turn_limit``). The turn starts through
``dev_server.agents.turns`` like every other turn, and its first model event is awaited before
the response starts too, so a provider that fails at once (bad key, 429, timeout) is a
JSON error, while the user's message is already stored. After that, any failure is an
``error`` chunk followed by ``[DONE]``. Every frame has an SSE ``id``.

With ``stream_resume`` on (the default) the frames are recorded in the database as they
are sent (``dev_server.streaming.recorder``), by a task of the process rather than of the request:
a client that hangs up no longer stops the reply, and ``GET .../{chatId}/stream`` replays
it on any process (``dev_server.api.resume``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Header, Response
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from dev_server.kernel.events import (DataPart, EdgeEvent, ErrorEvent, ReasoningEnd, ReasoningStart, StepFinish, StepStart,
                               TextEnd, TextStart, ToolCallEvent, ToolErrorEvent, ToolInputStart, ToolResultEvent,
                               edge_events)
from dev_server.agents.registry import DEFAULT_AGENT_ID, RegisteredAgent
from dev_server.agents.runner import Turn, new_id
from dev_server.agents.turns import LiveTurn, TurnStarter
from dev_server.api.chat_request import MAX_CONVERSATION_ID, ChatRequest
from dev_server.api.deps import AgentDep, AgentsDep, ForcedResource, LimitTurns, RecordingDep, StreamLogDep, TurnsDep
from dev_server.api.resume import parse_last_event_id, replay, resume
from dev_server.kernel.clock import Clock, spaced_iso
from dev_server.errors import NotFound, upstream
from dev_server.kernel.model import Finish, ReasoningDelta, TextDelta, ToolCallDelta
from dev_server.llm import ModelProviderError
from dev_server.kernel.convert import ui_to_stored
from dev_server.memory.memory import ThreadNotOwned
from dev_server.memory.turn_rules import TurnIntent
from dev_server.kernel.messages import Message
from dev_server.storage.stream_log import StreamOwner
from dev_server.streaming import ui_chunks as ui
from dev_server.streaming.coalesce import coalesced
from dev_server.streaming.recorder import StreamRecording
from dev_server.streaming.sse import DONE, UI_STREAM_HEADERS, encode
from dev_server.kernel.stream_errors import stream_error

router = APIRouter(tags=["chat"])

_STREAM_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "AI SDK UI message stream v1 over SSE (`x-vercel-ai-ui-message-stream: v1`)",
          "content": {"text/event-stream": {}}},
    400: {"description": "Invalid request body"}, 404: {"description": "Unknown agent, or a foreign thread"},
    409: {"description": "The thread is busy with another reply"},
    429: {"description": "Too many turns from this caller (DEV_SERVER_TURN_RATE_LIMIT); see Retry-After"},
}
_RESUME_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The stream's frames after `Last-Event-ID` (all without it), then live ones, to `[DONE]`",
          "content": {"text/event-stream": {}}},
    204: {"description": "No active stream to resume"}, 400: {"description": "Invalid Last-Event-ID"},
    404: {"description": "Unknown agent"},
}
LastEventId = Annotated[str | None, Header(alias="Last-Event-ID", description="The SSE id the client saw last")]


@router.post("/api/chat", responses=_STREAM_RESPONSES, response_class=Response, dependencies=[LimitTurns])
async def chat(body: ChatRequest, agents: AgentsDep, turns: TurnsDep, forced: ForcedResource,
               recording: RecordingDep) -> Response:
    agent_id = body.agentId or DEFAULT_AGENT_ID
    agent = agents.get(agent_id)
    if agent is None:
        raise NotFound(f"Agent with id {agent_id} not found")
    return await _chat(body, agent, turns, forced, recording)


@router.post("/api/agents/{agent_id}/chat", responses=_STREAM_RESPONSES, response_class=Response,
             dependencies=[LimitTurns])
async def agent_chat(body: ChatRequest, agent: AgentDep, turns: TurnsDep, forced: ForcedResource,
                     recording: RecordingDep) -> Response:
    return await _chat(body, agent, turns, forced, recording)


# useChat({resume: true}) asks here after a reload; 204 = no stream to resume.
@router.get("/api/chat/{chat_id}/stream", status_code=200, responses=_RESUME_RESPONSES, response_class=Response)
async def resume_stream(chat_id: str, stream_log: StreamLogDep, forced: ForcedResource,
                        last_event_id: LastEventId = None) -> Response:
    return await resume(stream_log, chat_id, resource=forced, agent_id=None,
                        last_event_id=parse_last_event_id(last_event_id))


@router.get("/api/agents/{agent_id}/chat/{chat_id}/stream", status_code=200, responses=_RESUME_RESPONSES,
            response_class=Response)
async def resume_agent_stream(agent: AgentDep, chat_id: str, stream_log: StreamLogDep, forced: ForcedResource,
                              last_event_id: LastEventId = None) -> Response:
    return await resume(stream_log, chat_id, resource=forced or agent.definition.resource, agent_id=agent.id,
                        last_event_id=parse_last_event_id(last_event_id))


async def _chat(body: ChatRequest, agent: RegisteredAgent, turns: TurnStarter, forced: str | None,
                recording: StreamRecording | None) -> Response:
    resource = forced or agent.definition.resource
    thread_id = (body.conversationId or new_id("mastra_thread_")) if agent.memory else None
    intent = TurnIntent(body.trigger, body.messageId)
    when_busy = None
    if recording is not None and thread_id is not None and intent == TurnIntent():
        when_busy = partial(_resume_if_running, recording, thread_id, body.messages[-1].id)
    try:
        live = await turns.start(agent, thread_id=thread_id, resource_id=resource,
                                 incoming=_incoming(body, thread_id or "", resource, turns.clock), intent=intent,
                                 when_busy=when_busy)
    except ThreadNotOwned:
        raise NotFound("Thread not found") from None
    except _StillRunning as running:  # a retry of the turn that holds the thread: its reply, live
        return EventSourceResponse(coalesced(replay(recording.log, running.stream_id, 0)),
                                   headers=UI_STREAM_HEADERS, sep="\n", ping=15)
    except ModelProviderError as exc:
        raise upstream(exc.kind, exc.message) from exc
    chat_key = _chat_key(body.id)
    if recording is not None and (chat_key or thread_id):  # else nothing could name it to resume
        owner = StreamOwner(chat_key, thread_id, agent.id, resource, live.turn.user_message_id)
        recorded = recording.record(_frames(live), owner)  # runs to the end whether or not the client stays
        return EventSourceResponse(coalesced(recorded.frames()), headers=UI_STREAM_HEADERS, sep="\n", ping=15)
    # The frames' own finally closes the turn; the background task covers a response that
    # never started streaming (closing is idempotent).
    return EventSourceResponse(coalesced(_frames(live)), headers=UI_STREAM_HEADERS, sep="\n", ping=15,
                               background=BackgroundTask(live.aclose))


class _StillRunning(Exception):
    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id


async def _resume_if_running(recording: StreamRecording, thread_id: str, message_id: str) -> None:
    """A plain re-send of a message whose turn is still streaming (its client lost the
    connection, or failed over to this replica) follows that turn's recorded stream from
    its start instead of waiting for it (then being answered with the stored reply)."""
    for stored_id in (message_id, f"{message_id}@{thread_id}"):  # the thread-scoped copy's id
        row = await recording.log.running_for(thread_id, stored_id)
        if row is not None:
            raise _StillRunning(row.stream_id)


def _chat_key(chat_id: str | None) -> str | None:
    """useChat's id, when it can name a stream (the thread id is recorded as well)."""
    if not chat_id or len(chat_id) > MAX_CONVERSATION_ID:
        return None
    return chat_id


def _incoming(body: ChatRequest, thread_id: str, resource: str, clock: Clock) -> list[Message]:
    return [ui_to_stored(m.model_dump(exclude_none=True), thread_id, resource, stamp)
            for m, stamp in zip(body.messages, spaced_iso(len(body.messages), clock))]


async def _frames(live: LiveTurn) -> AsyncGenerator[ServerSentEvent, None]:
    count = 0

    def frame(chunk: dict[str, Any] | str) -> ServerSentEvent:
        nonlocal count
        count += 1
        return ServerSentEvent(data=chunk if isinstance(chunk, str) else encode(chunk), id=str(count), sep="\n")

    turn = live.turn
    try:
        yield frame(ui.start(turn.reply_id, _start_metadata(turn)))
        part_id = _part_id("text", turn, 0)
        async for event in edge_events(live.first, live):
            if isinstance(event, (TextStart, ReasoningStart)):
                part_id = _part_id("text" if isinstance(event, TextStart) else "reasoning", turn, event.step)
            for chunk in _ui_chunks(event, part_id):
                yield frame(chunk)
    except Exception as exc:  # this encoder itself broke: still say so, and end the stream
        yield frame(ui.error(stream_error(exc).message))
    finally:
        await live.aclose()
    yield frame(DONE)


def _part_id(kind: str, turn: Turn, step: int) -> str:
    """A text (or reasoning) part per step: ``text-<reply id>`` for the first, ``-<step>`` after.
    A continued reply (after a client tool's output) counts its steps on from the stored ones."""
    step += turn.first_step
    return f"{kind}-{turn.reply_id}" if step == 0 else f"{kind}-{turn.reply_id}-{step}"


def _ui_chunks(event: EdgeEvent, part_id: str) -> list[dict[str, Any]]:
    """The AI SDK chunks of one turn event."""
    match event:
        case StepStart():
            return [ui.start_step()]
        case TextStart():
            return [ui.text_start(part_id)]
        case TextDelta(text=text):
            return [ui.text_delta(part_id, text)]
        case TextEnd():
            return [ui.text_end(part_id)]
        case ReasoningStart():
            return [ui.reasoning_start(part_id)]
        case ReasoningDelta(text=text):
            return [ui.reasoning_delta(part_id, text)]
        case ReasoningEnd():
            return [ui.reasoning_end(part_id)]
        case ToolInputStart(call_id=call_id, name=name):
            return [ui.tool_input_start(call_id, name)]
        case ToolCallDelta(call_id=call_id, delta=delta):
            return [ui.tool_input_delta(call_id, delta)]
        case ToolCallEvent(call_id=call_id, name=name, input=input):
            return [ui.tool_input_available(call_id, name, input)]
        case ToolResultEvent(call_id=call_id, output=output):
            return [ui.tool_output_available(call_id, output)]
        case ToolErrorEvent(call_id=call_id, error=error):
            return [ui.tool_output_error(call_id, error)]
        case DataPart(name=name, data=data, id=data_id, transient=transient):
            return [ui.data_part(name, data, data_id, transient)]
        case StepFinish():
            return [ui.finish_step()]
        case Finish():
            return [ui.finish(event.finish_reason, _finish_metadata(event))]
        case ErrorEvent(error=error):
            return [ui.error(error.message)]
    return []


def _start_metadata(turn: Turn) -> dict[str, Any]:
    metadata: dict[str, Any] = {"agentId": turn.agent.id, "model": turn.model.mastra_id,
                                "provider": turn.model.provider, "local": turn.model.is_local}
    if turn.thread is not None:
        metadata["threadId"] = turn.thread.id
        metadata["resourceId"] = turn.thread.resource_id
    return metadata


def _finish_metadata(finish: Finish) -> dict[str, Any]:
    return {"usage": {"inputTokens": finish.usage.input_tokens, "outputTokens": finish.usage.output_tokens}}
