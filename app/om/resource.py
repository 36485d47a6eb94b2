"""Resource scope: one observation log for all of a user's threads (OBSERVATIONAL-MEMORY.md 1.3).

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
* ``obscureThreadIds`` writes an xxhash32 of each thread id instead of the id.

Async buffering is off in resource scope (configuring it fails at construction).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from app.om.context import message_boundary
from app.om.engine import OBSERVER_AGENT, CycleContext, ObservationalMemory, describe_error, om_model
from app.om.flags import STALE_FLAG_S
from app.om.groups import message_range, wrap_group
from app.om.parsing import parse_observer_output
from app.om.parts import OBSERVATION, Cycle, marker_config
from app.om.prompts import observer_messages, observer_system_prompt
from app.om.tokens import count_messages, estimate_tokens
from app.om.transcript import format_transcript
from app.om.window import unobserved
from app.storage.conversations import ConversationStore, Message
from app.storage.om_records import OMRecord

log = logging.getLogger(__name__)

OTHER_PART_CHARS = 500
THREAD_CURSOR_PATH = "$.mastra.om.lastObservedAt"  # each thread's own cursor, in its metadata (1.2)
_THREAD_BLOCK = re.compile(r'^[ \t]*<thread id="([^"]*)">[ \t]*\n([\s\S]*?)^[ \t]*</thread>[ \t]*$', re.M)
_DATE_LINE = re.compile(r"^Date: .+$", re.M)

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_MASK = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 (the reference algorithm), for ``obscureThreadIds``."""
    length, index = len(data), 0
    if length >= 16:
        lanes = [(seed + _P1 + _P2) & _MASK, (seed + _P2) & _MASK, seed & _MASK, (seed - _P1) & _MASK]
        while index <= length - 16:
            for lane in range(4):
                word = int.from_bytes(data[index:index + 4], "little")
                lanes[lane] = (_rotl((lanes[lane] + word * _P2) & _MASK, 13) * _P1) & _MASK
                index += 4
        acc = (_rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)) & _MASK
    else:
        acc = (seed + _P5) & _MASK
    acc = (acc + length) & _MASK
    while index <= length - 4:
        acc = (_rotl((acc + int.from_bytes(data[index:index + 4], "little") * _P3) & _MASK, 17) * _P4) & _MASK
        index += 4
    while index < length:
        acc = (_rotl((acc + data[index] * _P5) & _MASK, 11) * _P1) & _MASK
        index += 1
    acc = ((acc ^ (acc >> 15)) * _P2) & _MASK
    acc = ((acc ^ (acc >> 13)) * _P3) & _MASK
    return acc ^ (acc >> 16)


def section_id(thread_id: str, obscure: bool) -> str:
    return format(xxh32(thread_id.encode()), "08x") if obscure else thread_id


