"""Observational Memory as one memory holds it: its engine and background observer, built
once from the memory's options, and observation or reflection on demand (the Studio's
``POST /api/memory/observational-memory/observe|reflect``, ``dev_server.om.manual``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dev_server.kernel.messages import Message
from dev_server.kernel.model import LLMClient, ResolvedModel
from dev_server.kernel.ports import BackgroundJobs, WorkingMemoryDocument
from dev_server.kernel.processors import SpanOpener, no_span
from dev_server.om import manual
from dev_server.om.backlog import Backlog
from dev_server.om.engine.buffering import Buffering
from dev_server.om.engine.configured import configured_engine
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om.manual import ManualResult
from dev_server.om.options.config import ObservationalMemoryOptions
from dev_server.storage.conversations import ConversationStore


@dataclass(frozen=True)
class OMParts:
    engine: ObservationEngine
    buffering: Buffering  # the engine's background observer and reflector
    backlog: Backlog  # a backlog's bounded first observation and its background catch-up
    store: ConversationStore

    @classmethod
    def build(cls, options: ObservationalMemoryOptions, store: ConversationStore, background: BackgroundJobs | None,
              working: WorkingMemoryDocument | None, *, agent_id: str | None = None, memory: Any = None) -> OMParts:
        """``working``: the memory's working memory document when it has one (the observer
        may keep it: ``manageWorkingMemory``); ``agent_id`` / ``memory``: whose OM this is
        (the extractors' run context)."""
        engine = configured_engine(options, store.db, store.clock, working=working, threads=store,
                                   agent_id=agent_id, memory=memory)
        return cls(engine, Buffering(engine, background, store), Backlog(engine, background, store), store)

    async def observe(self, thread_id: str, resource_id: str, *, llm: LLMClient,
                      model: ResolvedModel | str | None = None, messages: list[Message] | None = None,
                      open_span: SpanOpener = no_span) -> ManualResult:
        """Observe the thread's unobserved messages now (in resource scope those of the
        resource's other threads too, into the resource's record); ``llm`` / ``model``: who
        answers when the OM model is the default (the agent's client and model)."""
        agent_model = await _agent_model(llm, model)
        return await manual.observe(self.engine, self.store, llm, agent_model, thread_id=thread_id,
                                    resource_id=resource_id, messages=messages, open_span=open_span)

    async def reflect(self, thread_id: str, resource_id: str, *, llm: LLMClient,
                      model: ResolvedModel | str | None = None, open_span: SpanOpener = no_span) -> ManualResult:
        """Reflect the thread's (resource scope: its resource's) whole observation log now."""
        agent_model = await _agent_model(llm, model)
        return await manual.reflect(self.engine, self.store, llm, agent_model, thread_id=thread_id,
                                    resource_id=resource_id, open_span=open_span)


async def _agent_model(llm: LLMClient, model: ResolvedModel | str | None) -> ResolvedModel:
    return model if isinstance(model, ResolvedModel) else await llm.resolve(model or "local/om")
