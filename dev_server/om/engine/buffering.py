"""Async buffering: the observer and the reflector working ahead, in the background.

Long before the window reaches its threshold, each time it grows by another interval
(``bufferTokens``, half of it near the threshold: ``activation.interval_crossed``) the step
hands the newest unobserved messages to a background observer. Its answer is stored as a
*chunk* on the record (not yet part of the log); activation (``dev_server.om.engine.activation``) swaps
chunks in later without any model call, so the turn that reaches the threshold does not
wait for the observer (docs/observational-memory.md#buffering). Likewise, once the log passes
``reflection.bufferActivation`` of its threshold, a background reflector condenses its
oldest lines into a buffered reflection that replaces them at the threshold (2.6).

The jobs run on the process's background work (``dev_server.background``, owned by the lifespan):
they survive a client hanging up, one per thread and kind is queued at a time, the queue is
bounded, and they never raise into a turn. Across processes the record's
``is_buffering_*`` flag keeps a second runner away (``dev_server.om.engine.flags``): the turn claims it
in the database when it starts the job (so the studio's ``buffer-status`` sees the work at
once), the job renews it while it runs and clears it when done. Their
``data-om-buffering-*`` parts (``dev_server.om.engine.parts.BufferCycle``) go to a ``PartSink``: into the
turn that started them while it still streams, else onto the thread's newest reply in
storage.

The answers are checked like the synchronous cycles' (``dev_server.om.engine.output_check``): a chunk or
a buffered reflection that is not observations is never stored, and the job ends with
``data-om-buffering-failed`` naming the problem (a failed background observation also
leaves a ``data-om-observation-failed`` copy on the newest stored reply, not streamed).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from dev_server.kernel import ids
from dev_server.kernel.clock import epoch_ms, now_iso, parse_iso, to_iso
from dev_server.kernel.events import PREVIOUS_REPLY, DataPart
from dev_server.kernel.messages import Message
from dev_server.om.engine.cycle_context import CycleContext, JobParts, describe_error, om_model
from dev_server.om.engine.extraction import end_fields, observed_source
from dev_server.om.engine.flags import BUFFER_STALE_S, flag_live, holding, settled
from dev_server.om.engine.parts import OBSERVATION, REFLECTION, BufferCycle, marker_config
from dev_server.om.engine.thread_metadata import with_extracted
from dev_server.om.engine.window import has_incomplete_tool_calls
from dev_server.om.prompting.groups import aligned_cut, message_range, wrap_group
from dev_server.om.prompting.prompts import reflection_max_level, reflection_start_level
from dev_server.om.tokens.counting import count_messages, estimate_tokens
from dev_server.storage.om_records import Flag, OMRecord

if TYPE_CHECKING:
    from dev_server.background import BackgroundWork
    from dev_server.kernel.ports import ResourceConversations
    from dev_server.kernel.processors import StepContext
    from dev_server.om.engine.observation_engine import ObservationEngine
    from dev_server.storage.om_records import OMRecordStore

log = logging.getLogger(__name__)

BUFFERED_HEADING = "\n\n--- BUFFERED (pending activation) ---\n\n"


def previously_observed(record: OMRecord) -> str:
    """What a background observer is shown as already observed: the log, then (what earlier
    chunks saw counts as observed for this one) the waiting chunks under
    ``BUFFERED_HEADING``; with no log yet, the chunks alone, as Mastra joins them."""
    active = record.active_observations.strip()
    chunks = "\n\n".join(c.get("observations", "") for c in record.buffered_observation_chunks or ())
    if active and chunks:
        return active + BUFFERED_HEADING + chunks
    return active or chunks


def chunk_message_ids(record: OMRecord) -> set[str]:
    return {mid for chunk in record.buffered_observation_chunks or () for mid in chunk.get("messageIds") or ()}


def buffer_candidates(messages: Sequence[Message], record: OMRecord) -> list[Message]:
    """Messages no chunk holds yet, newer than both the buffer cursor and the observation
    cursor (``createdAt > max(lastBufferedAtTime, lastObservedAt)``, 2.4 step 4)."""
    taken = chunk_message_ids(record)
    cursor = max(filter(None, (record.last_buffered_at_time, record.last_observed_at)), default=None)
    return [m for m in messages if m.id not in taken and (cursor is None or m.created_at > cursor)]


def safe_prefix(messages: Sequence[Message]) -> list[Message]:
    """What may be buffered now without splitting a tool call (``selectSafeBufferPrefix``):
    everything, unless the newest message still waits on a tool call; then the messages
    before it, or nothing when the cut is not clean (timestamps shared with or within a
    millisecond of the held-back message, or a tool call id on both sides)."""
    ordered = sorted(messages, key=lambda m: (m.created_at, m.seq or 0))
    if not ordered or not has_incomplete_tool_calls(ordered):
        return ordered
    held, prefix = ordered[-1], ordered[:-1]
    if not prefix:
        return []
    held_at = parse_iso(held.created_at)
    if any(m.created_at == held.created_at for m in prefix) \
            or parse_iso(prefix[-1].created_at) + timedelta(milliseconds=1) >= held_at:
        return []
    if _call_ids(prefix) & _call_ids([held]):
        return []
    return prefix


def _call_ids(messages: Sequence[Message]) -> set[str]:
    return {str((p.get("toolInvocation") or {}).get("toolCallId")) for m in messages
            for p in m.content.get("parts") or () if p.get("type") == "tool-invocation"}


class PartSink:
    """Where a background job's parts go: into the turn that started it while that turn
    still streams (``StepContext.live``: the loop streams them and keeps them in the
    reply), else onto the thread's newest reply in storage (``flush``)."""

    def __init__(self, records: OMRecordStore, thread_id: str, step: StepContext | None = None) -> None:
        self.records = records
        self.thread_id = thread_id
        self.step = step
        self.late: list[dict[str, Any]] = []

    def emit(self, part: DataPart, durable: bool = True) -> None:
        if self.step is not None and self.step.live:
            # kept as Mastra keeps a background cycle's markers: on the newest stored reply
            self.step.emit(part, durable=PREVIOUS_REPLY if durable else False)
        elif durable:
            self.store(part)

    def store(self, part: DataPart) -> None:
        """Keep ``part`` on the thread's newest stored reply without streaming it (``flush``)."""
        self.late.append({"type": f"data-{part.name}", "data": part.data if part.kept_data is None else part.kept_data})

    async def flush(self) -> None:
        late, self.late = self.late, []
        if late:
            try:
                await self.records.add_parts_to_last_reply(self.thread_id, late)
            except Exception as exc:  # markers are informational: never worth a failed job
                log.warning("could not keep %d OM parts on thread %s: %s", len(late), self.thread_id, exc)


