"""Agent routes of the Mastra API (STUDIO-REST.md section 4): list, detail, and runs.

Runs take only the new message(s); with ``memory: {thread, resource}`` the history comes
from memory and the turn is stored, exactly as on the gateway (the same ``TurnRunner``).
``/stream`` answers Mastra chunks over SSE; ``/generate`` the collected result as JSON;
``/send-message`` + ``/threads/subscribe`` are the Studio's default "signals" transport.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter, Request, Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from app.agents.registry import RegisteredAgent
from app.agents.runner import Turn, TurnRunner
from app.api.bodies import json_body
from app.api.studio.access import agent_or_404, effective_resource, forced_resource
from app.api.studio.agent_input import AgentRunBody, input_messages, parse_body
from app.clock import now_iso
from app.errors import NotFound, invalid, upstream
from app.llm import Finish, ModelProviderError, TextDelta
from app.memory.convert import ui_to_model
from app.memory.memory import ThreadNotOwned
from app.streaming.mastra_chunks import chunk, encode_turn, usage_payload
from app.streaming.sse import DONE, STREAM_HEADERS, encode

router = APIRouter(prefix="/api/agents")


def summary(agent: RegisteredAgent, *, with_id: bool) -> dict[str, Any]:
    definition = agent.definition
    provider, _, model_id = definition.model.partition("/")
    body: dict[str, Any] = {
        "name": definition.name, "description": definition.description, "instructions": definition.instructions,
        "tools": {}, "agents": {}, "workflows": {}, "skills": [], "workspaceTools": [], "browserTools": [],
        "hasBrowser": False, "inputProcessors": [], "outputProcessors": [], "provider": provider,
        "modelId": model_id, "modelVersion": "v2", "supportsMemory": agent.memory is not None,
        "defaultOptions": {}, "defaultGenerateOptionsLegacy": {}, "defaultStreamOptionsLegacy": {}, "source": "code",
    }
    return {"id": definition.id, **body} if with_id else body


@router.get("")
async def list_agents(request: Request) -> dict[str, Any]:
    await forced_resource(request)
    return {agent.id: summary(agent, with_id=True) for agent in request.app.state.agents}


@router.get("/providers")
async def providers() -> dict[str, Any]:
    return {"providers": []}


@router.get("/{agent_id}")
async def agent_detail(agent_id: str, request: Request) -> dict[str, Any]:
    await forced_resource(request)
    return summary(agent_or_404(request, agent_id), with_id=False)


@router.get("/{agent_id}/voice/speakers")
async def voice_speakers(agent_id: str, request: Request) -> list[Any]:
    agent_or_404(request, agent_id)
    return []


@router.get("/{agent_id}/browser/session")
async def browser_session(agent_id: str, request: Request) -> dict[str, Any]:
    agent_or_404(request, agent_id)
    return {"hasSession": False, "screencastAvailable": False}


async def _prepare(request: Request, agent: RegisteredAgent, messages: Any, thread_id: str | None,
                   resource: str | None, run_id: str | None = None) -> Turn:
    """A turn from Mastra-shaped input; memory is used only when a thread is named."""
    runner: TurnRunner = request.app.state.runner
    forced = await forced_resource(request)
    resource_id = effective_resource(forced, agent, resource) or agent.definition.resource
    stored = input_messages(messages, thread_id or "", resource_id)
    with_memory = agent.memory is not None and thread_id is not None
    context = [] if with_memory else [
        m for m in (ui_to_model({"role": s.role, "parts": s.content["parts"]}) for s in stored) if m]
    try:
        return await runner.prepare(agent, thread_id=thread_id, resource_id=resource_id, incoming=stored,
                                    client_context=context, run_id=run_id)
    except ThreadNotOwned:
        raise NotFound("Thread not found") from None


async def _first_event(request: Request, turn: Turn) -> tuple[TextDelta | Finish, AsyncIterator]:
    events = request.app.state.runner.run(turn)
    try:
        return await anext(events), events
    except ModelProviderError as exc:
        raise upstream(exc.kind, exc.message) from exc


async def _start_run(request: Request, agent_id: str) -> Turn:
    agent = agent_or_404(request, agent_id)
    body: AgentRunBody = parse_body(await json_body(request), AgentRunBody)
    memory = body.memory
    return await _prepare(request, agent, body.messages, memory.thread_id if memory else None,
                          memory.resource if memory else None, body.runId)


@router.post("/{agent_id}/stream")
@router.post("/{agent_id}/stream-until-idle")
async def stream(agent_id: str, request: Request) -> Response:
    turn = await _start_run(request, agent_id)
    first, events = await _first_event(request, turn)

    async def frames() -> AsyncIterator[ServerSentEvent]:
        try:
            async for item in encode_turn(turn, first, events):
                yield ServerSentEvent(data=encode(item), sep="\n")
        finally:
            with anyio.CancelScope(shield=True):
                await events.aclose()
        yield ServerSentEvent(data=DONE, sep="\n")

    return EventSourceResponse(frames(), headers=STREAM_HEADERS, sep="\n", ping=15)


@router.post("/{agent_id}/generate")
async def generate(agent_id: str, request: Request) -> dict[str, Any]:
    turn = await _start_run(request, agent_id)
    _, events = await _first_event(request, turn)
    try:
        async for _ in events:  # the runner collects the text and the finish on the turn
            pass
    except ModelProviderError as exc:
        raise upstream(exc.kind, exc.message) from exc
    usage = usage_payload(turn.finish.usage if turn.finish else None)
    reason = turn.finish.finish_reason if turn.finish else "other"
    reply = await request.app.state.conversations.get_message(turn.reply_id) if turn.thread else None
    return {
        "text": turn.text, "usage": usage, "totalUsage": usage, "finishReason": reason,
        "steps": [{"text": turn.text, "finishReason": reason, "usage": usage, "toolCalls": [], "toolResults": []}],
        "warnings": [], "request": {}, "reasoning": [], "reasoningText": None, "toolCalls": [], "toolResults": [],
        "sources": [], "files": [],
        "response": {"id": turn.reply_id, "modelId": turn.model.model_id, "timestamp": now_iso(),
                     "modelMetadata": {"modelId": turn.model.model_id, "modelProvider": turn.model.provider},
                     "messages": []},
        "runId": turn.run_id, "messages": [reply.to_api()] if reply else [], "rememberedMessages": [],
        **_trace_ids(turn),
    }


def _trace_ids(turn: Turn) -> dict[str, str]:
    context = turn.span.get_span_context()
    if not context.is_valid:
        return {}
    return {"traceId": f"{context.trace_id:032x}", "spanId": f"{context.span_id:016x}"}


# -- signals transport --------------------------------------------------------------------


def _thread_key(agent_id: str, data: Any) -> tuple[str, str]:
    if not isinstance(data, dict) or not isinstance(data.get("threadId"), str) or not data["threadId"]:
        raise invalid("body", "threadId", "threadId is required")
    return agent_id, data["threadId"]


@router.post("/{agent_id}/threads/subscribe")
async def subscribe(agent_id: str, request: Request) -> Response:
    agent_or_404(request, agent_id)
    await forced_resource(request)
    key = _thread_key(agent_id, await json_body(request))
    hub = request.app.state.signals
    queue = hub.subscribe(key)

    async def frames() -> AsyncIterator[ServerSentEvent]:
        try:
            yield ServerSentEvent(comment="connected", sep="\n")
            while True:
                yield ServerSentEvent(data=encode(await queue.get()), sep="\n")
        finally:
            hub.unsubscribe(key, queue)

    return EventSourceResponse(frames(), headers=STREAM_HEADERS, sep="\n", ping=15)


def _signal_contents(message: Any) -> tuple[Any, dict[str, Any]]:
    if isinstance(message, (str, list)):
        return message, {}
    if isinstance(message, dict) and "contents" in message:
        metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
        return message["contents"], metadata
    raise invalid("body", "message", "message must be a string, parts, or {contents, metadata}")


@router.post("/{agent_id}/send-message")
async def send_message(agent_id: str, request: Request) -> dict[str, Any]:
    agent = agent_or_404(request, agent_id)
    data = await json_body(request)
    key = _thread_key(agent_id, data)
    contents, metadata = _signal_contents(data.get("message"))
    if isinstance(contents, str) and not contents.strip():
        raise invalid("body", "message", "message must not be empty")
    run_id = data.get("runId") if isinstance(data.get("runId"), str) else str(uuid.uuid4())
    turn = await _prepare(request, agent, [{"role": "user", "content": contents}], key[1],
                          data.get("resourceId") if isinstance(data.get("resourceId"), str) else None, run_id)
    now = now_iso()
    signal = {"id": turn.user_message_id or str(uuid.uuid4()), "type": "user", "contents": contents,
              "metadata": metadata, "acceptedAt": now, "createdAt": now}
    hub = request.app.state.signals
    runner: TurnRunner = request.app.state.runner

    async def work() -> None:
        hub.publish(key, {"type": "data-user-message", "runId": run_id, "transient": True,
                          "data": {**signal, "tagName": "user"}})
        events = runner.run(turn)
        try:
            first = await anext(events)
            async for item in encode_turn(turn, first, events):
                hub.publish(key, item)
        except ModelProviderError as exc:
            hub.publish(key, chunk("error", run_id, {"error": {"name": exc.kind, "message": exc.message}}))
        except asyncio.CancelledError:
            hub.publish(key, chunk("abort", run_id, {}))
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await events.aclose()

    hub.start(key, run_id, work)
    return {"accepted": True, "runId": run_id, "signal": signal}


@router.post("/{agent_id}/threads/abort")
async def abort(agent_id: str, request: Request) -> dict[str, Any]:
    agent_or_404(request, agent_id)
    data = await json_body(request)
    key = _thread_key(agent_id, data)
    expected = data.get("expectedRunId") if isinstance(data.get("expectedRunId"), str) else None
    return {"aborted": request.app.state.signals.abort(key, expected)}
