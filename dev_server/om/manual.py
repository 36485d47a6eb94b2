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

The standalone class is where Mastra applies ``observation.activateAfterIdle`` /
``observation.activateOnProviderChange`` (the top-level values as fallback) and
``reflection.activateAfterIdle`` / ``reflection.activateOnProviderChange``: its ``activate``
(Mastra's ``activate``) swaps buffered work in by them (``dev_server.om.options.activation``).
It also takes Mastra's ``onDebugEvent``: one event per observation or reflection that starts
(``observation_triggered`` / ``reflection_triggered``) and ends (``observation_complete`` /
``reflection_complete``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dev_server.kernel import ids
from dev_server.kernel.clock import SYSTEM_CLOCK, Clock, epoch_ms, now_iso
from dev_server.kernel.events import DataPart
from dev_server.kernel.messages import Message
from dev_server.kernel.model import LLMClient, ResolvedModel
from dev_server.kernel.processors import SpanOpener, no_span
from dev_server.om.engine.activation import Trigger, activate
from dev_server.om.engine.configured import configured_engine
from dev_server.om.engine.cycle_context import CycleContext
from dev_server.om.engine.flags import STALE_FLAG_S
from dev_server.om.engine.idle import cold_cache, last_assistant
from dev_server.om.engine.observation_engine import ObservationEngine
from dev_server.om.engine.resource import observe_resource, other_threads
from dev_server.om.engine.window import unobserved
from dev_server.om.options.config import ObservationalMemoryOptions, observational_memory_options
from dev_server.om.options.hooks import current_trigger
from dev_server.om.tokens.counting import count_messages
from dev_server.storage.conversations import ConversationStore
from dev_server.storage.om_records import OMRecord, thread_om

log = logging.getLogger(__name__)
DebugListener = Callable[[dict[str, Any]], Any]


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
             parts: list[dict[str, Any]], open_span: SpanOpener,
             debug: Callable[[DataPart], None] | None = None) -> CycleContext:
    def emit(part: DataPart, *args: Any, **kwargs: Any) -> None:
        parts.append({"type": f"data-{part.name}", "data": part.data})
        if debug is not None:
            debug(part)
    return CycleContext(llm, agent_model, thread_id, hints, emit, open_span)


_DEBUG_EVENTS = {("om-observation-start", "observation"): "observation_triggered",
                 ("om-observation-end", "observation"): "observation_complete",
                 ("om-observation-start", "reflection"): "reflection_triggered",
                 ("om-observation-end", "reflection"): "reflection_complete"}


def debug_events(listener: DebugListener | None, resource_id: str,
                 clock: Clock) -> Callable[[DataPart], None] | None:
    """``onDebugEvent`` fed from a cycle's parts: Mastra's event names, with ``type``,
    ``timestamp`` (a datetime), ``threadId``, ``resourceId`` and what the part says
    (``pendingTokens`` / ``inputTokens`` at a start; ``observations`` and, for a reflection,
    ``inputTokens`` / ``outputTokens`` at the end). A listener that raises is logged."""
    if listener is None:
        return None

    def on_part(part: DataPart) -> None:
        data = part.data or {}
        kind = _DEBUG_EVENTS.get((part.name, data.get("operationType")))
        if kind is None:
            return
        event: dict[str, Any] = {"type": kind, "timestamp": clock.now(), "threadId": data.get("threadId"),
                                 "resourceId": resource_id}
        if kind == "observation_triggered":
            event["pendingTokens"] = data.get("tokensToObserve")
        elif kind == "reflection_triggered":
            event["inputTokens"] = data.get("tokensToObserve")
        else:
            event["observations"] = data.get("observations")
            if kind == "reflection_complete":
                event.update(inputTokens=data.get("tokensObserved"), outputTokens=data.get("observationTokens"))
        try:
            listener(event)
        except Exception:
            log.exception("onDebugEvent raised on %s (ignored)", kind)
    return on_part


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
                  open_span: SpanOpener = no_span, debug: Callable[[DataPart], None] | None = None) -> ManualResult:
    token = current_trigger.set("manual")
    try:
        record = await _record(engine, thread_id, resource_id)
        thread = await store.get_thread(thread_id)
        parts: list[dict[str, Any]] = []
        hints = thread_om(thread.metadata) if thread else None
        ctx = _context(llm, agent_model, thread_id, hints, parts, open_span, debug)
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
                  thread_id: str, resource_id: str, open_span: SpanOpener = no_span,
                  debug: Callable[[DataPart], None] | None = None) -> ManualResult:
    token = current_trigger.set("manual")
    try:
        record = await _record(engine, thread_id, resource_id)
        thread = await store.get_thread(thread_id)
        parts: list[dict[str, Any]] = []
        ctx = _context(llm, agent_model, thread_id, thread_om(thread.metadata) if thread else None, parts, open_span,
                       debug)
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
    return Message(str(item.get("id") or ids.uuid4()), thread_id, resource_id, str(item.get("role", "user")),
                   content, str(item.get("createdAt") or now_iso(clock)))


