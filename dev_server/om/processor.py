"""Observational Memory as processors of the step loop (docs/architecture.md#decisions).

With OM on, ``ObservationalMemoryStep`` takes the history window's place. Its turn object
(``OMTurn``, ``dev_server.kernel.processors``) decides once per turn, on its first
``before_step``, and keeps what it decided (``TurnView``) for the later steps: it reads
the active record (created on first use) and the thread's unobserved messages
(``dev_server.om.engine.window``), counts them (``dev_server.om.tokens.counting``), then follows the decision
order of docs/observational-memory.md#decision-order: buffered chunks are activated when the window reached
its threshold or the provider's cache went cold (``dev_server.om.engine.activation``, ``dev_server.om.engine.idle``);
the log is reflected, or a buffered reflection swapped in or started (``dev_server.om.engine.observation_engine``);
a background observer is started when the window crossed another buffering interval
(``dev_server.om.engine.buffering``); at the threshold what is buffered is activated, else the observer
runs before the model is called, and the observed messages leave the window down to the
retention floor, never the turn's own input. In resource scope the other threads' unobserved
messages join the window and the observation (``dev_server.om.engine.resource``).

Every step then gets, after the agent's instructions, the observation system messages
(``dev_server.om.prompting.context``), a continuation reminder as the first conversation message when there
are observations, the remaining messages, and a transient ``data-om-status`` part; the
pending-token count is written to the record once per turn. Later steps reuse what the
first loaded: the turn holds the thread's lease, so nothing else writes it meanwhile.

With ``retrieval`` on, the observation messages also carry the recall instructions
(``dev_server.om.retrieval.instructions``; in retrieval scope ``resource`` even before anything was observed),
and every step offers the ``recall`` tool (``dev_server.om.retrieval.recall_tool``), built once per turn.

At the reply's ``finish``: ``TokenEstimates`` writes each part's token estimate into the
reply before it is saved, so later turns count it from the cache (5.2); ``BufferOnIdle``
buffers what a finished turn left (``bufferOnIdle``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

from dev_server.kernel.clock import epoch_ms, now_iso
from dev_server.kernel.convert import to_model_messages
from dev_server.kernel.events import PREVIOUS_REPLY, DataPart
from dev_server.kernel.messages import Message
from dev_server.kernel.ports import SemanticSearch
from dev_server.kernel.processors import ReplyContext, StepContext, TurnProcessor
from dev_server.kernel.tools import Tool
from dev_server.om.engine.activation import Activation, Trigger, activate, interval_crossed, projected_removal
from dev_server.om.engine.buffering import Buffering, PartSink, buffer_candidates, safe_prefix
from dev_server.om.engine.flags import clear_stale, flag_live
from dev_server.om.engine.idle import cold_cache, last_assistant
from dev_server.om.engine.observation_engine import CycleContext, ObservationEngine
from dev_server.om.engine.parts import status_part
from dev_server.om.engine.resource import observe_resource, other_conversations, other_threads, other_tokens
from dev_server.om.engine.temporal import gap_signal, is_gap_marker, marks, signal_part_data
from dev_server.om.engine.thread_metadata import activation_patch
from dev_server.om.engine.window import drop_observed, has_incomplete_tool_calls, unobserved
from dev_server.om.options.activation import IdleSetting
from dev_server.om.options.extractors import read_path, shown
from dev_server.om.prompting.context import (
    build_context_system_messages,
    continuation_model_message,
    other_conversations_message,
)
from dev_server.om.retrieval.instructions import retrieval_instructions
from dev_server.om.retrieval.recall_tool import Recall
from dev_server.om.tokens.counting import count_message, count_messages
from dev_server.storage.om_records import OMRecord, thread_om

if TYPE_CHECKING:
    from dev_server.kernel.ports import ResourceConversations

log = logging.getLogger(__name__)
ReflectAhead = Callable[[OMRecord], Awaitable[bool]]  # starts a buffered reflection (dev_server.om.engine.buffering)


@lru_cache(maxsize=32)
def observation_messages(observations: str, today: date, current_task: str | None,
                         suggested_response: str | None,
                         others: tuple[tuple[str, str], ...] = (), retrieval: str | None = None,
                         retrieval_always: bool = False,
                         extracted: tuple[tuple[str, str], ...] = ()) -> tuple[str, ...]:
    """The observation system messages, built once per log and day: a 40k-token log takes
    ~10 ms to optimise and date, and it only changes when an observation or a reflection
    writes it (or the day turns, for its relative dates). ``others``: the resource's other
    threads (resource scope), shown even before anything was observed. ``retrieval``: the
    recall instructions, shown before anything was observed only if ``retrieval_always``."""
    if not observations.strip():
        empty = [retrieval] if retrieval and retrieval_always else []
        return tuple(empty + ([other_conversations_message(list(others))] if others else []))
    return tuple(build_context_system_messages(observations, now=datetime.combine(today, time(12)),
                                               current_task=current_task, suggested_response=suggested_response,
                                               other_conversations=list(others) or None,
                                               retrieval_instructions=retrieval, extracted=extracted))


def local_timezone() -> str:
    return str(datetime.now().astimezone().tzinfo)


@dataclass
class TurnView:
    """What the turn's first step decided, kept for the turn's later steps."""

    record: OMRecord
    messages: list[Message]
    pending_tokens: int
    hints: dict[str, Any]
    projected_removal: int = 0  # message tokens an activation now would remove
    others: tuple[tuple[str, str], ...] = ()  # resource scope: the other threads' unobserved messages
    system: list[dict[str, Any]] = field(default_factory=list)  # the observation messages, built once
    recall: Tool | None = None  # retrieval: the turn's recall tool


class OMTurn(TurnProcessor):
    """Observational Memory's part in one turn: ``view`` is None until the first step
    decided (activation, reflection, buffering, observation); every step then shows it."""

    name = "observational-memory"

    def __init__(self, processor: ObservationalMemoryStep) -> None:
        self.processor = processor
        self.view: TurnView | None = None
        self.last_reply: Message | None = None  # the thread's last reply, for a cold cache
        self.last_reply_read = False  # read once per turn: observations and reflections may both ask

    async def before_step(self, step: StepContext) -> None:
        if step.thread is None:
            return
        if self.view is None:
            self.view = await self.processor.decide(step, self)
        self.processor.show(step, self.view)


class ObservationalMemoryStep:
    name = "observational-memory"

    def __init__(self, store: ResourceConversations, search: SemanticSearch, engine: ObservationEngine,
                 buffering: Buffering) -> None:
        self.store = store
        self.search = search  # the recall tool's search by meaning (retrieval ``vector``)
        self.engine = engine
        self.buffering = buffering

    def start_turn(self, step: StepContext) -> OMTurn:
        return OMTurn(self)

    async def decide(self, step: StepContext, turn: OMTurn) -> TurnView:
        """The turn's decision (on its first step): what the model sees of the thread, and
        the observation messages and tool every step of the turn gets."""
        assert step.thread is not None
        view = await self._first_step(step, turn)
        retrieval = self.engine.options.retrieval
        view.system = [{"role": "system", "content": text} for text in observation_messages(
            view.record.active_observations, self.engine.records.clock.now().astimezone().date(),
            view.hints.get("currentTask"), view.hints.get("suggestedResponse"), view.others,
            retrieval_instructions(retrieval) if retrieval else None,
            retrieval is not None and retrieval.scope == "resource", self._extracted(view.hints))]
        step.history = self._history(view)  # stored messages are read repaired (conversations._loads)
        step.window = view.messages
        if retrieval is not None:
            turn_input = {m.id for m in view.messages[-max(1, step.input_count):] if m.role == "user"}
            view.recall = Recall(self.store, self.search, self.engine, retrieval).tool(step.thread, turn_input)
        return view

    def show(self, step: StepContext, view: TurnView) -> None:
        """Every step: the observation messages, the recall tool and the status part."""
        step.system.extend(view.system)
        if view.recall is not None:
            step.add_tool(view.recall)
        step.emit(status_part(self.engine.options, view.record, pending_tokens=view.pending_tokens,
                              step=step.index, projected_removal=view.projected_removal,
                              thread_id=step.thread.id if step.thread else None))

    def _extracted(self, hints: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        """The user extractors' last values the actor sees (docs/observational-memory.md#context,
        ``includePreviousExtraction``)."""
        options = self.engine.options
        found: dict[str, str] = {}
        for extractor in (*options.observation.extract, *options.reflection.extract):
            value = read_path(hints, extractor.metadata_key) if extractor.include_previous else None
            if value not in (None, "", {}, []):
                found.setdefault(extractor.slug, shown(value))
        return tuple(found.items())

    def _history(self, view: TurnView) -> list[dict[str, Any]]:
        history = to_model_messages(view.messages)
        if view.system:  # Mastra: whenever OM injects system messages (the recall instructions alone too)
            history.insert(0, continuation_model_message())
        return history

    async def _first_step(self, step: StepContext, turn: OMTurn) -> TurnView:
        """docs/observational-memory.md#decision-order on the turn's first step: activation,
        reflection, buffering, and the threshold's observation, in that order."""
        thread = step.thread
        assert thread is not None
        options = self.engine.options
        records = self.engine.records
        # a read on every turn; the write that creates generation 0 only on a thread's first
        record = await records.active(self.engine.key(thread.id, thread.resource_id)) or await records.initialize(
            scope=options.scope, thread_id=thread.id, resource_id=thread.resource_id, config=options.snapshot(),
            timezone=local_timezone())
        ctx = CycleContext(step.llm, step.model, thread.id, thread_om(thread.metadata), step.emit, step.open_span)
        for flag in await clear_stale(records, record):
            log.info("thread %s: cleared a stale %s flag left by a process that died", thread.id, flag)
        if options.scope == "resource":
            return await self._resource_step(step, ctx, record)
        stored = await self.store.messages_since(thread.id, record.last_observed_at)
        messages = unobserved(stored, record)
        if options.temporal_markers and step.input_count > 0:
            messages = await self._temporal_gap(step, messages)
        pending = count_messages(messages, memo=ctx.counted)
        if step.llm is not None and step.model is not None:
            sink = PartSink(records, thread.id, step)
            buffering = options.async_buffering
            reflect_ahead = (lambda r: self.buffering.start_reflection(ctx, r, sink)) if buffering else None
            if buffering and record.buffered_observation_chunks:
                trigger = await self._activation_trigger(step, turn, record, messages, pending)
                if trigger is not None:
                    record, messages = await self._activate(ctx, record, trigger, messages)
                    pending = count_messages(messages, memo=ctx.counted)
            reflect_trigger = None
            if record.buffered_reflection:
                cold = await self._cold_cache(step, turn, messages, options.reflection_triggers.after_idle,
                                              options.reflection_triggers.on_provider_change)
                reflect_trigger = cold.kind if cold else None
            record = await self.engine.maybe_reflect(ctx, record, trigger=reflect_trigger, buffer=reflect_ahead)
            threshold = options.message_threshold(record.observation_token_count)
            if buffering and pending < threshold:
                await self._maybe_buffer(ctx, record, messages, pending, threshold, sink)
            if pending >= threshold and not has_incomplete_tool_calls(messages):
                record, messages = await self._threshold(step, ctx, record, messages, pending, reflect_ahead)
                pending = count_messages(messages, memo=ctx.counted)
        await self._store_pending(record, pending)
        projected = projected_removal(options, record) if record.buffered_observation_chunks else 0
        return TurnView(record, messages, pending, ctx.hints or {}, projected)

    async def _store_pending(self, record: OMRecord, pending: int) -> None:
        """``pendingMessageTokens``: the window written once per turn (the UI's and activation's input)."""
        if record.pending_message_tokens != pending:
            await self.engine.records.set_pending_message_tokens(record.id, pending)
            record.pending_message_tokens = pending

    async def _resource_step(self, step: StepContext, ctx: CycleContext, record: OMRecord) -> TurnView:
        """Step 0 in resource scope (``dev_server.om.engine.resource``): this thread's unobserved messages
        from its own cursor, the other threads' as context; at the threshold all of them
        are observed together."""
        thread = step.thread
        assert thread is not None
        options = self.engine.options
        store = self.store
        cursor = thread_om(thread.metadata).get("lastObservedAt")
        messages = unobserved(await store.messages_since(thread.id, cursor), record, cursor=cursor)
        if options.temporal_markers and step.input_count > 0:
            messages = await self._temporal_gap(step, messages)
        others = await other_threads(store, record, thread.resource_id, thread.id)
        context = other_conversations(others, options.obscure_thread_ids)
        pending = count_messages(messages, memo=ctx.counted) + other_tokens(context)
        if step.llm is not None and step.model is not None:
            record = await self.engine.maybe_reflect(ctx, record)
            threshold = options.message_threshold(record.observation_token_count)
            if pending >= threshold and not has_incomplete_tool_calls(messages):
                async with self.engine.hooks.cycle(ctx, record, "observation", "turn-sync") as run_ctx:
                    observed = await observe_resource(self.engine, run_ctx, record, {thread.id: messages, **others})
                if observed is not None:
                    preserve = {m.id for m in messages[-max(1, step.input_count):]}
                    counted = partial(count_message, memo=ctx.counted)
                    messages = drop_observed(messages, {m.id for m in messages}, floor=0, preserve=preserve,
                                             count=counted, total=count_messages(messages, memo=ctx.counted))
                    record = await self.engine.maybe_reflect(ctx, observed)
                    context = []
                    pending = count_messages(messages, memo=ctx.counted)
        await self._store_pending(record, pending)
        return TurnView(record, messages, pending, ctx.hints or {}, others=tuple(context))

    # -- buffering and activation (2.4, 2.5) -------------------------------------------

    async def _maybe_buffer(self, ctx: CycleContext, record: OMRecord, messages: list[Message], pending: int,
                            threshold: int, sink: PartSink) -> None:
        records = self.engine.records
        buffer_tokens = self.engine.options.observation.buffer_tokens
        assert buffer_tokens is not False
        boundary = record.last_buffered_at_tokens
        if boundary > 0 and pending < 0.5 * boundary:  # a stale boundary (the window shrank meanwhile)
            boundary = 0
        if flag_live(record.is_buffering_observation, clock=records.clock) or not interval_crossed(
                pending, boundary, threshold, buffer_tokens):
            return
        await records.set_buffer_boundary(record.id, pending)
        record.last_buffered_at_tokens = pending
        if await self.buffering.start_observation(ctx, record, safe_prefix(buffer_candidates(messages, record)), sink):
            record.is_buffering_observation = now_iso(records.clock)  # this turn's status shows it running

    async def _activation_trigger(self, step: StepContext, turn: OMTurn, record: OMRecord, messages: list[Message],
                                  pending: int) -> Trigger | None:
        """Why buffered chunks activate on the turn's first step (2.5): a cold cache, else the threshold."""
        options = self.engine.options
        cold = await self._cold_cache(step, turn, messages, options.observation_triggers.after_idle,
                                      options.observation_triggers.on_provider_change)
        if cold is not None:
            return cold
        if pending >= options.message_threshold(record.observation_token_count):
            return Trigger("threshold")
        return None

    async def _cold_cache(self, step: StepContext, turn: OMTurn, messages: list[Message], idle: IdleSetting,
                          on_provider_change: bool) -> Trigger | None:
        """``dev_server.om.engine.idle.cold_cache`` against the thread's last reply: from the window, else
        read from storage once per turn (observations and reflections may both ask)."""
        if step.model is None or (idle is None and not on_provider_change):
            return None
        if not turn.last_reply_read:
            turn.last_reply, turn.last_reply_read = last_assistant(messages) or await self._last_reply(step), True
        last = turn.last_reply
        return cold_cache(step.model, last, idle, on_provider_change,
                          epoch_ms(self.engine.records.clock)) if last is not None else None

    async def _last_reply(self, step: StepContext) -> Message | None:
        assert step.thread is not None
        found, _ = await self.store.page_messages(step.thread.id, per_page=1, direction="DESC",
                                                         roles=["assistant"])
        return found[0] if found else None

    async def _activate(self, ctx: CycleContext, record: OMRecord, trigger: Trigger,
                        messages: list[Message]) -> tuple[OMRecord, list[Message]]:
        done = await self._swap_in(ctx, record, trigger)
        if done is None:
            return await self.engine.records.active(record.lookup_key) or record, messages
        return done.record, [m for m in messages if m.id not in done.message_ids]

    async def _swap_in(self, ctx: CycleContext, record: OMRecord, trigger: Trigger) -> Activation | None:
        """Activate buffered chunks, report each, and reset the buffering interval."""
        done, parts = await activate(self.engine.options, self.engine.records, record, trigger, ctx.thread_id)
        if done is None:
            return None
        for part in parts:
            ctx.emit(part, durable=PREVIOUS_REPLY)  # Mastra: onto the last assistant message so far
        # the newest chunk's hints and title, as Mastra writes them (chunks carry no hints:
        # the ones from before the activated messages are stale now)
        await self.engine.patch_hints(ctx, activation_patch(done.chunks))
        await self.engine.records.set_buffer_boundary(done.record.id, 0)
        done.record.last_buffered_at_tokens = 0
        log.info("thread %s: %d buffered chunks activated (%s)", ctx.thread_id, len(done.chunks), trigger.kind)
        return done

    async def _threshold(self, step: StepContext, ctx: CycleContext, record: OMRecord, messages: list[Message],
                         pending: int, reflect_ahead: ReflectAhead | None) -> tuple[OMRecord, list[Message]]:
        """The window reached the threshold: activate what is buffered (after waiting for a
        running buffer), else observe now; then the observed messages leave the window down
        to the retention floor, never the turn's own input."""
        options = self.engine.options
        preserve = {m.id for m in messages[-max(1, step.input_count):]}
        observed_ids: set[str] = set()
        if options.async_buffering:
            record = await self.buffering.wait(record.lookup_key) or record
            messages = unobserved(messages, record)
            pending = count_messages(messages, memo=ctx.counted)
            if pending < options.message_threshold(record.observation_token_count):
                return record, messages
            if record.buffered_observation_chunks:
                done = await self._swap_in(ctx, record, Trigger("threshold"))
                if done is not None:
                    record, observed_ids = done.record, done.message_ids
        if not observed_ids:
            if has_incomplete_tool_calls(messages):
                return record, messages
            observed = await self.engine.observe(ctx, record, messages, pending)
            if observed is None:
                return record, messages
            record, observed_ids = observed, {m.id for m in messages}
        messages = drop_observed(messages, observed_ids, floor=options.retention_floor(), preserve=preserve,
                                 count=partial(count_message, memo=ctx.counted), total=pending)
        record = await self.engine.maybe_reflect(ctx, record, buffer=reflect_ahead)
        if record.last_buffered_at_tokens:  # the buffering interval starts over (a swap has reset it already)
            await self.engine.records.set_buffer_boundary(record.id, 0)
            record.last_buffered_at_tokens = 0
        return record, messages

    # -- temporal markers (docs/observational-memory.md#temporal-markers) ------------------

    async def _temporal_gap(self, step: StepContext, messages: list[Message]) -> list[Message]:
        """After a user message that follows a silence of ``TEMPORAL_GAP_MS`` or more (since
        the window's message before it), store a gap signal (``dev_server.om.engine.temporal``):
        the model and the observer read it after the message; the stream gets a transient
        ``data-signal`` part. The signal is part of the turn's input (``step.input_count``)."""
        assert step.thread is not None
        newest = messages[-1] if messages and messages[-1].role == "user" else None
        if newest is None or any(is_gap_marker(m) and marks(m, newest.id) for m in messages):
            return messages
        previous = next((m for m in reversed(messages[:-1]) if not is_gap_marker(m)), None)
        if previous is None:  # nothing before it in the window (Mastra's rule: no marker then)
            return messages
        gap = gap_signal(newest, previous, max(now_iso(self.engine.records.clock), newest.created_at))
        if gap is None:
            return messages
        await self.store.append_messages(step.thread.id, [gap])
        step.input_count += 1
        step.emit(DataPart("signal", signal_part_data(gap), transient=True))
        return [*messages, gap]


