"""Gateway chat: ``POST /api/chat`` (and ``/api/agents/{agentId}/chat``) for ``useChat``.

The response is the AI SDK UI message stream v1 over SSE. Everything that can be refused
is refused before the stream starts, as a 4xx JSON error with nothing written; the first
model event is awaited before the response starts too, so a provider that fails at once
(bad key, 429, timeout) is a JSON error, while the user's message is already stored.
After that, failures are an ``error`` chunk. Every frame has an SSE ``id``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Request, Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from app.agents.registry import DEFAULT_AGENT_ID, AgentRegistry
from app.agents.runner import Turn, TurnRunner, new_id
from app.api.chat_request import ChatRequest, parse_chat_request
from app.auth import resource_for
from app.clock import spaced_iso
from app.errors import NotFound, upstream
from app.llm import Finish, ModelProviderError, TextDelta
from app.streaming.text_events import text_events
from app.memory.convert import ui_to_model, ui_to_stored
from app.memory.memory import ThreadNotOwned
from app.streaming import ui_chunks as ui
from app.streaming.sse import DONE, UI_STREAM_HEADERS, encode

router = APIRouter()


@router.post("/api/chat")
async def chat(request: Request) -> Response:
    return await _chat(request, None)


@router.post("/api/agents/{agent_id}/chat")
async def agent_chat(agent_id: str, request: Request) -> Response:
    return await _chat(request, agent_id)


@router.get("/api/chat/{chat_id}/stream")
async def resume_stream(chat_id: str) -> Response:
    # useChat({resume: true}) asks here after a reload; 204 = no stream to resume.
    return Response(status_code=204)


async def _chat(request: Request, path_agent_id: str | None) -> Response:
    body = parse_chat_request(await request.body())
    agents: AgentRegistry = request.app.state.agents
    agent_id = path_agent_id or body.agentId or DEFAULT_AGENT_ID
    agent = agents.get(agent_id)
    if agent is None:
        raise NotFound(f"Agent with id {agent_id} not found")
    authenticator = request.app.state.authenticator
    resource = resource_for(await authenticator(request)) if authenticator else agent.definition.resource

    runner: TurnRunner = request.app.state.runner
    thread_id = (body.conversationId or new_id("mastra_thread_")) if agent.memory else None
    # With memory the model's context comes from storage; only a memoryless agent reads the client's.
    client_context = [] if agent.memory else [m for m in (ui_to_model(x.model_dump()) for x in body.messages) if m]
    try:
        turn = await runner.prepare(agent, thread_id=thread_id, resource_id=resource,
                                    incoming=_incoming(body, thread_id, resource), client_context=client_context)
    except ThreadNotOwned:
        raise NotFound("Thread not found") from None

    events = runner.run(turn)
    try:
        first = await anext(events)
    except ModelProviderError as exc:
        raise upstream(exc.kind, exc.message) from exc
    return EventSourceResponse(_frames(turn, first, events), headers=UI_STREAM_HEADERS, sep="\n", ping=15)


def _incoming(body: ChatRequest, thread_id: str | None, resource: str) -> list:
    if thread_id is None:
        return []
    return [ui_to_stored(m.model_dump(exclude_none=True), thread_id, resource, stamp)
            for m, stamp in zip(body.messages, spaced_iso(len(body.messages)))]


async def _frames(turn: Turn, first: TextDelta | Finish, events: AsyncIterator) -> AsyncIterator[ServerSentEvent]:
    count = 0

    def frame(chunk: dict[str, Any] | str) -> ServerSentEvent:
        nonlocal count
        count += 1
        return ServerSentEvent(data=chunk if isinstance(chunk, str) else encode(chunk), id=str(count), sep="\n")

    text_id = f"text-{turn.reply_id}"
    yield frame(ui.start(turn.reply_id, _start_metadata(turn)))
    yield frame(ui.start_step())
    try:
        async for kind, *value in text_events(first, events):
            if kind == "text-start":
                yield frame(ui.text_start(text_id))
            elif kind == "text-delta":
                yield frame(ui.text_delta(text_id, value[0]))
            elif kind == "text-end":
                yield frame(ui.text_end(text_id))
            elif kind == "finish":
                yield frame(ui.finish_step())
                yield frame(ui.finish(value[0].finish_reason, _finish_metadata(value[0])))
            else:
                yield frame(ui.error(value[0].message))
    finally:
        with anyio.CancelScope(shield=True):
            await events.aclose()
    yield frame(DONE)


def _start_metadata(turn: Turn) -> dict[str, Any]:
    metadata: dict[str, Any] = {"agentId": turn.agent.id, "model": turn.model.mastra_id,
                                "provider": turn.model.provider, "local": turn.model.is_local}
    if turn.thread is not None:
        metadata["threadId"] = turn.thread.id
        metadata["resourceId"] = turn.thread.resource_id
    return metadata


def _finish_metadata(finish: Finish) -> dict[str, Any]:
    return {"usage": {"inputTokens": finish.usage.input_tokens, "outputTokens": finish.usage.output_tokens}}
