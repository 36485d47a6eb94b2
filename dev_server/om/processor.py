"""Observational Memory as processors of the step loop (docs/architecture.md#decisions).

With OM on, ``ObservationalMemoryStep`` takes the history window's place. Its turn object
(``OMTurn``, ``dev_server.kernel.processors``) decides at every step of the turn, as Mastra
does. On the turn's first step it reads the active record (created on first use) and the
thread's unobserved messages (``dev_server.om.engine.window``; with ``temporalMarkers`` a gap
marker is added) and counts them once (``dev_server.om.tokens.counting``); the turn's
``TurnWindow`` (``dev_server.om.turn_window``) carries them to the later steps, adding the
reply so far as it grows, so a step counts only what changed. Every step then follows the
decision order of docs/observational-memory.md#decision-order (``dev_server.om.step_decisions``):
activation and reflection on the first step; buffering and the threshold's activation or
observation on every step, the reply so far included (split off when it is observed or
buffered).

Every step then gets, after the agent's instructions, the observation system messages
(``dev_server.om.prompting.context``, with the hints the thread has now: a cycle of this very
step already counts), a continuation reminder as the first conversation message when there
are observations, the remaining messages, and, in Mastra's order, the cycle parts of the
step's decisions, a transient ``data-om-status`` (the step's pending tokens, also written to
the record when they changed), then the start part of a background observer the step
started. The turn holds the thread's lease, so nothing but this turn's own cycles (and its
background observer, whose end the turn notices) writes the thread meanwhile.

With ``retrieval`` on, the observation messages also carry the recall instructions
(``dev_server.om.retrieval.instructions``; in retrieval scope ``resource`` even before anything was observed),
and every step offers the ``recall`` tool (``dev_server.om.retrieval.recall_tool``), built once per turn.

At the reply's ``finish``: ``TokenEstimates`` writes each part's token estimate into the
reply before it is saved, so later turns count it from the cache (5.2); ``BufferOnIdle``
buffers what a finished turn left (``bufferOnIdle``).
"""

from __future__ import annotations

import logging
from datetime import date, datetime, time
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from dev_server.kernel.clock import now_iso
from dev_server.kernel.events import PREVIOUS_REPLY, DataPart
from dev_server.kernel.messages import Message
from dev_server.kernel.ports import SemanticSearch
from dev_server.kernel.processors import ReplyContext, StepContext, TurnProcessor
from dev_server.kernel.tools import Tool
from dev_server.om.backlog import Backlog, backlog_limit
from dev_server.om.engine.activation import projected_removal
from dev_server.om.engine.buffering import Buffering, PartSink, buffer_candidates, safe_prefix
from dev_server.om.engine.flags import clear_stale, flag_live
from dev_server.om.engine.observation_engine import CycleContext, ObservationEngine
from dev_server.om.engine.parts import status_part
from dev_server.om.engine.resource import other_conversations, other_threads, other_tokens
from dev_server.om.engine.temporal import gap_signal, is_gap_marker, marks, signal_part_data
from dev_server.om.engine.window import unobserved
from dev_server.om.options.extractors import read_path, shown
from dev_server.om.prompting.context import build_context_system_messages, other_conversations_message
from dev_server.om.retrieval.instructions import retrieval_instructions
from dev_server.om.retrieval.recall_tool import Recall
from dev_server.om.step_decisions import StepDecisions
from dev_server.om.tokens.counting import count_message
from dev_server.om.turn_window import Carried, TurnWindow
from dev_server.storage.om_records import OMRecord, thread_om

if TYPE_CHECKING:
    from dev_server.kernel.ports import ResourceConversations

log = logging.getLogger(__name__)


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


