"""Activation: buffered observation chunks become part of the active log, with no model call.

The background observer (``dev_server.om.engine.buffering``) leaves chunks on the record; when the
unobserved window reaches the threshold, or the thread was idle past its prompt cache's
lifetime, or the model changed (``dev_server.om.engine.idle``), the oldest chunks are swapped into the
active log and their messages leave the window (docs/observational-memory.md#activation).

How many chunks: enough to bring the window down to the retention floor that
``bufferActivation`` leaves (``threshold * (1 - ratio)``), by the rules of
``chunks_to_activate``; past ``blockAfter`` the larger choice wins (``force``). The swap
itself is one transaction that checks the chunks are still there
(``OMRecordStore.activate_chunks``), so two processes never activate a chunk twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dev_server.kernel.events import DataPart
from dev_server.om.engine.parts import OBSERVATION, activation_part, marker_config
from dev_server.om.options.config import ObservationalMemoryOptions, activation_ratio
from dev_server.storage.om_records import OMRecord, OMRecordStore

Chunk = dict[str, Any]


def chunks_to_activate(chunks: Sequence[Chunk], current: int, threshold: int, ratio: float, force: bool) -> int:
    """How many of the oldest chunks to activate (``calculateProjectedMessageRemoval``'s maths).

    ``floor`` is what should stay, ``target`` what should go. Walking the chunks' cumulative
    message tokens, ``over`` is the smallest sum at or above the target and ``under`` the
    largest below it; a choice must leave at least ``min(1000, floor)`` tokens."""
    if not chunks:
        return 0
    floor = threshold * (1 - ratio)
    target = max(0.0, current - floor)
    min_remaining = min(1000.0, floor)
    over: tuple[int, int] | None = None  # (cumulative tokens, chunk count)
    under: tuple[int, int] | None = None
    total = 0
    for index, chunk in enumerate(chunks, start=1):
        total += int(chunk.get("messageTokens") or 0)
        if total >= target:
            if over is None:
                over = (total, index)
        else:
            under = (total, index)
    if force and over and current - over[0] >= min_remaining:
        return over[1]
    if over and over[0] - target <= 0.95 * floor and current - over[0] >= min_remaining:
        return over[1]
    if under and current - under[0] >= min_remaining:
        return under[1]
    if over:
        return over[1]
    return 1


def current_tokens(record: OMRecord) -> int:
    chunks = record.buffered_observation_chunks or []
    return record.pending_message_tokens or sum(int(c.get("messageTokens") or 0) for c in chunks)


def plan(options: ObservationalMemoryOptions, record: OMRecord) -> int:
    """The chunk count activation would take now."""
    chunks = record.buffered_observation_chunks or []
    threshold = options.message_threshold(record.observation_token_count)
    current = current_tokens(record)
    block_after = options.observation.block_after
    force = block_after is not None and current >= block_after
    return chunks_to_activate(chunks, current, threshold, activation_ratio(options.observation.buffer_activation,
                                                                           threshold), force)


def projected_removal(options: ObservationalMemoryOptions, record: OMRecord) -> int:
    """Message tokens an activation now would remove (``data-om-status``)."""
    chunks = record.buffered_observation_chunks or []
    return sum(int(c.get("messageTokens") or 0) for c in chunks[:plan(options, record)])


@dataclass
class Activation:
    record: OMRecord
    chunks: list[Chunk]
    message_ids: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Trigger:
    """Why activation runs: ``threshold``, ``ttl`` or ``provider_change``, with its details."""

    kind: str
    details: dict[str, Any] = field(default_factory=dict)


async def activate(options: ObservationalMemoryOptions, records: OMRecordStore, record: OMRecord,
                   trigger: Trigger, thread_id: str) -> tuple[Activation | None, list[DataPart]]:
    """Swap the chosen chunks in; the activation (None if there was nothing, or another
    process took them first) and one ``data-om-activation`` part per activated chunk."""
    count = plan(options, record)
    chunks = (record.buffered_observation_chunks or [])[:count]
    if not chunks:
        return None, []
    updated = await records.activate_chunks(record.id, [c["id"] for c in chunks])
    if updated is None:
        return None, []
    config = marker_config(options)
    details = dict(trigger.details)
    if "activateAfterIdle" in details:  # the TTL in force goes into the marker's config
        config["activateAfterIdle"] = details.pop("activateAfterIdle")
    parts = [activation_part(cycle_id=chunk.get("cycleId"), operation=OBSERVATION, record=updated, thread_id=thread_id,
                             clock=records.clock,
                             config=config, tokens_activated=int(chunk.get("messageTokens") or 0),
                             observation_tokens=int(chunk.get("tokenCount") or 0),
                             messages_activated=len(chunk.get("messageIds") or ()), triggered_by=trigger.kind,
                             observations=chunk.get("observations"), details=details)
             for chunk in chunks]
    ids = {mid for c in chunks for mid in c.get("messageIds") or ()}
    return Activation(updated, chunks, ids), parts


def interval_crossed(pending: int, last_boundary: int, threshold: int, buffer_tokens: int) -> bool:
    """Buffer when the window crossed another interval since the last trigger: every
    ``bufferTokens``, every half of it from ``threshold - 1.1 * bufferTokens`` on (2.4)."""
    if buffer_tokens <= 0:
        return False
    ramp = threshold - 1.1 * buffer_tokens
    interval = buffer_tokens / 2 if pending >= ramp else buffer_tokens
    return math.floor(pending / interval) > math.floor(last_boundary / interval)
