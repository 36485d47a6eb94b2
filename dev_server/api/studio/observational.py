"""Observational Memory's read routes (Mastra's Studio REST API: memory status, memory config,
observational memory) and the OM fields of ``/memory/status`` and ``/memory/config``.

A record is found by the agent's OM scope: in thread scope by the thread (``threadId``),
checked against the request's ``Scope`` like every thread route (a foreign thread, like a
missing one, has ``record: null``);
in resource scope by the resource (the thread's own, else the one the request may see).
Both processes read the same database, so what the gateway observed is here at once.
An agent without OM gets Mastra's 400 ``Observational Memory is not enabled for this agent``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from opentelemetry import trace

from dev_server.agents.registry import RegisteredAgent
from dev_server.api.deps import AgentsDep, ConversationsDep, ForcedResource, MastraQuery, RunnerDep
from dev_server.api.query import iso_time
from dev_server.api.studio.access import OptionalAgent, QueryAgent, Scope, ScopeDep, scope_for
from dev_server.api.studio.memory_bodies import BufferStatusBody, ManualCycleBody
from dev_server.kernel.clock import to_iso
from dev_server.kernel.errors import BadRequest, NotFound, invalid
from dev_server.observability import spans
from dev_server.om.engine.cycle_context import om_model
from dev_server.om.engine.flags import settled
from dev_server.om.options.config import describe_om
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.om_records import OMRecord, OMRecordStore, lookup_key

router = APIRouter(prefix="/api/memory")
NOT_ENABLED = "Observational Memory is not enabled for this agent"
BUFFER_STATUS_WAIT_S = 30.0  # Mastra's waitForBuffering default


def _records(agent: RegisteredAgent) -> OMRecordStore:
    engine = agent.memory.observational_memory() if agent.memory is not None else None
    if engine is None:
        raise BadRequest(NOT_ENABLED)
    return engine.records


async def _key(agent: RegisteredAgent, thread_id: str | None, scope: Scope, store: ConversationStore) -> str | None:
    """The record's lookup key for this request, None when it names nothing to look up. A
    thread that does not exist yet (the Studio's new chat) or is another resource's has no
    record: the answer is ``record: null``, as for any thread not observed yet."""
    om = agent.memory.options.om  # type: ignore[union-attr]
    thread = await store.get_thread(thread_id) if thread_id else None
    if thread is not None and not scope.admits(thread):
        thread = None
    if om.scope == "thread":
        return lookup_key(thread.id, thread.resource_id) if thread else None
    resource = thread.resource_id if thread else (scope.alias[1] if scope.alias else scope.resource)
    return lookup_key(None, resource) if resource else None


@router.get("/observational-memory")
async def observational_memory(agent: QueryAgent, query: MastraQuery, scope: ScopeDep,
                               store: ConversationsDep) -> dict[str, Any]:
    records = _records(agent)
    key = await _key(agent, query.str("threadId"), scope, store)
    if key is None:
        return {"record": None, "history": []}
    created_from, created_to = iso_time(query.str("from"), "from"), iso_time(query.str("to"), "to")
    history = await records.history(key, limit=query.int("limit", 5, minimum=1, maximum=100),
                                    offset=query.int("offset", 0),
                                    created_from=to_iso(created_from) if created_from else None,
                                    created_to=to_iso(created_to) if created_to else None)
    record = await records.active(key)
    return {"record": record.to_api() if record else None, "history": [r.to_api() for r in history]}


@router.post("/observational-memory/buffer-status")
async def buffer_status(body: BufferStatusBody, agents: AgentsDep, forced: ForcedResource,
                        store: ConversationsDep) -> dict[str, Any]:
    """Waits (up to ``BUFFER_STATUS_WAIT_S``) until no background observer or reflector is
    at work on the record, in any process, then returns it."""
    agent = agents.get(body.agentId)
    if agent is None:
        raise NotFound(f"Agent with id {body.agentId} not found")
    records = _records(agent)
    key = await _key(agent, body.threadId, scope_for(forced, agent, body.resourceId), store)
    record = await settled(records, key, timeout_s=BUFFER_STATUS_WAIT_S) if key else None
    return {"record": record.to_api() if record else None}


async def _manual(kind: str, body: ManualCycleBody, agents: Any, forced: str | None, store: ConversationStore,
                  runner: Any) -> dict[str, Any]:
    """Observe or reflect a thread now (``dev_server.om.manual``; hooks and spans say ``trigger: manual``).
    In resource scope the record is the thread's resource's, and observing also takes the
    unobserved messages of the resource's other threads. ``{record, observed, reflected,
    parts}``; 404 for a thread the request may not see."""
    agent = agents.get(body.agentId)
    if agent is None:
        raise NotFound(f"Agent with id {body.agentId} not found")
    _records(agent)
    thread = await store.get_thread(body.threadId)
    if thread is None or not scope_for(forced, agent, body.resourceId).admits(thread):
        raise NotFound(f"Thread with id {body.threadId} not found")
    ids = spans.identity(agent_id=agent.id, agent_name=agent.definition.name, run_id=f"om-{kind}-{thread.id}",
                         thread_id=thread.id, resource_id=thread.resource_id)
    root = spans.start(runner.tracer, f"memory: {kind}", "memory_operation", ids,
                       attributes={"trigger": "manual", "operation": kind})

    def open_span(name: str, span_type: str, **kwargs: Any) -> Any:
        return spans.child(runner.tracer, name, span_type, ids, trace.set_span_in_context(root), **kwargs)

    memory = agent.memory
    try:
        model = await runner.llm.resolve(agent.definition.model)
        call = memory.observe if kind == "observe" else memory.reflect  # type: ignore[union-attr]
        result = await call(thread.id, thread.resource_id, llm=runner.llm, model=model, open_span=open_span)
    except BaseException as exc:
        spans.finish(root, error=exc)
        raise
    spans.finish(root, output={"observed": result.observed, "reflected": result.reflected})
    return result.to_api()


@router.post("/observational-memory/observe")
async def observe(body: ManualCycleBody, agents: AgentsDep, forced: ForcedResource, store: ConversationsDep,
                  runner: RunnerDep) -> dict[str, Any]:
    return await _manual("observe", body, agents, forced, store, runner)


@router.post("/observational-memory/reflect")
async def reflect(body: ManualCycleBody, agents: AgentsDep, forced: ForcedResource, store: ConversationsDep,
                  runner: RunnerDep) -> dict[str, Any]:
    return await _manual("reflect", body, agents, forced, store, runner)


def om_status(record: OMRecord | None) -> dict[str, Any]:
    if record is None:
        return {"enabled": True, "hasRecord": False}
    return {"enabled": True, "hasRecord": True, "originType": record.origin_type,
            "lastObservedAt": record.last_observed_at, "tokenCount": record.total_tokens_observed,
            "observationTokenCount": record.observation_token_count,
            "isObserving": record.is_observing is not None, "isReflecting": record.is_reflecting is not None}


@router.get("/status")
async def status(query: MastraQuery, agent: OptionalAgent, scope: ScopeDep, store: ConversationsDep) -> dict[str, Any]:
    if not query.str("agentId"):
        raise invalid("query", "agentId", "agentId is required")
    if agent is None:
        return {"result": True}
    if agent.memory is None:
        return {"result": False}
    engine = agent.memory.observational_memory()
    if engine is None:
        return {"result": True, "memoryType": "local", "observationalMemory": {"enabled": False}}
    key = await _key(agent, query.str("threadId"), scope, store)
    record = await engine.records.active(key) if key else None
    return {"result": True, "memoryType": "local", "observationalMemory": om_status(record)}


@router.get("/config")
async def config(agent: OptionalAgent, runner: RunnerDep) -> dict[str, Any]:
    if agent is None or agent.memory is None:
        return {"config": None}
    described = agent.memory.options.describe()
    index = agent.memory.semantic_index
    if index is not None:  # the embedder in use (null while it is still being resolved)
        described["embedder"] = index.describe()
    om = agent.memory.options.om
    if om is not None:
        llm = runner.llm
        agent_model = await llm.resolve(agent.definition.model)
        observer = await om_model(llm, om.observer_model, agent_model)
        reflector = await om_model(llm, om.reflector_model, agent_model)
        described["observationalMemory"] = {
            **describe_om(om), "observationModel": observer.mastra_id, "reflectionModel": reflector.mastra_id,
            "observationModelRouting": {"answeredBy": "local" if observer.is_local else observer.litellm_model,
                                        "local": observer.is_local, "reason": observer.reason},
            "reflectionModelRouting": {"answeredBy": "local" if reflector.is_local else reflector.litellm_model,
                                       "local": reflector.is_local, "reason": reflector.reason}}
    return {"config": described, "memoryType": "local"}