class OMTurn(TurnProcessor):
    """Observational Memory's part in one turn: what its first step loaded (the record, the
    window, the cycle context), carried to the later steps and kept current by each step's
    decisions (``dev_server.om.step_decisions``)."""

    name = "observational-memory"

    def __init__(self, processor: ObservationalMemoryStep) -> None:
        self.processor = processor
        self.ctx: CycleContext
        self.record: OMRecord
        self.window: TurnWindow
        self.loaded = False  # the first step read the record and the window
        self.sink: PartSink  # where the background cycles this turn starts report
        self.input_ids: set[str] = set()  # the turn's input: kept in view on its first step
        self.others: dict[str, list[Message]] = {}  # resource scope: the other threads' unobserved messages
        self.context: list[tuple[str, str]] = []  # ... as the actor sees them
        self.context_tokens = 0  # ... and what they count (tokenx of their transcripts)
        self.recall: Tool | None = None  # retrieval: the turn's recall tool
        self.announced: list[DataPart] = []  # background observers' start parts, streamed after the status
        self.continued = False  # the history shown starts with the continuation reminder
        self.last_reply: Message | None = None  # the thread's last reply, for a cold cache
        self.last_reply_read = False  # read once per turn: observations and reflections may both ask
        self.status_record: OMRecord | None = None  # what the status shows when not ``record`` (step_decisions)
        self.seeded_tokens = 0  # this step's reply opened for its markers before it has parts (step_decisions)
        self.backlog = False  # the window is a backlog the catch-up observes (dev_server.om.backlog)

    async def before_step(self, step: StepContext) -> None:
        if step.thread is None:
            return
        processor = self.processor
        first = not self.loaded
        if first:
            await processor.load(step, self)
            self.loaded = True
        self.window.read_reply(first=first)
        self.seeded_tokens = 0
        if step.llm is not None and step.model is not None:
            if processor.engine.options.scope == "resource":
                await processor.decisions.resource_step(step, self, first)
            else:
                await processor.decisions.thread_step(step, self, first)
        await processor.show(step, self)

    def pending(self) -> int:
        """The step's unobserved tokens: the window, the reply so far, in resource scope the
        other threads' context."""
        return self.window.pending + self.context_tokens + self.seeded_tokens

    def preserved(self, first: bool) -> set[str]:
        """What an observation must leave in view: the turn's input, on its first step only."""
        return self.input_ids if first else set()

    async def reflect_ahead(self, record: OMRecord) -> bool:
        """Start a buffered reflection (``dev_server.om.engine.buffering``; ``maybe_reflect``
        asks only with async buffering on)."""
        return await self.processor.buffering.start_reflection(self.ctx, record, self.sink)


