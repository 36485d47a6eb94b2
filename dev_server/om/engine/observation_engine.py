"""The observation and reflection cycles of Observational Memory (synchronous path).

``ObservationEngine`` runs one cycle at a time per record and writes only through the
record store (``dev_server.storage.om_records``):

* ``observe``: the observer model reads the unobserved messages (``dev_server.om.prompting.transcript``)
  with the existing observations and the thread's prior hints, and its answer
  (``dev_server.om.prompting.parsing``) is appended to the log after a message boundary; the cursor,
  the observed ids, the token counts and the thread's hints (current task, suggested
  response) move with it (docs/observational-memory.md#decision-order, "Sync observation").
* ``maybe_reflect``: once the log reaches ``reflection.observationTokens`` the reflector
  rewrites it, starting at the compression level for its model and escalating (a new
  cycle each time) until the result fits under the threshold or the highest level is
  reached; the result is the next generation row (2.6, 4.4).

Nothing is lost on failure: a provider error, a timeout, or an answer that is not
observations (``dev_server.om.engine.output_check``: prose, a refusal, an empty block, repetition, a
reflection far too small) ends the cycle with a ``data-om-observation-failed`` part naming
the problem and leaves the record as it was; the turn goes on. A rejected observer answer
is asked for once more, a rejected reflection is asked for again a compression level up.

The record's ``is_observing`` / ``is_reflecting`` flag is claimed in the database first, so
two processes never run the same cycle on one record (a flag older than
``dev_server.om.engine.flags.STALE_FLAG_S`` is a dead process's and is taken over).

Each model call is an ``agent_run`` span (Mastra's observer and reflector are agents named
``observational-memory-observer`` / ``-reflector``) under the turn's processor span.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dev_server.kernel.clock import Clock
from dev_server.kernel.events import PREVIOUS_REPLY
from dev_server.kernel.messages import Message
from dev_server.kernel.model import ResolvedModel
from dev_server.llm.complete import Completion
from dev_server.om.engine.cycle_context import (
    NO_CYCLE_HOOKS,
    OBSERVER_AGENT,
    REFLECTOR_AGENT,
    CycleContext,
    CycleHooks,
    ModelCaller,
    call_model,
    describe_error,
    om_model,
)
from dev_server.om.engine.extraction import Extraction, ExtractionResult, end_fields, observed_source
from dev_server.om.engine.flags import STALE_FLAG_S, settled
from dev_server.om.engine.output_check import distinct_observations, observer_problem, reflection_problem
from dev_server.om.engine.parts import OBSERVATION, REFLECTION, Cycle, activation_part, marker_config
from dev_server.om.engine.thread_metadata import observation_patch, with_extracted
from dev_server.om.engine.window import has_markers
from dev_server.om.options.attachments import for_model
from dev_server.om.options.config import ObservationalMemoryOptions
from dev_server.om.prompting.context import message_boundary
from dev_server.om.prompting.groups import message_range, rewrap_reflection, wrap_group
from dev_server.om.prompting.observer_context import truncate_previous_observations
from dev_server.om.prompting.parsing import parse_observer_output, parse_reflector_output
from dev_server.om.prompting.prompts import (
    observer_messages,
    observer_system_prompt,
    reflection_max_level,
    reflection_start_level,
    reflector_messages,
    reflector_system_prompt,
)
from dev_server.om.prompting.transcript import attachment_parts, format_transcript
from dev_server.om.tokens.counting import estimate_tokens
from dev_server.storage.om_records import OMRecord, OMRecordStore, lookup_key

if TYPE_CHECKING:
    from dev_server.kernel.ports import ThreadMessages, WorkingMemoryDocument

log = logging.getLogger(__name__)

REFLECTION_BUFFER_WAIT_S = 5.0  # how long a turn at the threshold waits for a running buffered reflection


class CycleFailed(Exception):
    """The observer or reflector gave nothing usable (``dev_server.om.engine.output_check``)."""


@dataclass(frozen=True)
class Reflection:
    """One reflector answer: the condensed log ("" when rejected), its tokens, the inline
    extracted values by slug, and why it was rejected (None when usable)."""

    text: str
    tokens: int
    extracted: dict[str, Any]
    problem: str | None


class ObservationEngine:
    """Observes and reflects one memory's records. Handed, not subclassed: ``ask`` (every
    model call, ``call_model`` by default), ``hooks`` (around every cycle, none by default)
    and ``clock`` (what its cycles and background jobs stamp; the record store's by default)."""

    def __init__(self, options: ObservationalMemoryOptions, records: OMRecordStore, *,
                 working: WorkingMemoryDocument | None = None, threads: ThreadMessages | None = None,
                 ask: ModelCaller = call_model, hooks: CycleHooks = NO_CYCLE_HOOKS, clock: Clock | None = None,
                 agent_id: str | None = None, memory: Any = None) -> None:
        """``working``: the memory's working memory document, when it has one; ``threads``:
        where the observer's titles go (None: a bare engine, no titles or working memory);
        ``agent_id`` / ``memory``: whose OM this is, for the extractors' run context."""
        self.options = options
        self.records = records
        self.model_caller = ask
        self.hooks = hooks
        self.clock = clock or records.clock  # by default the record store's, which stamps the records
        # extractors, title and working memory (dev_server.om.engine.extraction)
        self.extraction = Extraction(options, self.clock, working, threads, agent_id=agent_id, memory=memory)
        self._suppressed: dict[str, int] = {}  # lookup key -> log size whose reflection failed

    def key(self, thread_id: str, resource_id: str) -> str:
        """The lookup key of a thread's record: its own in thread scope, its resource's otherwise."""
        return lookup_key(thread_id if self.options.scope == "thread" else None, resource_id)

    async def ask(self, ctx: CycleContext, agent: str, model: ResolvedModel, messages: list[dict[str, Any]],
                  settings: dict[str, Any]) -> Completion:
        return await self.model_caller(ctx, agent, model, messages, settings)

    async def _moved_on(self, record: OMRecord) -> bool:
        """Another cycle (another process) observed or reflected since ``record`` was read:
        what this one would do is done (docs/observational-memory.md#decision-order, "skip if another cycle
        advanced lastObservedAt")."""
        current = await self.records.active(record.lookup_key)
        return current is None or current.id != record.id or current.last_observed_at != record.last_observed_at \
            or current.observation_token_count != record.observation_token_count

    async def patch_hints(self, ctx: CycleContext, values: dict[str, Any]) -> None:
        """Write the thread's OM metadata; the merged result is what the turn injects next.
        It replaces the hints in place: a cycle runs on a copy of the turn's context
        (``CycleHooks``), and the turn's step shows the actor what this cycle wrote (Mastra's
        actor gets a step-0 observation's current task and suggested response at once)."""
        merged = await self.records.patch_thread_om(ctx.thread_id, values)
        if merged is None:
            return
        if ctx.hints is None or ctx.hints is merged:
            ctx.hints = merged
        else:
            ctx.hints.clear()
            ctx.hints.update(merged)

    async def commit_thread(self, ctx: CycleContext, output: Any, messages: Sequence[Message],
                            extraction: ExtractionResult, cycle_id: str) -> None:
        """After the record is stored: the observed thread's hints, cursor and extracted
        values, the keys Mastra writes (``dev_server.om.engine.thread_metadata``), then its
        title and working memory (``Extraction.commit``)."""
        await self.patch_hints(ctx, observation_patch(ctx.hints, output.current_task, output.suggested_response,
                                                      extraction.patch, messages,
                                                      resource_scope=self.options.scope == "resource"))
        await self.extraction.commit(ctx, extraction, cycle_id)

    async def extract(self, ctx: CycleContext, record: OMRecord, operation: str, inline: dict[str, Any],
                      source: str, *, buffered: bool = False,
                      slugs: Collection[str] | None = None) -> ExtractionResult:
        """The cycle's extracted values (``dev_server.om.engine.extraction``); never raises for an extractor."""
        configured = self.options.observer_model if operation == OBSERVATION else self.options.reflector_model
        model = await om_model(ctx.llm, configured, ctx.agent_model)
        return await self.extraction.run(ctx, operation, inline, ask=self.ask, model=model, source=source,
                                         resource_id=record.resource_id, buffered=buffered, slugs=slugs)

    # -- observation -------------------------------------------------------------------

    async def observe(self, ctx: CycleContext, record: OMRecord, messages: Sequence[Message],
                      message_tokens: int, *, by_cursor: bool = False) -> OMRecord | None:
        """Observe ``messages``; the updated record, or None when nothing was observed.
        ``by_cursor``: the new cursor covers every one of ``messages`` (a backlog's batch,
        ``dev_server.om.backlog``), so only those the cursor does not decide for (they carry
        observation markers, ``window.unobserved``) join the record's observed ids."""
        async with self.hooks.cycle(ctx, record, OBSERVATION) as cycle_ctx:
            return await self._observe(cycle_ctx, record, messages, message_tokens, by_cursor)

    async def _observe(self, ctx: CycleContext, record: OMRecord, messages: Sequence[Message],
                       message_tokens: int, by_cursor: bool = False) -> OMRecord | None:
        if not messages or not await self.records.claim_flag(record.id, "is_observing", stale_after_s=STALE_FLAG_S):
            return None
        if await self._moved_on(record):
            await self.records.release_flag(record.id, "is_observing")
            return None
        cycle = Cycle(OBSERVATION, record, ctx.thread_id,
                      marker_config(self.options), message_tokens, clock=self.clock)
        ctx.emit(cycle.start(), durable=True)
        try:
            output = await self.run_observer(ctx, record, messages)
            new = raw = output.observations.strip()
            extraction = await self.extract(ctx, record, OBSERVATION, output.extracted,
                                            observed_source(new, messages))
            if self.options.retrieval is not None:  # which messages this cycle observed (4.5)
                new = wrap_group(new, message_range(messages))
            last_observed_at = max(m.created_at for m in messages)
            existing = record.active_observations.strip()
            merged = f"{existing}{message_boundary(last_observed_at)}{new}" if existing else new
            updated = await self.records.update_active_observations(
                record.id, observations=merged, token_count=estimate_tokens(merged),
                last_observed_at=last_observed_at, observed_ids=[m.id for m in messages],
                listed_ids=[m.id for m in messages if has_markers(m)] if by_cursor else None)
            await self.commit_thread(ctx, output, messages, extraction, cycle.id)
        except Exception as exc:
            log.warning("observation of thread %s failed: %s", ctx.thread_id, describe_error(exc))
            ctx.emit(cycle.failed(describe_error(exc)), durable=True)
            return None
        finally:
            await self.records.release_flag(record.id, "is_observing")
        # the observer's own text, as Mastra's end marker carries it (the log holds it grouped)
        ctx.emit(cycle.end(record=updated, observation_tokens=estimate_tokens(raw), observations=raw,
                           current_task=output.current_task, suggested_response=output.suggested_response,
                           extra=end_fields(extraction)), durable=True)
        return updated

    async def run_observer(self, ctx: CycleContext, record: OMRecord, messages: Sequence[Message], *,
                            previous: str | None = None, buffered: bool = False) -> Any:
        """The observer's answer on ``messages``. ``previous`` overrides the log shown as
        what is already observed; a ``buffered`` (background) call extracts no hints."""
        config = self.options.observation
        model = await om_model(ctx.llm, self.options.observer_model, ctx.agent_model)
        transcript, attachments = format_transcript(list(messages))
        hints = ctx.hints or {}
        if previous is None:
            previous = record.active_observations
            if config.truncate_previous_observations and config.previous_observer_tokens is not False:
                tokens = config.previous_observer_tokens
                previous = truncate_previous_observations(previous, tokens) if tokens else ""
        system = observer_system_prompt(instruction=config.instruction, current_task=not buffered,
                                        suggested_response=not buffered, thread_title=config.thread_title,
                                        extractors=await self.extraction.prompt_extractors(ctx, OBSERVATION,
                                                                                           record.resource_id))
        prompt = [{"role": "system", "content": system},
                  *observer_messages(transcript, previous_observations=previous or None,
                                     prior_current_task=hints.get("currentTask"),
                                     prior_suggested_response=hints.get("suggestedResponse"),
                                     prior_thread_title=hints.get("threadTitle") if config.thread_title else None,
                                     skip_continuation_hints=buffered,
                                     attachments=attachment_parts(attachments,
                                                                  for_model(config.observe_attachments, model)),
                                     prior_extracted=await self.extraction.priors(ctx, OBSERVATION))]
        problem = None
        for attempt in range(2):  # a rejected answer is asked for once more
            completion = await self.ask(ctx, OBSERVER_AGENT, model, prompt, config.model_settings)
            output = parse_observer_output(completion.text, self.extraction.slugs(OBSERVATION))
            problem = observer_problem(output.observations, output.degenerate)
            if problem is None:
                return output
            log.info("observer answer for thread %s rejected (attempt %d): %s", ctx.thread_id, attempt + 1, problem)
        raise CycleFailed(f"Observer output rejected after retry: {problem}")

    # -- reflection --------------------------------------------------------------------

    async def maybe_reflect(self, ctx: CycleContext, record: OMRecord, *, trigger: str | None = None,
                            buffer: Callable[[OMRecord], Awaitable[bool]] | None = None) -> OMRecord:
        """Reflect when the log reached its threshold (or ``trigger``: ``ttl`` /
        ``provider_change`` for a reflection that opted in); the active record afterwards.

        With async buffering (``buffer`` starts a background reflection, ``dev_server.om.engine.buffering``)
        this follows 2.6: from the activation point a buffered reflection is prepared; at
        the threshold it is swapped in; without one the turn reflects synchronously only
        past ``reflection.blockAfter``, and otherwise starts one and goes on."""
        config = self.options.reflection
        threshold = config.observation_tokens
        tokens = record.observation_token_count
        if not record.active_observations.strip():
            return record
        buffering = buffer is not None and self.options.async_buffering
        point = config.activation_point
        if buffering and tokens < threshold and tokens >= point and not record.buffered_reflection:
            await buffer(record)
        if tokens < threshold and trigger is None:
            return record
        if buffering:
            activated = await self._activate_buffered_reflection(ctx, record, trigger or "threshold")
            if activated is not None:
                return activated
            if not (config.block_after and tokens >= config.block_after):
                if tokens >= point and not record.buffered_reflection:
                    await buffer(record)
                return record
        elif tokens < threshold:
            return record
        if trigger is None and self._suppressed.get(record.lookup_key) == tokens:
            return record  # the last attempt at this size failed: wait for the log to change
        if not await self.records.claim_flag(record.id, "is_reflecting", stale_after_s=STALE_FLAG_S):
            return record
        try:
            if await self._moved_on(record):
                return await self.records.active(record.lookup_key) or record
            result = await self.reflect(ctx, record, threshold)
        finally:
            await self.records.release_flag(record.id, "is_reflecting")
        if result is record:
            self._suppressed[record.lookup_key] = tokens
        elif result.observation_token_count >= threshold:
            self._suppressed[record.lookup_key] = result.observation_token_count
        else:
            self._suppressed.pop(record.lookup_key, None)
        return result

    async def _activate_buffered_reflection(self, ctx: CycleContext, record: OMRecord,
                                            trigger: str) -> OMRecord | None:
        """Swap a buffered reflection in (2.6, activation); the new generation, or None
        when there is none (or it was suppressed, or another process swapped it first)."""
        if trigger == "threshold" and not record.buffered_reflection and record.is_buffering_reflection:
            current = await settled(self.records, record.lookup_key, flags=("is_buffering_reflection",),
                                    timeout_s=REFLECTION_BUFFER_WAIT_S)
            record = current if current is not None and current.id == record.id else record
        if not record.buffered_reflection:
            return None
        if trigger != "threshold":
            lines = record.active_observations.split("\n")
            tail = estimate_tokens("\n".join(lines[record.reflected_observation_line_count or 0:]).strip())
            combined = tail + (record.buffered_reflection_tokens or 0)
            floor = round(0.75 * self.options.reflection.observation_tokens
                          * (1 - min(1.0, self.options.reflection.buffer_activation)))
            if tail < (record.buffered_reflection_tokens or 0) or combined < floor:
                return None
        swapped = await self.records.activate_buffered_reflection(record.id)
        if swapped is None:
            return None
        _, new = swapped
        # with the new log, as Mastra's (the stored copy keeps its head only: D48)
        ctx.emit(activation_part(cycle_id=f"reflect-act-{new.id}", operation=REFLECTION, record=new, clock=self.clock,
                                 thread_id=ctx.thread_id, observations=new.active_observations,
                                 config=marker_config(self.options),
                                 tokens_activated=record.observation_token_count,
                                 observation_tokens=new.observation_token_count, messages_activated=0,
                                 triggered_by=trigger), durable=PREVIOUS_REPLY)
        log.info("thread %s: buffered reflection activated, %d -> %d observation tokens (generation %d)",
                 ctx.thread_id, record.observation_token_count, new.observation_token_count, new.generation_count)
        return new

    async def reflect_once(self, ctx: CycleContext, model: ResolvedModel, observations: str, level: int, *,
                           buffered: bool = False, resource_id: str | None = None) -> Reflection:
        """One reflector call on ``observations`` at compression ``level`` (a ``buffered``
        one extracts no hints), its answer checked (``dev_server.om.engine.output_check``)."""
        config = self.options.reflection
        extractors = await self.extraction.prompt_extractors(ctx, REFLECTION, resource_id)
        system = reflector_system_prompt(instruction=config.instruction, extractors=extractors, hints=not buffered)
        priors = await self.extraction.priors(ctx, REFLECTION)
        completion = await self.ask(ctx, REFLECTOR_AGENT, model,
                                    [{"role": "system", "content": system},
                                     *reflector_messages(observations, level=level, skip_continuation_hints=buffered,
                                                         prior_extracted=priors, extractors=extractors)],
                                    config.model_settings)
        output = parse_reflector_output(completion.text, self.extraction.slugs(REFLECTION))
        text = output.observations.strip()
        tokens = estimate_tokens(text) if text else 0
        problem = reflection_problem(text, output.degenerate, tokens=tokens,
                                     source_tokens=estimate_tokens(distinct_observations(observations)))
        if problem is not None:
            log.info("reflector answer for thread %s rejected at level %d: %s", ctx.thread_id, level, problem)
            return Reflection("", 0, output.extracted, problem)
        if self.options.retrieval is not None:  # the reflector read it without the tags (4.4)
            text = rewrap_reflection(text, observations)
            tokens = estimate_tokens(text)
        return Reflection(text, tokens, output.extracted, None)

    async def reflect(self, ctx: CycleContext, record: OMRecord, target: int) -> OMRecord:
        """Reflect ``record``'s whole log now, escalating towards ``target`` tokens (the
        caller holds the record's ``is_reflecting`` flag); the new generation, or ``record``."""
        async with self.hooks.cycle(ctx, record, REFLECTION) as cycle_ctx:
            return await self._reflect(cycle_ctx, record, target)

    async def _reflect(self, ctx: CycleContext, record: OMRecord, target: int) -> OMRecord:
        model = await om_model(ctx.llm, self.options.reflector_model, ctx.agent_model)
        level = reflection_start_level(model.model_id)
        top = reflection_max_level(level)
        marker = marker_config(self.options)
        before = record.observation_token_count
        cycle = Cycle(REFLECTION, record, ctx.thread_id, marker, before, clock=self.clock)
        ctx.emit(cycle.start(), durable=True)
        result: Reflection | None = None
        while True:
            try:
                attempt = await self.reflect_once(ctx, model, record.active_observations, level,
                                                  resource_id=record.resource_id)
            except Exception as exc:
                log.warning("reflection of thread %s failed: %s", ctx.thread_id, describe_error(exc))
                ctx.emit(cycle.failed(describe_error(exc)), durable=True)
                return record
            if attempt.problem is None:
                result = attempt
                if attempt.tokens < target or level >= top:
                    break
                problem = f"Did not compress below threshold ({before} → {attempt.tokens}, target: {target})"
            else:
                problem = f"Reflector output rejected: {attempt.problem}"
                if level >= top:
                    break
            ctx.emit(cycle.failed(f"{problem}, retrying at level {level + 1}"), durable=True)
            level += 1
            cycle = Cycle(REFLECTION, record, ctx.thread_id, marker, before, clock=self.clock)
            ctx.emit(cycle.start(), durable=True)
        if result is None:  # memory is never replaced by an answer that is not observations
            ctx.emit(cycle.failed(f"{problem}; no retry left after compression level {level}"), durable=True)
            return record
        text, tokens, inline = result.text, result.tokens, result.extracted
        extraction = await self.extract(ctx, record, REFLECTION, inline, text)
        new = await self.records.create_reflection_generation(record, observations=text, token_count=tokens)
        if new is None:  # another cycle replaced the log meanwhile: its generation stands
            ctx.emit(cycle.failed("Another cycle changed the observations while reflecting"), durable=True)
            log.info("thread %s: a reflection was dropped, another cycle changed the log meanwhile", ctx.thread_id)
            return await self.records.active(record.lookup_key) or record
        if extraction.values:
            await self.patch_hints(ctx, with_extracted(ctx.hints, extraction.patch))
        await self.extraction.commit(ctx, extraction, cycle.id)
        ctx.emit(cycle.end(record=new, observation_tokens=tokens, observations=text,
                           extra=end_fields(extraction)), durable=True)
        log.info("thread %s reflected: %d -> %d observation tokens (generation %d)", ctx.thread_id, before,
                 tokens, new.generation_count)
        return new