@dataclass(frozen=True)
class QueuedCandidates:
    """The messages a queued observation will observe, by id: read back when the job runs.

    Threads that grow together cross the buffer interval together, so a hundred jobs may
    wait behind the two that run; each holding its turn's Message objects (a few hundred,
    decoded) held tens of megabytes at once, and the heap kept that size afterwards
    (issue 25's soak). Ids and the oldest one's time are all a waiting job needs, except for
    the newest message, which is kept whole: buffering on idle queues the job while the
    reply it just produced is still being saved, and a job that runs first must see it."""

    thread_id: str
    ids: tuple[str, ...]
    since: str
    newest: Message

    @classmethod
    def of(cls, thread_id: str, messages: Sequence[Message]) -> QueuedCandidates:
        return cls(thread_id, tuple(m.id for m in messages), min(m.created_at for m in messages), messages[-1])

    async def read(self, store: ResourceConversations) -> list[Message]:
        """The messages still stored, in thread order, as they are now (the newest as queued
        while it is not stored yet)."""
        wanted = set(self.ids)
        # what changed since the turn's read; the window stays at the record's cursor, where
        # the next turn reads from
        stored, _ = await store.window_since(self.thread_id, self.since, advance=False)
        found = [m for m in stored if m.id in wanted]
        if all(m.id != self.newest.id for m in found):
            found.append(self.newest)
        return found


