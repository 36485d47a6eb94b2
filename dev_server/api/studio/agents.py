"""Agent routes of the Mastra API (Mastra's Studio REST API: agents): list, detail, and runs.

Runs take only the new message(s); with ``memory: {thread, resource}`` the history comes
from memory and the turn is stored, exactly as on the gateway: every run starts through
``dev_server.agents.turns`` (serialised per thread, across processes). ``/stream`` and
``/stream-until-idle`` answer Mastra chunks over SSE; ``/generate`` the collected result as
JSON (its steps, tool calls and results: ``dev_server.api.studio.generate_result``); a run's
``clientTools`` are offered to the model for that run (``agent_input``);
``/send-message`` + ``/threads/subscribe`` are the Studio's default "signals" transport. A failure after the stream
started is an ``error`` chunk, then ``[DONE]``.
Each run counts against its caller's turn rate limit first (``dev_server.api.turn_limit``).

With authentication on, a thread id of another resource behaves as if it did not exist:
runs on it, subscribing to it and aborting it are a 404, and the signal hub is keyed by
the caller's resource, so nobody receives or stops another resource's run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator
from functools import partial
from typing import Any

from fastapi import APIRouter, Response
from sse_starlette import ServerSentEvent

from dev_server.agents.registry import RegisteredAgent
from dev_server.agents.signals import Key, ThreadHub
from dev_server.agents.turns import LiveTurn, TurnStarter
from dev_server.api.deps import AgentDep, AgentsDep, ConversationsDep, ForcedResource, LimitTurns, SignalsDep, TurnsDep
from dev_server.api.studio.access import effective_resource
from dev_server.api.studio.agent_input import (
    AbortBody,
    AgentRunBody,
    SendMessageBody,
    ThreadRef,
    input_messages,
    signal_contents,
)
from dev_server.api.studio.generate_result import generate_result, response_messages
from dev_server.kernel import ids
from dev_server.kernel.clock import now_iso
from dev_server.kernel.errors import ApiError, NotFound, upstream
from dev_server.kernel.events import StepFinish
from dev_server.kernel.stream_errors import StreamError, stream_error
from dev_server.kernel.tools import Tool
from dev_server.llm import ModelProviderError
from dev_server.memory.memory import ThreadNotOwned
from dev_server.storage.conversations import ConversationStore
from dev_server.streaming.mastra_chunks import RunIds, chunk, encode_run, error_chunk, usage_payload
from dev_server.streaming.sse import STREAM_HEADERS, encode, sse_frames, sse_response

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/agents", tags=["agents"])

_SSE: dict[int | str, dict[str, Any]] = {200: {"description": "Mastra chunks over SSE, ending [DONE]",
                                               "content": {"text/event-stream": {}}}}
_LIMITED: dict[int | str, dict[str, Any]] = {
    429: {"description": "Too many turns from this caller (DEV_SERVER_TURN_RATE_LIMIT); see Retry-After"}}


def summary(agent: RegisteredAgent, *, with_id: bool) -> dict[str, Any]:
    definition = agent.definition
    provider, _, model_id = definition.model.partition("/")
    body: dict[str, Any] = {
        "name": definition.name, "description": definition.description, "instructions": definition.instructions,
        "tools": {tool.name: tool_info(tool) for tool in definition.tools}, "agents": {}, "workflows": {}, "skills": [],
        "workspaceTools": [], "browserTools": [],
        "hasBrowser": False, "inputProcessors": [], "outputProcessors": [], "provider": provider,
        "modelId": model_id, "modelVersion": "v2", "supportsMemory": agent.memory is not None,
        "defaultOptions": {}, "defaultGenerateOptionsLegacy": {}, "defaultStreamOptionsLegacy": {}, "source": "code",
    }
    return {"id": definition.id, **body} if with_id else body


def tool_info(tool: Tool) -> dict[str, Any]:
    """Mastra's ``ToolInfo``: the schema is a string of superjson-wrapped JSON Schema."""
    return {"id": tool.name, "description": tool.description,
            "inputSchema": json.dumps({"json": tool.json_schema()})}


@router.get("")
async def list_agents(agents: AgentsDep) -> dict[str, Any]:
    return {agent.id: summary(agent, with_id=True) for agent in agents}


@router.get("/providers")
async def providers() -> dict[str, Any]:
    return {"providers": []}