class ObservationalMemoryStep:
    name = "observational-memory"

    def __init__(self, store: ResourceConversations, search: SemanticSearch, engine: ObservationEngine,
                 buffering: Buffering, backlog: Backlog) -> None:
        self.store = store
        self.search = search  # the recall tool's search by meaning (retrieval ``vector``)
        self.engine = engine
        self.buffering = buffering
        self.decisions = StepDecisions(store, engine, buffering, backlog)

    def start_turn(self, step: StepContext) -> OMTurn:
        return OMTurn(self)

    async def load(self, step: StepContext, turn: OMTurn) -> None:
        """The turn's first step: the record, the thread's unobserved messages (in resource
        scope also the other threads'), counted once, and the recall tool."""
        thread = step.thread
        assert thread is not None
        options = self.engine.options
        records = self.engine.records
        # a read on every turn; the write that creates generation 0 only on a thread's first
        record = await records.active(self.engine.key(thread.id, thread.resource_id)) or await records.initialize(
            scope=options.scope, thread_id=thread.id, resource_id=thread.resource_id, config=options.snapshot(),
            timezone=local_timezone())
        turn.ctx = CycleContext(step.llm, step.model, thread.id, dict(thread_om(thread.metadata)), step.emit,
                                step.open_span)
        turn.sink = PartSink(records, thread.id, step)
        for flag in await clear_stale(records, record):
            log.info("thread %s: cleared a stale %s flag left by a process that died", thread.id, flag)
        turn.record = record
        if options.scope == "resource":
            cursor = thread_om(thread.metadata).get("lastObservedAt")
            stored, derived = await self.store.window_since(thread.id, cursor)
            carried = Carried(derived, turn.ctx.counted)
            turn.window = TurnWindow(unobserved(stored, record, cursor=cursor), carried.count, step.reply,
                                     convert=carried.model_messages)
            turn.others = await other_threads(self.store, record, thread.resource_id, thread.id)
            turn.context = other_conversations(turn.others, options.obscure_thread_ids)
            turn.context_tokens = other_tokens(turn.context) + sum(
                count_message(m, memo=turn.ctx.counted) for ms in turn.others.values() for m in ms)
        else:
            stored, derived = await self.store.window_since(thread.id, record.last_observed_at)
            turn.window = Carried(derived, turn.ctx.counted).window(stored, record, step.reply)
        if options.temporal_markers and step.input_count > 0:
            gap = await self._temporal_gap(step, turn.window.messages)
            if gap is not None:
                turn.window.add(gap)
        messages = turn.window.messages
        turn.input_ids = {m.id for m in messages[-max(1, step.input_count):]}
        retrieval = options.retrieval
        if retrieval is not None:
            turn_input = {m.id for m in messages[-max(1, step.input_count):] if m.role == "user"}
            turn.recall = Recall(self.store, self.search, self.engine, retrieval).tool(thread, turn_input)

    async def show(self, step: StepContext, turn: OMTurn) -> None:
        """Every step: the conversation, the observation messages, the recall tool and the
        status part, then the start part of a background observer the step started."""
        window, record = turn.window, turn.record
        options = self.engine.options
        pending = turn.pending()
        await self._store_pending(record, pending)
        hints = turn.ctx.hints or {}
        retrieval = options.retrieval
        system = observation_messages(
            record.active_observations, self.engine.records.clock.now().astimezone().date(),
            hints.get("currentTask"), hints.get("suggestedResponse"), tuple(turn.context),
            retrieval_instructions(retrieval) if retrieval else None,
            retrieval is not None and retrieval.scope == "resource", self._extracted(hints))
        step.system.extend({"role": "system", "content": text} for text in system)
        continued = bool(system)  # Mastra: whenever OM injects system messages (the recall instructions alone too)
        if window.changed or continued != turn.continued:
            step.history = window.history(continued)  # stored messages are read repaired (conversations._loads)
            step.window, turn.continued = list(window.messages), continued
        if turn.recall is not None:
            step.add_tool(turn.recall)
        shown = turn.status_record or record
        shown.pending_message_tokens = pending  # the step's, whichever copy of the record is shown
        projected = projected_removal(options, shown) if shown.buffered_observation_chunks else 0
        step.emit(status_part(options, shown, pending_tokens=pending, step=step.index, projected_removal=projected,
                              thread_id=step.thread.id if step.thread else None))
        for part in turn.announced:  # kept as the background observer keeps its parts (PartSink)
            step.emit(part, durable=PREVIOUS_REPLY)
        turn.announced.clear()

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

    async def _store_pending(self, record: OMRecord, pending: int) -> None:
        """``pendingMessageTokens``: the step's window, written when it changed (the UI's and activation's input)."""
        if record.pending_message_tokens != pending:
            await self.engine.records.set_pending_message_tokens(record.id, pending)
            record.pending_message_tokens = pending

    # -- temporal markers (docs/observational-memory.md#temporal-markers) ------------------

    async def _temporal_gap(self, step: StepContext, messages: list[Message]) -> Message | None:
        """After a user message that follows a silence of ``TEMPORAL_GAP_MS`` or more (since
        the window's message before it), store a gap signal (``dev_server.om.engine.temporal``)
        and return it: the model and the observer read it after the message; the stream gets a
        transient ``data-signal`` part. The signal is part of the turn's input (``step.input_count``)."""
        assert step.thread is not None
        newest = messages[-1] if messages and messages[-1].role == "user" else None
        if newest is None or any(is_gap_marker(m) and marks(m, newest.id) for m in messages):
            return None
        previous = next((m for m in reversed(messages[:-1]) if not is_gap_marker(m)), None)
        if previous is None:  # nothing before it in the window (Mastra's rule: no marker then)
            return None
        gap = gap_signal(newest, previous, max(now_iso(self.engine.records.clock), newest.created_at))
        if gap is None:
            return None
        await self.store.append_messages(step.thread.id, [gap])
        step.input_count += 1
        step.emit(DataPart("signal", signal_part_data(gap), transient=True))
        return gap


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

    def __init__(self, store: ResourceConversations, engine: ObservationEngine, buffering: Buffering,
                 backlog: Backlog) -> None:
        self.store = store
        self.engine = engine
        self.buffering = buffering
        self.backlog = backlog

    def start_turn(self, step: StepContext) -> BufferOnIdle:
        return self

    async def finish(self, done: ReplyContext) -> None:
        if done.failed or done.interrupted or done.llm is None or done.model is None:
            return
        record = await self.engine.records.active(self.engine.key(done.thread.id, done.thread.resource_id))
        if record is None or flag_live(record.is_buffering_observation, clock=self.engine.records.clock) \
                or self.backlog.catching_up(record.lookup_key):
            return
        stored, derived = await self.store.window_since(done.thread.id, record.last_observed_at)  # the turn's read
        candidates = safe_prefix(buffer_candidates(unobserved([*stored, done.reply], record), record))
        sink = PartSink(self.engine.records, done.thread.id)
        ctx = CycleContext(done.llm, done.model, done.thread.id, dict(thread_om(done.thread.metadata)), sink.emit)
        # counted from the window's carried counts, into the memo start_observation counts with
        if Carried(derived, ctx.counted).count_all(candidates) > backlog_limit(self.engine.options,
                                                                             record.observation_token_count):
            return  # a backlog: its catch-up observes it in batches (dev_server.om.backlog)
        await self.buffering.start_observation(ctx, record, candidates, sink, skip_minimum=True)