class TokenEstimates(TurnProcessor):
    """Stateless: its own turn object."""

    name = "token-estimates"

    def start_turn(self, step: StepContext) -> TokenEstimates:
        return self

    async def finish(self, done: ReplyContext) -> None:
        count_message(done.reply)  # fills the per-part cache in place; the reply is saved with it


class BufferOnIdle(TurnProcessor):
    """``bufferOnIdle``: once a turn ends, buffer what is unobserved (the reply included),
    whatever its size, so an idle thread's next activation has a chunk ready (2.3, turn end).
    Stateless: its own turn object."""

    name = "om-buffer-on-idle"

    def __init__(self, store: ResourceConversations, engine: ObservationEngine, buffering: Buffering) -> None:
        self.store = store
        self.engine = engine
        self.buffering = buffering

    def start_turn(self, step: StepContext) -> BufferOnIdle:
        return self

    async def finish(self, done: ReplyContext) -> None:
        if done.failed or done.interrupted or done.llm is None or done.model is None:
            return
        record = await self.engine.records.active(self.engine.key(done.thread.id, done.thread.resource_id))
        if record is None or flag_live(record.is_buffering_observation, clock=self.engine.records.clock):
            return
        stored = await self.store.messages_since(done.thread.id, record.last_observed_at)
        candidates = safe_prefix(buffer_candidates(unobserved([*stored, done.reply], record), record))
        sink = PartSink(self.engine.records, done.thread.id)
        ctx = CycleContext(done.llm, done.model, done.thread.id, thread_om(done.thread.metadata), sink.emit)
        await self.buffering.start_observation(ctx, record, candidates, sink, skip_minimum=True)