@router.get("/{agent_id}")
async def agent_detail(agent: AgentDep) -> dict[str, Any]:
    return summary(agent, with_id=False)


@router.get("/{agent_id}/voice/speakers")
async def voice_speakers(agent: AgentDep) -> list[Any]:
    return []


@router.get("/{agent_id}/browser/session")
async def browser_session(agent: AgentDep) -> dict[str, Any]:
    return {"hasSession": False, "screencastAvailable": False}


# -- runs ---------------------------------------------------------------------------------


async def _start_run(turns: TurnStarter, agent: RegisteredAgent, body: AgentRunBody, forced: str | None) -> LiveTurn:
    """A turn from Mastra-shaped input; memory is used only when a thread is named."""
    thread_id = body.memory.thread_id if body.memory else None
    resource_id = _resource(forced, agent, body.memory.resource if body.memory else None)
    stored = input_messages(body.messages, thread_id or "", resource_id, turns.clock)
    try:
        return await turns.start(agent, thread_id=thread_id, resource_id=resource_id, incoming=stored,
                                 run_id=body.runId, client_tools=body.client_tools())
    except ThreadNotOwned:
        raise NotFound("Thread not found") from None
    except ModelProviderError as exc:
        raise upstream(exc.kind, exc.message) from exc


def _resource(forced: str | None, agent: RegisteredAgent, requested: str | None) -> str:
    return effective_resource(forced, agent, requested) or agent.definition.resource


def _ids(live: LiveTurn) -> RunIds:
    turn = live.turn
    return RunIds(run_id=turn.run_id, message_id=turn.reply_id, agent_id=turn.agent.id, model=turn.model)


def _stream_response(live: LiveTurn) -> Response:
    ids = _ids(live)
    frames = sse_frames(encode_run(ids, live.first, live, live.turn.first_step), error=partial(error_chunk, ids.run_id),
                        close=live.aclose, numbered=False)
    return sse_response(frames, STREAM_HEADERS, close=live.aclose)


@router.post("/{agent_id}/stream", responses=_SSE | _LIMITED, response_class=Response, dependencies=[LimitTurns])
async def stream(body: AgentRunBody, agent: AgentDep, turns: TurnsDep, forced: ForcedResource) -> Response:
    return _stream_response(await _start_run(turns, agent, body, forced))


@router.post("/{agent_id}/stream-until-idle", responses=_SSE | _LIMITED, response_class=Response,
             dependencies=[LimitTurns])
async def stream_until_idle(body: AgentRunBody, agent: AgentDep, turns: TurnsDep,
                            forced: ForcedResource) -> Response:
    return _stream_response(await _start_run(turns, agent, body, forced))


@router.post("/{agent_id}/generate", responses=_LIMITED, dependencies=[LimitTurns])
async def generate(body: AgentRunBody, agent: AgentDep, turns: TurnsDep, forced: ForcedResource,
                   conversations: ConversationsDep) -> dict[str, Any]:
    live = await _start_run(turns, agent, body, forced)
    steps: list[StepFinish] = []
    try:
        async for event in live:  # the runner collects the text and the finish on the turn
            if isinstance(event, StepFinish):
                steps.append(event)
    except ModelProviderError as exc:
        raise upstream(exc.kind, exc.message) from exc
    turn = live.turn
    usage = usage_payload(turn.finish.usage if turn.finish else None)
    reason = turn.finish.finish_reason if turn.finish else "other"
    reply = await conversations.get_message(turn.reply_id) if turn.thread else None
    result = generate_result(turn.run_id, steps)
    return {
        "text": turn.text, "usage": usage, "totalUsage": usage, "finishReason": reason, **result,
        "warnings": [], "request": {}, "reasoning": [], "reasoningText": None, "sources": [], "files": [],
        "response": {"id": turn.reply_id, "modelId": turn.model.model_id, "timestamp": now_iso(conversations.clock),
                     "modelMetadata": {"modelId": turn.model.model_id, "modelProvider": turn.model.provider},
                     "messages": response_messages(steps)},
        "runId": turn.run_id, "messages": [reply.to_api()] if reply else [], "rememberedMessages": [],
        **_trace_ids(live),
    }


def _trace_ids(live: LiveTurn) -> dict[str, str]:
    context = live.turn.span.get_span_context()
    if not context.is_valid:
        return {}
    return {"traceId": f"{context.trace_id:032x}", "spanId": f"{context.span_id:016x}"}