class Buffering:
    """Schedules and runs the background observer and reflector of one OM engine. With the
    thread's ``store``, a queued observation holds its candidates by id (``QueuedCandidates``);
    without one (a bare engine) it holds the messages themselves."""

    def __init__(self, engine: ObservationEngine, background: BackgroundWork | None,
                 store: ResourceConversations | None = None) -> None:
        self.engine = engine
        self.background = background
        self.store = store
        self._suppressed: dict[str, int] = {}  # lookup key -> log size the reflector could not condense
        self._observing: set[str] = set()  # lookup keys with a background observer queued or running

    @property
    def records(self) -> OMRecordStore:
        return self.engine.records

    # -- observation -------------------------------------------------------------------

    async def start_observation(self, ctx: CycleContext, record: OMRecord, candidates: Sequence[Message],
                                sink: PartSink, *, skip_minimum: bool = False,
                                announce: Callable[[DataPart], None] | None = None) -> bool:
        """Hand ``candidates`` (a safe prefix) to a background observer; False when nothing
        was started (too few tokens, one already running, no background work). Its start
        part goes to ``announce`` when given (a turn's step streams it after its status,
        where Mastra's job announces itself), else to ``sink``."""
        buffer_tokens = self.engine.options.observation.buffer_tokens
        if not candidates or buffer_tokens is False or flag_live(record.is_buffering_observation,
                                                                                  clock=self.engine.clock):
            return False
        tokens = count_messages(candidates, memo=ctx.counted)  # the turn counted them: its memo answers
        if not skip_minimum and tokens < buffer_tokens / 2:
            return False
        config = marker_config(self.engine.options)
        cycle = BufferCycle(OBSERVATION, record, ctx.thread_id, config, tokens, clock=self.engine.clock)
        job_ctx = replace(ctx, emit=sink.emit)
        queued: list[Message] | QueuedCandidates = (
            list(candidates) if self.store is None else QueuedCandidates.of(ctx.thread_id, candidates))
        started = await self._start(f"om-buffer:{record.lookup_key}", record, "is_buffering_observation",
                                    lambda: self._observe(job_ctx, record, queued, cycle, sink))
        if started:
            self._observing.add(record.lookup_key)
            (announce or sink.emit)(cycle.start())
        return started

    def observing(self, key: str) -> bool:
        """A background observer this process started on record ``key`` has not ended yet."""
        return key in self._observing

    async def _start(self, key: str, record: OMRecord, flag: Flag, job: Callable[[], Awaitable[None]]) -> bool:
        """Claim ``flag`` in the database, then queue ``job``, which releases it."""
        if self.background is None or not self.background.accepting:
            return False
        if not await self.records.claim_flag(record.id, flag, stale_after_s=BUFFER_STALE_S):
            return False
        if not self.background.submit(key, job):
            await self.records.release_flag(record.id, flag)
            return False
        return True

    async def _observe(self, ctx: CycleContext, record: OMRecord, queued: list[Message] | QueuedCandidates,
                       cycle: BufferCycle, sink: PartSink) -> None:
        try:
            async with self.engine.hooks.background(ctx, record, OBSERVATION, sink) as (job_ctx, job_sink):
                await self._buffer_observation(job_ctx, record, queued, cycle, job_sink)
        finally:
            self._observing.discard(record.lookup_key)

    async def _buffer_observation(self, ctx: CycleContext, record: OMRecord, queued: list[Message] | QueuedCandidates,
                                  cycle: BufferCycle, sink: JobParts) -> None:
        records = self.records
        try:
            async with holding(records, record.id, "is_buffering_observation"):
                current = await records.active(record.lookup_key)
                if current is None:
                    sink.emit(cycle.failed("The record is gone"))
                    return
                candidates = queued if isinstance(queued, list) else await queued.read(self.store)
                fresh = buffer_candidates(candidates, current)  # another process may have buffered or observed some
                if not fresh:
                    sink.emit(cycle.failed("Nothing left to buffer"))
                    return
                await records.seal_messages([m.id for m in fresh], epoch_ms(self.engine.clock))
                existing = previously_observed(current)
                output = await self.engine.run_observer(ctx, current, fresh, previous=existing, buffered=True)
                observations = output.observations.strip()
                # a chunk's extracted values and title are kept at once, not at its activation (2.4 step 8)
                extraction = await self.engine.extract(ctx, current, OBSERVATION, output.extracted,
                                                       observed_source(observations, fresh), buffered=True)
                if self.engine.options.retrieval is not None:
                    observations = wrap_group(observations, message_range(fresh))
                newest = max(parse_iso(m.created_at) for m in fresh)
                chunk = {"id": f"ombuf-{ids.uuid4()}", "cycleId": cycle.id, "observations": observations,
                         "tokenCount": estimate_tokens(observations), "messageIds": [m.id for m in fresh],
                         "messageTokens": count_messages(fresh, memo=ctx.counted),
                         "lastObservedAt": to_iso(newest + timedelta(milliseconds=1)),
                         "createdAt": now_iso(self.engine.clock)}
                if extraction.title is not None:  # written to the thread again when the chunk is activated
                    chunk["threadTitle"] = extraction.title
                stored = await records.add_buffered_chunk(current.lookup_key, chunk)
                total = sum(int(c.get("tokenCount") or 0)
                            for c in (stored or current).buffered_observation_chunks or ())
                if extraction.values:
                    await self.engine.patch_hints(ctx, with_extracted(ctx.hints, extraction.patch))
                await self.engine.extraction.commit(ctx, extraction, cycle.id)
                sink.emit(cycle.end(buffered_tokens=total, observations=observations, extra=end_fields(extraction)))
        except Exception as exc:  # buffering never raises: the threshold path observes instead
            log.warning("buffered observation of thread %s failed: %s", ctx.thread_id, describe_error(exc))
            sink.emit(cycle.failed(describe_error(exc)))
            sink.store(cycle.observation_failed(describe_error(exc)))
        finally:
            await sink.flush()

    # -- reflection --------------------------------------------------------------------

    async def start_reflection(self, ctx: CycleContext, record: OMRecord, sink: PartSink) -> bool:
        """Reflect the log's oldest lines in the background (2.6, buffered reflection)."""
        if flag_live(record.is_buffering_reflection, clock=self.engine.clock) or record.buffered_reflection:
            return False
        if self._suppressed.get(record.lookup_key) == record.observation_token_count:
            return False  # this very log could not be condensed: wait until it changes
        lines = record.active_observations.split("\n")
        if not record.observation_token_count or not lines:
            return False
        average = record.observation_token_count / len(lines)
        activation_point = self.engine.options.reflection.activation_point
        count = min(int(activation_point // average) if average else len(lines), len(lines))
        if self.engine.options.retrieval is not None:  # never cut an observation group in two
            count = aligned_cut(lines, count)
        if count <= 0:
            return False
        estimate = round(average * count)
        config = marker_config(self.engine.options)
        cycle = BufferCycle(REFLECTION, record, ctx.thread_id, config, estimate, clock=self.engine.clock)
        job_ctx = replace(ctx, emit=sink.emit)
        started = await self._start(f"om-reflect:{record.lookup_key}", record, "is_buffering_reflection",
                                    lambda: self._reflect(job_ctx, record, lines[:count], estimate, cycle, sink))
        if started:
            sink.emit(cycle.start())
            record.is_buffering_reflection = now_iso(self.engine.clock)  # the turn's status shows it running
        return started

    async def _reflect(self, ctx: CycleContext, record: OMRecord, lines: list[str], estimate: int,
                       cycle: BufferCycle, sink: PartSink) -> None:
        async with self.engine.hooks.background(ctx, record, REFLECTION, sink) as (job_ctx, job_sink):
            await self._buffer_reflection(job_ctx, record, lines, estimate, cycle, job_sink)

    async def _buffer_reflection(self, ctx: CycleContext, record: OMRecord, lines: list[str], estimate: int,
                                 cycle: BufferCycle, sink: JobParts) -> None:
        records = self.records
        try:
            async with holding(records, record.id, "is_buffering_reflection"):
                model = await om_model(ctx.llm, self.engine.options.reflector_model, ctx.agent_model)
                level = reflection_start_level(model.model_id)
                top = reflection_max_level(level)
                target = round(0.75 * estimate)
                while True:  # like the synchronous reflector: escalate until the slice shrinks enough
                    attempt = await self.engine.reflect_once(ctx, model, "\n".join(lines), level, buffered=True)
                    if attempt.problem is None and attempt.tokens <= target:
                        break
                    if level >= top:
                        # Swapping in a reflection that does not shrink the log would only start
                        # the next one at once: this log is left alone until it changes.
                        self._suppressed[record.lookup_key] = record.observation_token_count
                        sink.emit(cycle.failed(
                            f"Reflector output rejected: {attempt.problem}" if attempt.problem else
                            f"Did not compress below target ({estimate} → {attempt.tokens}, target: {target})"))
                        return
                    level += 1
                reflection, tokens, inline = attempt.text, attempt.tokens, attempt.extracted
                self._suppressed.pop(record.lookup_key, None)
                # like a chunk's, the reflection's extracted values are kept at once, not at its activation
                extraction = await self.engine.extract(ctx, record, REFLECTION, inline, reflection, buffered=True)
                await records.store_buffered_reflection(record.id, reflection=reflection, tokens=tokens,
                                                        input_tokens=estimate, line_count=len(lines))
                if extraction.values:
                    await self.engine.patch_hints(ctx, with_extracted(ctx.hints, extraction.patch))
                await self.engine.extraction.commit(ctx, extraction, cycle.id)
                # the reflection's text, as Mastra's part carries it (its stored copy is bounded: D48)
                sink.emit(cycle.end(buffered_tokens=tokens, observations=reflection, extra=end_fields(extraction)))
        except Exception as exc:
            log.warning("buffered reflection of thread %s failed: %s", ctx.thread_id, describe_error(exc))
            sink.emit(cycle.failed(describe_error(exc)))
        finally:
            await sink.flush()

    async def wait(self, key: str, timeout_s: float = 30.0) -> OMRecord | None:
        """The active record once no background observer runs on it (or the time is up)."""
        return await settled(self.records, key, flags=("is_buffering_observation",), timeout_s=timeout_s)
