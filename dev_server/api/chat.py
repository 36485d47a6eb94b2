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
from sse_starlette import ServerSentEvent

from dev_server.agents.registry import RegisteredAgent
from dev_server.agents.runner import new_id
from dev_server.agents.turns import LiveTurn, TurnStarter
from dev_server.api.chat_request import MAX_CONVERSATION_ID, ChatRequest
from dev_server.api.deps import AgentDep, AgentsDep, ForcedResource, LimitTurns, RecordingDep, StreamLogDep, TurnsDep
from dev_server.api.resume import parse_last_event_id, replay, resume
from dev_server.kernel.clock import Clock, spaced_iso
from dev_server.kernel.convert import ui_to_stored
from dev_server.kernel.errors import NotFound, upstream
from dev_server.kernel.messages import Message
from dev_server.kernel.stream_errors import StreamError
from dev_server.llm import ModelProviderError
from dev_server.memory.memory import ThreadNotOwned
from dev_server.memory.turn_rules import TurnIntent
from dev_server.storage.stream_log import StreamOwner
from dev_server.streaming import ui_chunks as ui
from dev_server.streaming.recorder import StreamRecording
from dev_server.streaming.sse import UI_STREAM_HEADERS, sse_frames, sse_response

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
    agent_id = body.agentId or agents.default_id
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
        return sse_response(replay(recording.log, running.stream_id, 0), UI_STREAM_HEADERS)
    except ModelProviderError as exc:
        raise upstream(exc.kind, exc.message) from exc
    chat_key = _chat_key(body.id)
    if recording is not None and (chat_key or thread_id):  # else nothing could name it to resume
        owner = StreamOwner(chat_key, thread_id, agent.id, resource, live.turn.user_message_id)
        recorded = recording.record(_frames(live), owner)  # runs to the end whether or not the client stays
        return sse_response(recorded.frames(), UI_STREAM_HEADERS)
    # The frames' own finally closes the turn; the background task covers a response that
    # never started streaming (closing is idempotent).
    return sse_response(_frames(live), UI_STREAM_HEADERS, close=live.aclose)


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
            for m, stamp in zip(body.messages, spaced_iso(len(body.messages), clock), strict=True)]


def _frames(live: LiveTurn) -> AsyncGenerator[ServerSentEvent, None]:
    """The reply's frames, numbered (a client resumes from an id)."""
    turn = live.turn
    ids = ui.ReplyIds(turn.reply_id, turn.agent.id, turn.model,
                      thread_id=turn.thread.id if turn.thread is not None else None,
                      resource_id=turn.thread.resource_id if turn.thread is not None else None,
                      first_step=turn.first_step)
    return sse_frames(ui.encode_reply(ids, live.first, live), error=_error_chunk, close=live.aclose, numbered=True)


def _error_chunk(error: StreamError) -> dict[str, Any]:
    return ui.error(error.message)
