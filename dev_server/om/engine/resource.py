"""Resource scope: one observation log for all of a user's threads (docs/observational-memory.md#scope).

Mastra marks it experimental, and so do we. The record is keyed ``resource:<id>``; each
thread keeps its own cursor (``metadata.mastra.om.lastObservedAt`` on the thread) and its
own hints. What changes against thread scope:

* the window of a turn also counts the unobserved messages of the resource's *other*
  threads; the model sees them as context (``<other-conversation>`` blocks, parts cut to
  500 characters) and the observer observes them with the current thread's;
* the observer gets several threads at once, each wrapped in ``<thread id="...">``,
  batched by ``maxTokensPerBatch`` (batches run in parallel), and answers with one
  ``<thread>`` block per thread;
* the log keeps those blocks: a new block joins the last block of the same thread when it
  carries the same ``Date:`` line, else it is appended after a message boundary;
* ``obscureThreadIds`` writes an xxhash32 of each thread id instead of the id;
* extractors, the thread title and OM-managed working memory answer per ``<thread>`` block
  (each thread's prior values are shown in a block of their own), and are written to that
  thread; working memory shared by the resource is answered once per call, outside the
  blocks (see ``observe_resource``).

Async buffering is off in resource scope (configuring it fails at construction).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import xxhash

from dev_server.kernel.messages import Message
from dev_server.kernel.ports import ResourceConversations
from dev_server.om.engine.cycle_context import OBSERVER_AGENT, CycleContext, describe_error, om_model
from dev_server.om.engine.extraction import OBSERVATION, ExtractionResult, end_fields, observed_source
from dev_server.om.engine.flags import STALE_FLAG_S
from dev_server.om.engine.observation_engine import CycleFailed, ObservationEngine
from dev_server.om.engine.output_check import observer_problem
from dev_server.om.engine.parts import Cycle, marker_config
from dev_server.om.engine.window import unobserved
from dev_server.om.options.attachments import for_model
from dev_server.om.options.extractors import take_inline_values
from dev_server.om.prompting.context import message_boundary
from dev_server.om.prompting.groups import message_range, wrap_group
from dev_server.om.prompting.parsing import ObserverOutput, parse_observer_output
from dev_server.om.prompting.prompts import observer_messages, observer_system_prompt
from dev_server.om.prompting.transcript import attachment_parts, format_transcript
from dev_server.om.tokens.counting import count_messages, estimate_tokens
from dev_server.storage.om_records import OMRecord

log = logging.getLogger(__name__)

OTHER_PART_CHARS = 500
THREAD_CURSOR_PATH = "$.mastra.om.lastObservedAt"  # each thread's own cursor, in its metadata (1.2)
_THREAD_BLOCK = re.compile(r'^[ \t]*<thread id="([^"]*)">[ \t]*\n([\s\S]*?)^[ \t]*</thread>[ \t]*$', re.M)
_DATE_LINE = re.compile(r"^Date: .+$", re.M)

def section_id(thread_id: str, obscure: bool) -> str:
    return xxhash.xxh32_hexdigest(thread_id.encode()) if obscure else thread_id


async def other_threads(store: ResourceConversations, record: OMRecord, resource_id: str,
                        current: str) -> dict[str, list[Message]]:
    """The unobserved messages of the resource's other threads (each from its own cursor),
    by thread, the thread with the oldest first; one read for the whole resource."""
    found: dict[str, list[Message]] = {}
    for message in await store.resource_messages_after(resource_id, current, THREAD_CURSOR_PATH):
        found.setdefault(message.thread_id, []).append(message)
    return {thread_id: kept for thread_id, messages in found.items()
            if (kept := unobserved(messages, record, cursor=None))}


def other_conversations(by_thread: Mapping[str, Sequence[Message]], obscure: bool) -> list[tuple[str, str]]:
    """(id, transcript) of each other thread for the actor's context, parts cut to 500 characters."""
    return [(section_id(thread_id, obscure), format_transcript([_cut(m) for m in messages])[0])
            for thread_id, messages in by_thread.items()]