class ObservationalMemory:
    """Observational Memory on its own: a conversation store, a model, Mastra's options.

    ``ObservationalMemory(store, model="openai/gpt-4o-mini", options={"hooks": {...}}, llm=client)``;
    ``store`` is an open ``ConversationStore`` (its database also holds the OM records; Mastra's
    ``storage``); ``llm`` is the caller's model client (a ``LiteLLMClient`` with no provider
    keys: the local model answers): a feature never builds its own. ``options`` may hold
    Mastra's ``onDebugEvent`` (a function given each debug event, a dict), which only this
    class takes; ``on_debug_event`` is the same."""

    def __init__(self, store: ConversationStore, model: Any = "default", *, options: Any = None,
                 llm: LLMClient, on_debug_event: DebugListener | None = None) -> None:
        given = dict(options or {}) if not isinstance(options, ObservationalMemoryOptions) else None
        if given is not None:
            listener = given.pop("onDebugEvent", None)
            if listener is not None and not callable(listener):
                raise ValueError("observationalMemory.onDebugEvent must be a function")
            on_debug_event = on_debug_event or listener
            given.setdefault("model", model)
            parsed = observational_memory_options(given)
        else:
            parsed = options
        if parsed is None:
            raise ValueError("observationalMemory.enabled must not be false for a standalone ObservationalMemory")
        self.store = store
        self.options = replace(parsed, standalone=True)  # the activation triggers Mastra applies here
        self.llm = llm
        self.on_debug_event = on_debug_event
        self.engine = configured_engine(self.options, store.db, store.clock)

    async def _agent_model(self) -> ResolvedModel:
        # "the agent's model" for the default choice: there is no agent, so Mastra's default id
        # (which answers locally when its key is not set)
        return await self.llm.resolve(self.options.observer_choice.label)

    def _debug(self, resource_id: str) -> Callable[[DataPart], None] | None:
        return debug_events(self.on_debug_event, resource_id, self.store.clock)

    async def observe(self, thread_id: str, resource_id: str, *,
                      messages: Sequence[Message | dict[str, Any]] | None = None) -> ManualResult:
        given = None if messages is None else [as_message(m, thread_id, resource_id, clock=self.store.clock)
                                          for m in messages]
        return await observe(self.engine, self.store, self.llm, await self._agent_model(), thread_id=thread_id,
                             resource_id=resource_id, messages=given, debug=self._debug(resource_id))

    async def reflect(self, thread_id: str, resource_id: str) -> ManualResult:
        return await reflect(self.engine, self.store, self.llm, await self._agent_model(), thread_id=thread_id,
                             resource_id=resource_id, debug=self._debug(resource_id))

    async def activate(self, thread_id: str, resource_id: str, *, model: str | None = None,
                       check_threshold: bool = True) -> ManualResult:
        """Mastra's ``activate``: the record's buffered observation chunks go into the log
        with no model call. With ``check_threshold`` (the default) only when the unobserved
        messages reached the threshold, or when the cache is cold for ``model`` (the actor's
        model id, Mastra's ``currentModel``: its provider's lifetime for ``"auto"``, and a
        provider change against the thread's last reply; without it, no provider change and
        ``"auto"`` is 5 minutes) by ``observation.activateAfterIdle`` /
        ``activateOnProviderChange`` (the top-level values as fallback). A buffered
        reflection is swapped in likewise, by ``reflection.activateAfterIdle`` /
        ``activateOnProviderChange`` or at ``reflection.observationTokens`` (as a turn does;
        past ``reflection.blockAfter`` without one, a turn would reflect, and so does this)."""
        record = await self.get_record(thread_id, resource_id)
        result = ManualResult(record)
        if record is None or not (record.buffered_observation_chunks or record.buffered_reflection):
            return result
        actor = await self.llm.resolve(model) if model else None
        thread = await self.store.get_thread(thread_id)
        ctx = _context(self.llm, actor or await self._agent_model(), thread_id,
                       thread_om(thread.metadata) if thread else None, result.parts, no_span, self._debug(resource_id))
        messages = unobserved(await self.store.messages_since(thread_id, record.last_observed_at), record)
        found, _ = await self.store.page_messages(thread_id, per_page=1, direction="DESC", roles=["assistant"])
        last = last_assistant(messages) or (found[0] if found else None)
        now = epoch_ms(self.store.clock)

        def cold(triggers: Any) -> Trigger | None:
            return cold_cache(actor, last, triggers.after_idle, triggers.on_provider_change, now) \
                if last is not None and check_threshold else None

        options = self.options
        if record.buffered_observation_chunks:
            trigger = cold(options.observation_triggers)
            if trigger is None and (not check_threshold or count_messages(messages) >= options.message_threshold(
                    record.observation_token_count)):
                trigger = Trigger("threshold")
            if trigger is not None:
                record = await _swap_in(self.engine, ctx, record, trigger) or record
        if record.buffered_reflection:
            reflection = cold(options.reflection_triggers)
            kind = reflection.kind if reflection is not None else None if check_threshold else "threshold"
            record = await self.engine.maybe_reflect(ctx, record, trigger=kind, buffer=_no_background)
        result.record = record
        return result

    async def get_record(self, thread_id: str, resource_id: str) -> OMRecord | None:
        return await self.engine.records.active(self.engine.key(thread_id, resource_id))


async def _no_background(record: OMRecord) -> bool:
    return False  # the standalone class starts no background work


async def _swap_in(engine: ObservationEngine, ctx: CycleContext, record: OMRecord, trigger: Trigger) -> OMRecord | None:
    """Activate buffered chunks as a turn does: their parts, the thread's stale hints
    cleared, the buffering interval reset; the new record, or None if nothing was swapped."""
    done, parts = await activate(engine.options, engine.records, record, trigger, ctx.thread_id)
    if done is None:
        return None
    for part in parts:
        ctx.emit(part, durable=True)
    await engine.patch_hints(ctx, {"currentTask": None, "suggestedResponse": None,
                                   "lastObservedAt": done.record.last_observed_at})
    await engine.records.set_buffer_boundary(done.record.id, 0)
    done.record.last_buffered_at_tokens = 0
    return done.record
