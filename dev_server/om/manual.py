"""Observation and reflection on demand: ``Memory.observe`` / ``reflect``, the Studio's
``POST /api/memory/observational-memory/observe|reflect``, and ``ObservationalMemory``, usable
on its own with a store and a model, outside any agent (Mastra's standalone ``observe()``).

* ``observe``: the thread's unobserved messages (or the ``messages`` given, which need not be
  stored) are observed now, whatever the threshold; then the log is reflected if it reached
  ``reflection.observationTokens``. Nothing unobserved: no cycle, the record as it is.
* ``reflect``: the whole log is reflected now, whatever its size (a new generation), like
  Mastra's ``reflect()``; an empty log is left alone.

The cycles are the engine's (``dev_server.om.engine.observation_engine``, with its model choice and hooks), with
``trigger: "manual"`` in hooks and
spans, the same flags (a cycle already running on the record makes this a no-op) and the
same failure rule (a failed cycle leaves the record as it was; its error is in the end hook
and in the returned ``parts``). Buffered chunks waiting for activation do not hold ``observe``
back: their messages are observed with the rest, and the store drops the chunks that this
cycle covered (``OMRecordStore.update_active_observations``), so activation never writes
them into the log a second time.

In resource scope the record is the resource's: ``observe`` gathers, as a turn does
(``dev_server.om.engine.resource``), the thread's unobserved messages from its own cursor (or the
``messages`` given) and the unobserved messages of the resource's other threads, and
observes them in one cycle (batched by ``maxTokensPerBatch``); each thread's cursor moves.
``reflect`` reflects the resource's log.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, now_iso
from dev_server.kernel.events import DataPart
from dev_server.kernel.messages import Message
from dev_server.kernel.model import LLMClient, ResolvedModel
from dev_server.kernel.processors import SpanOpener, no_span
from dev_server.om.engine.configured import configured_engine
from dev_server.om.engine.cycle_context import CycleContext
from dev_server.om.engine.flags import STALE_FLAG_S
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om.engine.resource import observe_resource, other_threads
from dev_server.om.engine.window import unobserved
from dev_server.om.options.config import ObservationalMemoryOptions, observational_memory_options
from dev_server.om.options.hooks import current_trigger
from dev_server.om.tokens.counting import count_messages
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.om_records import OMRecord, thread_om


@dataclass
class ManualResult:
    record: OMRecord | None
    observed: bool = False
    reflected: bool = False
    parts: list[dict[str, Any]] = field(default_factory=list)  # the cycles' data-om-* parts

    def to_api(self) -> dict[str, Any]:
        return {"record": self.record.to_api() if self.record else None, "observed": self.observed,
                "reflected": self.reflected, "parts": self.parts}


def _context(llm: LLMClient, agent_model: ResolvedModel, thread_id: str, hints: dict[str, Any] | None,
             parts: list[dict[str, Any]], open_span: SpanOpener) -> CycleContext:
    def emit(part: DataPart, *args: Any, **kwargs: Any) -> None:
        parts.append({"type": f"data-{part.name}", "data": part.data})
    return CycleContext(llm, agent_model, thread_id, hints, emit, open_span)


async def _record(engine: ObservationEngine, thread_id: str, resource_id: str) -> OMRecord:
    """The thread's record (thread scope) or its resource's (resource scope), created if none."""
    return await engine.records.active(engine.key(thread_id, resource_id)) or await engine.records.initialize(
        scope=engine.options.scope, thread_id=thread_id, resource_id=resource_id, config=engine.options.snapshot(),
        timezone=None)


async def _observe_resource(engine: ObservationEngine, store: ConversationStore, ctx: CycleContext, record: OMRecord,
                            thread_id: str, resource_id: str, given: Sequence[Message] | None,
                            cursor: str | None) -> OMRecord | None:
    """Resource scope, as a turn does it (``dev_server.om.engine.resource``): this thread's unobserved
    messages from its own cursor (or the ``given`` ones) and those of the resource's other
    threads, observed together; None when there was nothing to observe or nothing observed."""
    if given is None:
        given = await store.messages_since(thread_id, cursor)
    mine = unobserved(list(given), record, cursor=cursor)
    others = await other_threads(store, record, resource_id, thread_id)
    by_thread = {t: ms for t, ms in {thread_id: mine, **others}.items() if ms}
    if not by_thread:
        return None
    async with engine.hooks.cycle(ctx, record, "observation", "manual") as run_ctx:
        return await observe_resource(engine, run_ctx, record, by_thread)


async def observe(engine: ObservationEngine, store: ConversationStore, llm: LLMClient, agent_model: ResolvedModel, *,
                  thread_id: str, resource_id: str, messages: Sequence[Message] | None = None,
                  open_span: SpanOpener = no_span) -> ManualResult:
    token = current_trigger.set("manual")
    try:
        record = await _record(engine, thread_id, resource_id)
        thread = await store.get_thread(thread_id)
        parts: list[dict[str, Any]] = []
        hints = thread_om(thread.metadata) if thread else None
        ctx = _context(llm, agent_model, thread_id, hints, parts, open_span)
        result = ManualResult(record, parts=parts)
        if engine.options.scope == "resource":
            observed = await _observe_resource(engine, store, ctx, record, thread_id, resource_id, messages,
                                               (hints or {}).get("lastObservedAt"))
            if observed is not None:
                result.record, result.observed = observed, True
            pending: list[Message] = []
        else:
            if messages is None:
                messages = await store.messages_since(thread_id, record.last_observed_at)
            pending = unobserved(list(messages), record)
        if pending:
            observed = await engine.observe(ctx, record, pending, count_messages(pending))
            if observed is not None:
                result.record, result.observed = observed, True
        if result.record is not None and result.record.active_observations.strip():
            reflected = await engine.maybe_reflect(ctx, result.record)
            result.reflected = reflected.id != result.record.id
            result.record = reflected
        return result
    finally:
        current_trigger.reset(token)


async def reflect(engine: ObservationEngine, store: ConversationStore, llm: LLMClient, agent_model: ResolvedModel, *,
                  thread_id: str, resource_id: str, open_span: SpanOpener = no_span) -> ManualResult:
    token = current_trigger.set("manual")
    try:
        record = await _record(engine, thread_id, resource_id)
        thread = await store.get_thread(thread_id)
        parts: list[dict[str, Any]] = []
        ctx = _context(llm, agent_model, thread_id, thread_om(thread.metadata) if thread else None, parts, open_span)
        result = ManualResult(record, parts=parts)
        if not record.active_observations.strip():
            return result
        if not await engine.records.claim_flag(record.id, "is_reflecting", stale_after_s=STALE_FLAG_S):
            return result
        try:
            new = await engine.reflect(ctx, record, engine.options.reflection.observation_tokens)
        finally:
            await engine.records.release_flag(record.id, "is_reflecting")
        result.record, result.reflected = new, new.id != record.id
        return result
    finally:
        current_trigger.reset(token)


def as_message(item: Message | dict[str, Any], thread_id: str, resource_id: str, *,
               clock: Clock = SYSTEM_CLOCK) -> Message:
    """A message given to the standalone API: a ``Message``, or ``{role, content, id?, createdAt?}``
    with ``content`` a string or Mastra's ``{parts: [...]}``."""
    if isinstance(item, Message):
        return item
    content = item.get("content", "")
    if isinstance(content, str):
        content = {"format": 2, "parts": [{"type": "text", "text": content}]}
    return Message(str(item.get("id") or uuid.uuid4()), thread_id, resource_id, str(item.get("role", "user")),
                   content, str(item.get("createdAt") or now_iso(clock)))