def other_tokens(conversations: Sequence[tuple[str, str]]) -> int:
    """The other threads' context as Mastra counts it: the text of their blocks, each in its
    ``<other-conversation id="...">`` wrapper, as the actor's context shows them."""
    if not conversations:
        return 0
    return estimate_tokens("\n\n".join(f'<other-conversation id="{thread_id}">\n{transcript}\n</other-conversation>'
                                        for thread_id, transcript in conversations))


def _cut(message: Message) -> Message:
    parts = [{**p, "text": p["text"][:OTHER_PART_CHARS]} if isinstance(p.get("text"), str) else p
             for p in message.content.get("parts") or ()]
    return replace(message, content={**message.content, "parts": parts}, stored_digest=None)


def batches(by_thread: Mapping[str, Sequence[Message]], max_tokens: int, current: str | None = None) -> list[list[str]]:
    """Thread ids grouped so a group's messages stay within ``max_tokens`` (a bigger thread
    is a group of its own), oldest activity first. The ``current`` thread comes first: its
    turn has every other thread's unobserved messages in view, so its oldest is the oldest
    of all, as Mastra orders it (Mastra's current thread holds them in its message list, D15)."""
    order = sorted(by_thread, key=lambda t: "" if t == current else by_thread[t][0].created_at if by_thread[t] else "")
    groups: list[list[str]] = []
    size = 0
    for thread_id in order:
        tokens = count_messages(by_thread[thread_id])
        if groups and size + tokens <= max_tokens:
            groups[-1].append(thread_id)
            size += tokens
        else:
            groups.append([thread_id])
            size = tokens
    return groups


def merge_section(log_text: str, sid: str, observations: str, boundary_at: str) -> str:
    """``log_text`` with this cycle's observations of one thread added (see the module docstring)."""
    observations = observations.strip()
    new_date = _DATE_LINE.search(observations)
    blocks = [m for m in _THREAD_BLOCK.finditer(log_text) if m.group(1) == sid]
    if blocks and new_date:
        last = blocks[-1]
        dates = _DATE_LINE.findall(last.group(2))
        if dates and dates[-1] == new_date.group(0):
            body = observations.replace(new_date.group(0), "", 1).strip()
            merged = f'<thread id="{sid}">\n{last.group(2).rstrip()}\n{body}\n</thread>'
            return log_text[:last.start()] + merged + log_text[last.end():]
    section = f'<thread id="{sid}">\n{observations}\n</thread>'
    return f"{log_text.strip()}{message_boundary(boundary_at)}{section}" if log_text.strip() else section


def thread_sections(raw: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _THREAD_BLOCK.finditer(raw)}


@dataclass
class _Observed:
    """What one thread of a resource-scope observation gave."""

    ctx: CycleContext  # the thread's own: its id, its hints; its parts go to the turn's stream, not stored
    cycle: Cycle
    output: ObserverOutput
    extraction: ExtractionResult