async def other_threads(store: ConversationStore, record: OMRecord, resource_id: str,
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
    return sum(estimate_tokens(transcript) for _, transcript in conversations)


def _cut(message: Message) -> Message:
    parts = [{**p, "text": p["text"][:OTHER_PART_CHARS]} if isinstance(p.get("text"), str) else p
             for p in message.content.get("parts") or ()]
    return replace(message, content={**message.content, "parts": parts}, stored_digest=None)


def batches(by_thread: Mapping[str, Sequence[Message]], max_tokens: int) -> list[list[str]]:
    """Thread ids grouped so a group's messages stay within ``max_tokens`` (a bigger thread
    is a group of its own), oldest activity first."""
    order = sorted(by_thread, key=lambda t: by_thread[t][0].created_at if by_thread[t] else "")
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


async def observe_resource(engine: ObservationalMemory, ctx: CycleContext, record: OMRecord,
                           by_thread: Mapping[str, Sequence[Message]]) -> OMRecord | None:
    """One observation of every thread's unobserved messages (batches in parallel); the
    updated record, or None when nothing was observed."""
    records = engine.records
    by_thread = {t: list(ms) for t, ms in by_thread.items() if ms}
    if not by_thread or not await records.claim_flag(record.id, "is_observing", stale_after_s=STALE_FLAG_S):
        return None
    try:
        obscure = engine.options.obscure_thread_ids
        results = await asyncio.gather(*[
            _observe_batch(engine, ctx, record, {t: by_thread[t] for t in group}, obscure)
            for group in batches(by_thread, engine.options.observation.max_tokens_per_batch)])
        observed = {t: out for result in results for t, out in result.items()}
        if not observed:
            return None
        current = await records.active(record.lookup_key) or record
        text = current.active_observations
        newest_at = max(m.created_at for t in observed for m in by_thread[t])
        retrieval = engine.options.retrieval is not None
        for thread_id, output in observed.items():
            observations = output.observations
            if retrieval:  # which messages of this thread the cycle observed (4.5)
                observations = wrap_group(observations, message_range(by_thread[thread_id]))
            text = merge_section(text, section_id(thread_id, obscure), observations, newest_at)
        ids = [m.id for t in observed for m in by_thread[t]]
        new_tokens = sum(estimate_tokens(o.observations) for o in observed.values())
        updated = await records.update_active_observations(
            record.id, observations=text, token_count=estimate_tokens(text), last_observed_at=newest_at,
            observed_ids=ids, tokens_observed=new_tokens)
        for thread_id, output in observed.items():
            messages = by_thread[thread_id]
            last = max(messages, key=lambda m: (m.created_at, m.seq or 0))
            values = {"currentTask": output.current_task, "suggestedResponse": output.suggested_response,
                      "lastObservedAt": last.created_at,
                      "lastObservedMessageCursor": {"createdAt": last.created_at, "id": last.id}}
            if thread_id == ctx.thread_id:
                await engine.patch_hints(ctx, values)
            else:
                await records.patch_thread_om(thread_id, values)
        return updated
    finally:
        await records.release_flag(record.id, "is_observing")


async def _observe_batch(engine: ObservationalMemory, ctx: CycleContext, record: OMRecord,
                         group: dict[str, list[Message]], obscure: bool) -> dict[str, Any]:
    """The observer on one batch of threads; each thread's parsed output, by thread id."""
    options = engine.options
    config = marker_config(options, record.observation_token_count)
    cycles = {t: Cycle(OBSERVATION, record, t, config, count_messages(ms)) for t, ms in group.items()}
    for cycle in cycles.values():
        ctx.emit(cycle.start(), durable=cycle.thread_id == ctx.thread_id)
    ids = {section_id(t, obscure): t for t in group}
    blocks, attachments = [], []
    for thread_id, messages in group.items():
        transcript, found = format_transcript(messages)
        blocks.append(f'<thread id="{section_id(thread_id, obscure)}">\n{transcript}\n</thread>')
        attachments += found
    prompt = [{"role": "system", "content": observer_system_prompt(instruction=options.observation.instruction,
                                                                   multi_thread=True)},
              *observer_messages("\n\n".join(blocks), previous_observations=record.active_observations or None,
                                 prior_current_task=None, prior_suggested_response=None, attachments=attachments)]
    try:
        model = await om_model(ctx.llm, options.observer_model, ctx.agent_model)
        outputs: dict[str, Any] = {}
        for _ in range(2):  # a degenerate answer is asked again once
            completion = await engine.ask(ctx, OBSERVER_AGENT, model, prompt, options.observation.model_settings)
            if parse_observer_output(completion.text).degenerate:
                continue
            sections = thread_sections(completion.text)
            if not sections and len(group) == 1:
                sections = {section_id(next(iter(group)), obscure): completion.text}
            for sid, body in sections.items():
                if sid in ids:
                    output = parse_observer_output(f"<observations>\n{body}\n</observations>")
                    if output.observations.strip():
                        outputs[ids[sid]] = output
            break
        else:
            raise RuntimeError("Observer produced degenerate output after retry")
    except Exception as exc:
        log.warning("observation of resource %s failed: %s", record.resource_id, describe_error(exc))
        for cycle in cycles.values():
            ctx.emit(cycle.failed(describe_error(exc)), durable=cycle.thread_id == ctx.thread_id)
        return {}
    for thread_id, cycle in cycles.items():
        output = outputs.get(thread_id)
        if output is None:
            ctx.emit(cycle.failed("The observer wrote nothing for this thread"),
                     durable=thread_id == ctx.thread_id)
        else:
            ctx.emit(cycle.end(record=record, observation_tokens=estimate_tokens(output.observations),
                               observations=output.observations, current_task=output.current_task,
                               suggested_response=output.suggested_response), durable=thread_id == ctx.thread_id)
    return outputs