class ObservationalMemory:
    """Observational Memory on its own: a conversation store, a model, Mastra's options.

    ``ObservationalMemory(store, model="openai/gpt-4o-mini", options={"hooks": {...}}, llm=client)``;
    ``store`` is an open ``ConversationStore`` (its database also holds the OM records);
    ``llm`` is the caller's model client (a ``LiteLLMClient`` with no provider keys: the
    local model answers): a feature never builds its own."""

    def __init__(self, store: ConversationStore, model: Any = "default", *, options: Any = None,
                 llm: LLMClient) -> None:
        given = dict(options or {}) if not isinstance(options, ObservationalMemoryOptions) else None
        if given is not None:
            given.setdefault("model", model)
            parsed = observational_memory_options(given)
        else:
            parsed = options
        if parsed is None:
            raise ValueError("observationalMemory.enabled must not be false for a standalone ObservationalMemory")
        self.store = store
        self.options = parsed
        self.llm = llm
        self.engine = configured_engine(parsed, store.db, store.clock)

    async def _agent_model(self) -> ResolvedModel:
        # "the agent's model" for the default choice: there is no agent, so Mastra's default id
        # (which answers locally when its key is not set)
        return await self.llm.resolve(self.options.observer_choice.label)

    async def observe(self, thread_id: str, resource_id: str, *,
                      messages: Sequence[Message | dict[str, Any]] | None = None) -> ManualResult:
        given = None if messages is None else [as_message(m, thread_id, resource_id, clock=self.store.clock)
                                          for m in messages]
        return await observe(self.engine, self.store, self.llm, await self._agent_model(), thread_id=thread_id,
                             resource_id=resource_id, messages=given)

    async def reflect(self, thread_id: str, resource_id: str) -> ManualResult:
        return await reflect(self.engine, self.store, self.llm, await self._agent_model(), thread_id=thread_id,
                             resource_id=resource_id)

    async def get_record(self, thread_id: str, resource_id: str) -> OMRecord | None:
        return await self.engine.records.active(self.engine.key(thread_id, resource_id))