async def observe_resource(engine: ObservationEngine, ctx: CycleContext, record: OMRecord,
                           by_thread: Mapping[str, Sequence[Message]]) -> OMRecord | None:
    """One observation of every thread's unobserved messages (batches in parallel); the
    updated record, or None when nothing was observed.

    Extractors, titles and working memory work per thread: each ``<thread>`` block of the
    answer carries that thread's sections, written to that thread. Working memory shared by
    the resource is answered once per call instead; then the batches run one after another,
    each applying its update before the next is asked, so none overwrites another's."""
    records = engine.records
    by_thread = {t: list(ms) for t, ms in by_thread.items() if ms}
    if not by_thread or not await records.claim_flag(record.id, "is_observing", stale_after_s=STALE_FLAG_S):
        return None
    try:
        obscure = engine.options.obscure_thread_ids
        hints = await records.threads_om([t for t in by_thread if t != ctx.thread_id])
        contexts = {t: ctx if t == ctx.thread_id else _thread_context(ctx, t, hints.get(t, {})) for t in by_thread}
        groups = batches(by_thread, engine.options.observation.max_tokens_per_batch, ctx.thread_id)
        every = [t for group in groups for t in group]
        calls = [_observe_batch(engine, ctx, record, {t: by_thread[t] for t in group}, contexts, obscure, every)
                 for group in groups]
        if engine.extraction.shared(OBSERVATION) and len(calls) > 1:
            results = [await call for call in calls]
        else:
            results = await asyncio.gather(*calls)
        observed = {t: item for result in results for t, item in result.items()}
        if not observed:
            return None
        current = await records.active(record.lookup_key) or record
        text = current.active_observations
        newest_at = max(m.created_at for t in observed for m in by_thread[t])
        retrieval = engine.options.retrieval is not None
        for thread_id, item in observed.items():
            observations = item.output.observations
            if retrieval:  # which messages of this thread the cycle observed (4.5)
                observations = wrap_group(observations, message_range(by_thread[thread_id]))
            # the boundary before a thread's section: that thread's newest observed message, as Mastra's
            thread_newest = max(m.created_at for m in by_thread[thread_id])
            text = merge_section(text, section_id(thread_id, obscure), observations, thread_newest)
        ids = [m.id for t in observed for m in by_thread[t]]
        updated = await records.update_active_observations(
            record.id, observations=text, token_count=estimate_tokens(text), last_observed_at=newest_at,
            observed_ids=ids)
        for thread_id, item in observed.items():
            await engine.commit_thread(item.ctx, item.output, by_thread[thread_id], item.extraction, item.cycle.id)
        # each thread's end part reports the whole cycle's new observation tokens, as Mastra's
        cycle_tokens = sum(estimate_tokens(item.output.observations) for item in observed.values())
        for thread_id, item in observed.items():
            output = item.output
            ctx.emit(item.cycle.end(record=updated, observation_tokens=cycle_tokens,
                                    observations=output.observations, current_task=output.current_task,
                                    suggested_response=output.suggested_response,
                                    extra=end_fields(item.extraction)), durable=thread_id == ctx.thread_id)
        return updated
    finally:
        await records.release_flag(record.id, "is_observing")


def _thread_context(ctx: CycleContext, thread_id: str, hints: dict[str, Any]) -> CycleContext:
    """The cycle context of another thread of the resource: its parts reach the turn's
    stream (the client sees every thread's cycle) but are stored with no message."""
    def emit(part: Any, durable: bool = False) -> None:
        ctx.emit(part, durable=False)

    return replace(ctx, thread_id=thread_id, hints=hints, emit=emit)


