"""The decision order of docs/observational-memory.md#decision-order, run at every step of a turn.

Mastra's ``ObservationStep.prepare``, on the step's messages (``dev_server.om.turn_window``:
the thread's unobserved messages and the reply so far):

* the turn's first step only: buffered chunks are activated when the window reached its
  threshold or the provider's cache went cold (``dev_server.om.engine.activation``,
  ``dev_server.om.engine.idle``), and the log is reflected, or a buffered reflection swapped
  in or started (``ObservationEngine.maybe_reflect``);
* every step: a background observer is started when the window crossed another buffering
  interval (``dev_server.om.engine.buffering``); at the threshold what is buffered is
  activated, else the observer runs before the model is called, and the observed messages
  leave the window down to the retention floor (the turn's input stays on its first step).

What the reply so far holds goes to the observer with the rest; the reply is then split
(``ReplySoFar.split``): the observed or buffered part is stored as a message of its own and
the reply goes on as a new one, as Mastra seals it and rotates the response id. In resource
scope the other threads' unobserved messages count and are observed with this thread's
(``dev_server.om.engine.resource``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from dev_server.kernel.clock import epoch_ms, now_iso
from dev_server.kernel.events import PREVIOUS_REPLY, Durable
from dev_server.kernel.messages import Message
from dev_server.kernel.processors import StepContext
from dev_server.om.backlog import Backlog
from dev_server.om.engine.activation import Activation, Trigger, activate, interval_crossed
from dev_server.om.engine.buffering import Buffering, buffer_candidates, safe_prefix
from dev_server.om.engine.flags import flag_live
from dev_server.om.engine.idle import cold_cache, last_assistant
from dev_server.om.engine.observation_engine import CycleContext, ObservationEngine
from dev_server.om.engine.resource import observe_resource
from dev_server.om.engine.thread_metadata import activation_patch
from dev_server.om.engine.window import has_incomplete_tool_calls
from dev_server.om.options.activation import IdleSetting
from dev_server.om.tokens.counting import count_message, count_messages
from dev_server.storage.om_records import OMRecord

if TYPE_CHECKING:
    from dev_server.kernel.events import DataPart
    from dev_server.kernel.ports import ResourceConversations
    from dev_server.om.engine.buffering import PartSink
    from dev_server.om.turn_window import TurnWindow

log = logging.getLogger(__name__)

EMPTY_REPLY_TOKENS = count_message({"role": "assistant", "content": {"parts": []}}, cache=False)


class OMTurn(Protocol):
    """What the decisions read and update of a turn (``dev_server.om.processor.OMTurn``)."""

    ctx: CycleContext
    record: OMRecord
    window: TurnWindow
    sink: PartSink
    others: dict[str, list[Message]]
    context: list[tuple[str, str]]
    context_tokens: int
    announced: list[DataPart]
    backlog: bool
    last_reply: Message | None
    last_reply_read: bool
    status_record: OMRecord | None
    seeded_tokens: int

    def pending(self) -> int: ...

    def preserved(self, first: bool) -> set[str]: ...

    async def reflect_ahead(self, record: OMRecord) -> bool: ...


class StepDecisions:
    """The decisions of one memory's OM, for the turn (``OMTurn``) a step belongs to."""

    def __init__(self, store: ResourceConversations, engine: ObservationEngine, buffering: Buffering,
                 backlog: Backlog) -> None:
        self.store = store
        self.engine = engine
        self.buffering = buffering
        self.backlog = backlog

    async def thread_step(self, step: StepContext, turn: OMTurn, first: bool) -> None:
        options = self.engine.options
        ctx, window, record = turn.ctx, turn.window, turn.record
        buffering = options.async_buffering
        if first:
            if buffering and record.buffered_observation_chunks:
                trigger = await self._activation_trigger(step, turn, record)
                if trigger is not None:
                    done = await self._swap_in(ctx, record, trigger)
                    if done is None:
                        record = await self.engine.records.active(record.lookup_key) or record
                    else:
                        record = done.record
                        window.remove(done.message_ids)
            reflect_trigger = None
            if record.buffered_reflection:
                cold = await self._cold_cache(step, turn, options.reflection_triggers.after_idle,
                                              options.reflection_triggers.on_provider_change)
                reflect_trigger = cold.kind if cold else None
            record = await self.engine.maybe_reflect(ctx, record, trigger=reflect_trigger, buffer=turn.reflect_ahead)
            if self.backlog.over(record, window.pending):  # docs/observational-memory.md#backlog
                record = await self.backlog.first_step(ctx, record, window, turn.preserved(first))
                turn.backlog = True
        elif record.is_buffering_observation and not self.buffering.observing(record.lookup_key):
            # the background observer this turn started has ended: its chunk is on the record now.
            # The step's status still shows the turn's copy, as Mastra's does (its turn record
            # is read again only by activation, reflection and observation)
            turn.status_record = turn.status_record or record
            record = await self.engine.records.active(record.lookup_key) or record
        if turn.backlog:  # the catch-up observes; the turn neither buffers nor observes what it shows
            turn.record = record
            return
        threshold = options.message_threshold(record.observation_token_count)
        if buffering and window.pending < threshold:
            await self._maybe_buffer(step, turn, record, threshold)
        if window.pending >= threshold and not has_incomplete_tool_calls(window.newest()):
            before = record
            record = await self._threshold(step, turn, record, first)
            if record is not before:
                turn.status_record = None
        turn.record = record

    async def resource_step(self, step: StepContext, turn: OMTurn, first: bool) -> None:
        """Resource scope (no buffering there): this thread's window and the other threads'
        unobserved messages count together; at the threshold all of them are observed."""
        thread = step.thread
        assert thread is not None
        ctx, window, record = turn.ctx, turn.window, turn.record
        if first:
            record = await self.engine.maybe_reflect(ctx, record)
        threshold = self.engine.options.message_threshold(record.observation_token_count)
        if turn.pending() >= threshold and not has_incomplete_tool_calls(window.newest()):
            messages = window.unobserved()
            async with self.engine.hooks.cycle(ctx, record, "observation", "turn-sync") as run_ctx:
                observed = await observe_resource(self.engine, run_ctx, record, {thread.id: messages, **turn.others})
            if observed is not None:
                await self._split_observed(step, turn, messages)
                window.drop_observed({m.id for m in messages}, floor=0, preserve=turn.preserved(first))
                record = await self.engine.maybe_reflect(ctx, observed)
                turn.others, turn.context, turn.context_tokens = {}, [], 0
        turn.record = record

    # -- buffering and activation (2.4, 2.5) -------------------------------------------

    async def _maybe_buffer(self, step: StepContext, turn: OMTurn, record: OMRecord, threshold: int) -> None:
        """Start a background observer when the window crossed another interval; when the
        reply so far is among what it gets, the reply is split there first."""
        records = self.engine.records
        window = turn.window
        pending = window.pending
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
        candidates = safe_prefix(buffer_candidates(window.unobserved(), record))
        draft = window.draft()
        if draft is not None and any(m.id == draft.id for m in candidates) and \
                count_messages(candidates, memo=turn.ctx.counted) >= buffer_tokens / 2:
            sealed = await self._split(step, turn)
            candidates = [sealed if sealed is not None and m.id == sealed.id else m for m in candidates]
        if await self.buffering.start_observation(turn.ctx, record, candidates, turn.sink,
                                                  announce=turn.announced.append):
            record.is_buffering_observation = now_iso(records.clock)  # this step's status shows it running
            if turn.status_record is not None:
                turn.status_record.is_buffering_observation = record.is_buffering_observation

    async def _activation_trigger(self, step: StepContext, turn: OMTurn, record: OMRecord) -> Trigger | None:
        """Why buffered chunks activate on the turn's first step (2.5): a cold cache, else the threshold."""
        options = self.engine.options
        cold = await self._cold_cache(step, turn, options.observation_triggers.after_idle,
                                      options.observation_triggers.on_provider_change)
        if cold is not None:
            return cold
        if turn.window.pending >= options.message_threshold(record.observation_token_count):
            return Trigger("threshold")
        return None

    async def _cold_cache(self, step: StepContext, turn: OMTurn, idle: IdleSetting,
                          on_provider_change: bool) -> Trigger | None:
        """``dev_server.om.engine.idle.cold_cache`` against the thread's last reply: from the window, else
        read from storage once per turn (observations and reflections may both ask)."""
        if step.model is None or (idle is None and not on_provider_change):
            return None
        if not turn.last_reply_read:
            turn.last_reply = last_assistant(turn.window.messages) or await self._last_reply(step)
            turn.last_reply_read = True
        last = turn.last_reply
        return cold_cache(step.model, last, idle, on_provider_change,
                          epoch_ms(self.engine.records.clock)) if last is not None else None

    async def _last_reply(self, step: StepContext) -> Message | None:
        assert step.thread is not None
        found, _ = await self.store.page_messages(step.thread.id, per_page=1, direction="DESC", roles=["assistant"])
        return found[0] if found else None

    async def _swap_in(self, ctx: CycleContext, record: OMRecord, trigger: Trigger,
                       durable: Durable = PREVIOUS_REPLY) -> Activation | None:
        """Activate buffered chunks, report each, and reset the buffering interval."""
        done, parts = await activate(self.engine.options, self.engine.records, record, trigger, ctx.thread_id)
        if done is None:
            return None
        for part in parts:
            ctx.emit(part, durable=durable)  # Mastra: onto the last assistant message so far
        # the newest chunk's hints and title, as Mastra writes them (chunks carry no hints:
        # the ones from before the activated messages are stale now)
        await self.engine.patch_hints(ctx, activation_patch(done.chunks))
        await self.engine.records.set_buffer_boundary(done.record.id, 0)
        done.record.last_buffered_at_tokens = 0
        log.info("thread %s: %d buffered chunks activated (%s)", ctx.thread_id, len(done.chunks), trigger.kind)
        return done

    # -- the threshold (2.3) -----------------------------------------------------------

    async def _threshold(self, step: StepContext, turn: OMTurn, record: OMRecord, first: bool) -> OMRecord:
        """The window reached the threshold: activate what is buffered (after waiting for a
        running buffer), else observe now; then the observed messages leave the window down
        to the retention floor (never the turn's input on its first step)."""
        options = self.engine.options
        ctx, window = turn.ctx, turn.window
        observed_ids: set[str] = set()
        if options.async_buffering:
            record = await self.buffering.wait(record.lookup_key) or record
            window.refilter(record)
            if window.pending < options.message_threshold(record.observation_token_count):
                return record
            if record.buffered_observation_chunks:
                # on the first step Mastra has already opened the new reply for this path's markers
                # (an empty assistant message, which the status then counts: its framing)
                done = await self._swap_in(ctx, record, Trigger("threshold"), durable=True if first else PREVIOUS_REPLY)
                if done is not None:
                    record, observed_ids = done.record, done.message_ids
                    if first:
                        turn.seeded_tokens = EMPTY_REPLY_TOKENS
        if not observed_ids:
            messages = window.unobserved()
            if has_incomplete_tool_calls(messages):
                return record
            observed = await self.engine.observe(ctx, record, messages, window.pending)
            if observed is None:
                return record
            record, observed_ids = observed, {m.id for m in messages}
            await self._split_observed(step, turn, messages)
        window.drop_observed(observed_ids, floor=options.retention_floor(), preserve=turn.preserved(first))
        record = await self.engine.maybe_reflect(ctx, record, buffer=turn.reflect_ahead)
        if record.last_buffered_at_tokens:  # the buffering interval starts over (a swap has reset it already)
            await self.engine.records.set_buffer_boundary(record.id, 0)
            record.last_buffered_at_tokens = 0
        return record

    # -- the reply so far ----------------------------------------------------------------

    async def _split_observed(self, step: StepContext, turn: OMTurn, observed: list[Message]) -> None:
        """The reply so far was observed with the rest: it is stored as it was observed."""
        draft = turn.window.draft()
        if draft is not None and any(m.id == draft.id for m in observed):
            await self._split(step, turn)

    async def _split(self, step: StepContext, turn: OMTurn) -> Message | None:
        sealed = await step.reply.split() if step.reply is not None else None
        if sealed is not None:
            turn.window.split_off(sealed)
            log.info("thread %s: the reply so far was stored as %s; the reply goes on as a new message",
                     turn.ctx.thread_id, sealed.id)
        return sealed