# -- signals transport --------------------------------------------------------------------


async def _hub_key(conversations: ConversationStore, hub: ThreadHub, agent: RegisteredAgent, thread_id: str,
                   forced: str | None, *, must_exist: bool = False) -> Key:
    """The hub key of a thread for this caller; 404 for a thread of another resource (and,
    with ``must_exist``, for one that does not exist and has no run on its way)."""
    key = (agent.id, forced or "", thread_id)
    if forced is not None:
        thread = await conversations.get_thread(thread_id)
        if thread is not None and thread.resource_id != forced:
            raise NotFound("Thread not found")
        if thread is None and must_exist and not hub.has_runs(key):
            raise NotFound("Thread not found")
    return key


@router.post("/{agent_id}/threads/subscribe", responses=_SSE, response_class=Response)
async def subscribe(body: ThreadRef, agent: AgentDep, hub: SignalsDep, forced: ForcedResource,
                    conversations: ConversationsDep) -> Response:
    key = await _hub_key(conversations, hub, agent, body.threadId, forced)
    queue = hub.subscribe(key)

    async def frames() -> AsyncGenerator[ServerSentEvent, None]:
        try:
            yield ServerSentEvent(comment="connected", sep="\n")
            while True:
                yield ServerSentEvent(data=encode(await queue.get()), sep="\n")
        finally:
            hub.unsubscribe(key, queue)

    return sse_response(frames(), STREAM_HEADERS, coalesce=False)


@router.post("/{agent_id}/send-message", responses=_LIMITED, dependencies=[LimitTurns])
async def send_message(body: SendMessageBody, agent: AgentDep, hub: SignalsDep, turns: TurnsDep,
                       forced: ForcedResource, conversations: ConversationsDep) -> dict[str, Any]:
    contents, metadata = signal_contents(body.message)
    resource_id = _resource(forced, agent, body.resourceId)
    if agent.memory is not None:  # refused now, not in the background run; and it exists once accepted
        try:
            await agent.memory.ensure_thread(body.threadId, resource_id)
        except ThreadNotOwned:
            raise NotFound("Thread not found") from None
    key = await _hub_key(conversations, hub, agent, body.threadId, forced)
    run_id = body.runId or str(ids.uuid4())
    stored = input_messages([{"role": "user", "content": contents}], body.threadId, resource_id, turns.clock)
    now = now_iso(turns.clock)
    signal = {"id": stored[-1].id, "type": "user", "contents": contents, "metadata": metadata,
              "acceptedAt": now, "createdAt": now}

    async def work() -> None:
        hub.publish(key, {"type": "data-user-message", "runId": run_id, "transient": True,
                          "data": {**signal, "tagName": "user"}})
        try:
            live = await turns.start(agent, thread_id=body.threadId, resource_id=resource_id, incoming=stored,
                                     run_id=run_id)
        except asyncio.CancelledError:
            hub.publish(key, chunk("abort", run_id, {}))
            raise
        except Exception as exc:
            hub.publish(key, error_chunk(run_id, _refusal(exc)))
            return
        try:
            async for item in encode_run(_ids(live), live.first, live, live.turn.first_step):
                hub.publish(key, item)
        except asyncio.CancelledError:
            hub.publish(key, chunk("abort", run_id, {}))
            raise
        except Exception as exc:
            hub.publish(key, error_chunk(run_id, stream_error(exc)))
        finally:
            await live.aclose()

    hub.start(key, run_id, work)
    return {"accepted": True, "runId": run_id, "signal": signal}


def _refusal(exc: Exception) -> StreamError:
    """A run that could not start, as the error its subscribers see."""
    if isinstance(exc, ThreadNotOwned):
        return StreamError("not_found", "Thread not found")
    if isinstance(exc, ApiError):
        return StreamError(type(exc).__name__, exc.message)
    return stream_error(exc)


@router.post("/{agent_id}/threads/abort")
async def abort(body: AbortBody, agent: AgentDep, hub: SignalsDep, forced: ForcedResource,
                conversations: ConversationsDep) -> dict[str, Any]:
    key = await _hub_key(conversations, hub, agent, body.threadId, forced, must_exist=True)
    return {"aborted": hub.abort(key, body.expectedRunId)}