async def _observe_batch(engine: ObservationEngine, ctx: CycleContext, record: OMRecord,
                         group: dict[str, list[Message]], contexts: Mapping[str, CycleContext],
                         obscure: bool, every: list[str]) -> dict[str, _Observed]:
    """The observer on one batch of threads; each thread's parsed output and extracted
    values, by thread id. Shared working memory is applied here, before the next batch.
    ``every``: the threads of the whole observation, which each start part names."""
    options, extraction = engine.options, engine.extraction
    shared = extraction.shared(OBSERVATION)
    per_thread = [s for s in extraction.slugs(OBSERVATION) if s not in shared]
    config = marker_config(options)
    cycles = {t: Cycle(OBSERVATION, record, t, config, count_messages(ms), clock=engine.records.clock,
                       thread_ids=every) for t, ms in group.items()}
    for thread_id, cycle in cycles.items():
        contexts[thread_id].emit(cycle.start(), durable=True)
    ids = {section_id(t, obscure): t for t in group}
    blocks, attachments = [], []
    for thread_id, messages in group.items():
        transcript, found = format_transcript(messages)
        blocks.append(f'<thread id="{section_id(thread_id, obscure)}">\n{transcript}\n</thread>')
        attachments += found
    thread_title = options.observation.thread_title
    thread_priors = {}
    for thread_id in group:
        hints = contexts[thread_id].hints or {}
        thread_priors[section_id(thread_id, obscure)] = [
            ("current-task", hints.get("currentTask")), ("suggested-response", hints.get("suggestedResponse")),
            ("thread-title", hints.get("threadTitle") if thread_title else None),
            *await extraction.priors(contexts[thread_id], OBSERVATION, slugs=per_thread)]
    system = observer_system_prompt(instruction=options.observation.instruction, multi_thread=True,
                                    thread_title=thread_title,
                                    extractors=await extraction.prompt_extractors(ctx, OBSERVATION, record.resource_id),
                                    shared=sorted(shared))
    prior_extracted = await extraction.priors(ctx, OBSERVATION, slugs=shared)
    try:
        model = await om_model(ctx.llm, options.observer_model, ctx.agent_model)
        forwarded = attachment_parts(attachments, for_model(options.observation.observe_attachments, model))
        prompt = [{"role": "system", "content": system},
                  *observer_messages("\n\n".join(blocks), previous_observations=record.active_observations or None,
                                     prior_current_task=None, prior_suggested_response=None, attachments=forwarded,
                                     prior_extracted=prior_extracted, thread_priors=thread_priors)]
        for _ in range(2):  # an answer no thread can use is asked for once more
            completion = await engine.ask(ctx, OBSERVER_AGENT, model, prompt, options.observation.model_settings)
            if parse_observer_output(completion.text).degenerate:
                problem = observer_problem("", True)
                continue
            outputs, shared_values, problems = _per_thread(completion.text, ids, group, obscure, per_thread, shared)
            if outputs:
                break
            problem = "; ".join(dict.fromkeys(problems.values()))
        else:
            raise CycleFailed(f"Observer output rejected after retry: {problem}")
    except Exception as exc:
        log.warning("observation of resource %s failed: %s", record.resource_id, describe_error(exc))
        for thread_id, cycle in cycles.items():
            contexts[thread_id].emit(cycle.failed(describe_error(exc)), durable=True)
        return {}
    outputs = {t: outputs[t] for t in group if t in outputs}  # the threads' order, not the answer's
    results = await asyncio.gather(*[
        engine.extract(contexts[t], record, OBSERVATION, output.extracted,
                       observed_source(output.observations, group[t]), slugs=per_thread)
        for t, output in outputs.items()])
    observed = {t: _Observed(contexts[t], cycles[t], output, result)
                for (t, output), result in zip(outputs.items(), results, strict=True)}
    if shared and observed:
        owner = observed.get(ctx.thread_id) or next(iter(observed.values()))
        source = observed_source("\n".join(item.output.observations for item in observed.values()),
                                 [m for t in observed for m in group[t]])
        found = await engine.extract(ctx, record, OBSERVATION, shared_values, source, slugs=shared)
        await extraction.commit(ctx, found, owner.cycle.id)  # working memory only: no title among them
        owner.extraction.values.update(found.values)
        owner.extraction.failures.update(found.failures)
    for thread_id, cycle in cycles.items():
        if thread_id not in observed:
            reason = problems.get(thread_id, "no <thread> block for it")
            contexts[thread_id].emit(cycle.failed(f"Observer output rejected for this thread: {reason}"),
                                     durable=True)
    return observed


def _per_thread(raw: str, ids: Mapping[str, str], group: Mapping[str, Sequence[Message]], obscure: bool,
                slugs: Sequence[str], shared: Collection[str]
                ) -> tuple[dict[str, ObserverOutput], dict[str, Any], dict[str, str]]:
    """The answer read per ``<thread>`` block (thread id -> parsed block, the blocks that
    hold observations, ``dev_server.om.engine.output_check``), the shared sections written outside every
    block, and why a thread's block was rejected (thread id -> problem)."""
    sections = thread_sections(raw)
    if not sections and len(group) == 1:
        sections = {section_id(next(iter(group)), obscure): raw}
    outputs: dict[str, ObserverOutput] = {}
    problems = {thread_id: "no <thread> block for it" for thread_id in group}
    for sid, body in sections.items():
        if sid in ids:
            output = parse_observer_output(f"<observations>\n{body}\n</observations>", slugs)
            found = observer_problem(output.observations, output.degenerate)
            if found is None:
                outputs[ids[sid]] = output
                problems.pop(ids[sid], None)
            else:
                problems[ids[sid]] = found
    shared_values, _ = take_inline_values(_THREAD_BLOCK.sub("", raw), list(shared)) if shared else ({}, "")
    return outputs, shared_values, problems
