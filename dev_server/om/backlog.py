"""A backlog: a thread whose unobserved window is far past its threshold, observed in
bounded batches (docs/observational-memory.md#backlog, D52).

A thread imported with thousands of messages (the Studio's ``save-messages``) reaches its
first turn with millions of unobserved tokens. Mastra observes all of them in one
synchronous observer call before the turn answers (100,000 messages are 5.1 M tokens: no
provider takes such a prompt, and issue 31 measured 37 s with the local model). Here a window is a backlog when its
pending tokens exceed ``backlog_limit``: ``blockAfter`` (the point past which a turn may
block at all), never less than one batch. Then:

* the turn's first step observes at most one batch synchronously: the oldest unobserved
  messages up to ``observation.maxTokensPerBatch`` tokens (at least one message; never cut
  between two messages of the same time, since the cursor is a time);
* the actor is shown the newest unobserved messages that stay below the threshold (the
  turn's input always), as any window below its threshold is shown; the messages between
  the log and that tail wait, unshown, for the catch-up. For the rest of the turn nothing
  is buffered or observed by the turn itself (an observation of the tail would move the
  cursor past what is still unshown, a chunk of it would be activated past it);
* a catch-up job on the process's background work (``dev_server.background``) observes the
  next oldest batch, reflects when the log reached its threshold, and queues itself again,
  one batch per job so other background work gets its turn, until every message up to the
  newest the first step saw is observed (Mastra's state after it observed the whole
  window). A job is one observation cycle (``ObservationEngine.observe``: the record's
  ``is_observing`` flag, re-read and skipped when another cycle moved on), so a turn, a
  manual observe or another process never observes the same messages. While it is at work
  a turn of this process treats its window as above: the tail below the threshold, nothing
  buffered or observed. A later turn that finds the backlog with no catch-up at work (this
  process restarted, a batch failed) observes one batch itself and queues it again.

A catch-up cycle keeps no markers on messages (D53): its observation start and end parts
would land on the newest stored reply, which is among the messages not observed yet, and an
end marker there would mark that reply as observed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dev_server.kernel.messages import Message
from dev_server.kernel.processors import no_span
from dev_server.om.engine.cycle_context import CycleContext
from dev_server.om.engine.flags import STALE_FLAG_S, flag_live
from dev_server.om.engine.window import unobserved
from dev_server.om.options.config import BLOCK_AFTER, ObservationalMemoryOptions
from dev_server.om.options.hooks import current_trigger
from dev_server.om.tokens.counting import TOKENS_PER_CONVERSATION
from dev_server.om.turn_window import Carried, TurnWindow
from dev_server.storage.om_records import OMRecord

if TYPE_CHECKING:
    from dev_server.background import BackgroundWork
    from dev_server.kernel.events import DataPart
    from dev_server.kernel.ports import ThreadMessages
    from dev_server.om.engine.observation_engine import ObservationEngine

log = logging.getLogger(__name__)

JOB = "om-backlog"  # the background work's key prefix (its kind in /health)


def backlog_limit(options: ObservationalMemoryOptions, observation_tokens: int = 0) -> int:
    """Past this many pending tokens a window is a backlog: ``blockAfter``, or without async
    buffering (where Mastra has none) its default multiple of the threshold; never below one
    batch, so a window a single batch holds is observed as Mastra observes it."""
    threshold = options.message_threshold(observation_tokens)
    block = options.observation.block_after or threshold * BLOCK_AFTER
    return max(round(block), threshold, options.observation.max_tokens_per_batch)


def oldest_batch(messages: Iterable[Message], count: Callable[[Message], int], budget: int) -> list[Message]:
    """The oldest of ``messages`` (oldest first) up to ``budget`` tokens, at least one, and
    every message of the same time as the last one taken (the cursor is a time: a message
    left out at that time would count as observed). Reads ``messages`` only as far as that."""
    batch: list[Message] = []
    total = TOKENS_PER_CONVERSATION
    for message in messages:
        tokens = count(message)
        if batch and (total + tokens > budget) and message.created_at > batch[-1].created_at:
            break
        batch.append(message)
        total += tokens
    return batch


def tail_below(messages: Sequence[Message], count: Callable[[Message], int], threshold: int,
               keep: set[str]) -> set[str]:
    """Ids of the oldest of ``messages`` that do not fit, newest first, below ``threshold``
    tokens; ``keep`` (the turn's input) always fits."""
    total = TOKENS_PER_CONVERSATION + sum(count(m) for m in messages if m.id in keep)
    left_out: set[str] = set()
    for message in reversed(messages):
        if message.id in keep:
            continue
        if left_out or total + count(message) >= threshold:
            left_out.add(message.id)
        else:
            total += count(message)
    return left_out


@dataclass
class _Job:
    """What a queued catch-up needs of the turn that queued it."""

    ctx: CycleContext
    key: str
    thread_id: str
    until: str  # the newest message the turn saw: what the catch-up observes ends there


class Backlog:
    """The backlogs of one memory's OM: the bounded first observation, the catch-up jobs."""

    def __init__(self, engine: ObservationEngine, background: BackgroundWork | None,
                 store: ThreadMessages) -> None:
        self.engine = engine
        self.background = background
        self.store = store

    @property
    def options(self) -> ObservationalMemoryOptions:
        return self.engine.options

    def over(self, record: OMRecord, pending: int) -> bool:
        """A backlog, or a catch-up of this process still at work on the record."""
        return self.catching_up(record.lookup_key) or pending > backlog_limit(
            self.options, record.observation_token_count)

    def catching_up(self, key: str) -> bool:
        """A catch-up of record ``key`` is queued or running in this process."""
        return self.background is not None and self.background.busy(f"{JOB}:{key}")

    async def first_step(self, ctx: CycleContext, record: OMRecord, window: TurnWindow,
                         keep: set[str]) -> OMRecord:
        """The turn's first step on a backlog: one batch observed now, unless a catch-up is
        already at work; the window cut to the tail the actor sees; the catch-up queued."""
        if not self.catching_up(record.lookup_key) and not flag_live(record.is_observing, STALE_FLAG_S,
                                                                     clock=self.engine.clock):
            messages = [m for m in window.messages if m.id not in window.observed and m.id not in keep]
            batch = oldest_batch(messages, lambda m: window.tokens[m.id],
                                 self.options.observation.max_tokens_per_batch)
            if batch:
                observed = await self.engine.observe(ctx, record, batch, TOKENS_PER_CONVERSATION + sum(
                    window.tokens[m.id] for m in batch), by_cursor=True)
                if observed is not None:
                    record = observed
                    window.remove({m.id for m in batch})
                    log.info("thread %s: a backlog's first batch observed (%d messages)", ctx.thread_id,
                             len(batch))
        threshold = self.options.message_threshold(record.observation_token_count)
        rest = [m for m in window.messages if m.id not in window.observed]
        hidden = tail_below(rest, lambda m: window.tokens[m.id], threshold, keep)
        window.remove(hidden)
        if hidden:
            log.info("thread %s: %d backlog messages wait for the catch-up, unshown", ctx.thread_id, len(hidden))
        if window.messages:
            self.start(ctx, record, max(m.created_at for m in window.messages))
        return record

    def start(self, ctx: CycleContext, record: OMRecord, until: str) -> bool:
        """Queue the catch-up of ``record``'s thread up to ``until`` (one per record in this process)."""
        key = record.lookup_key
        if self.background is None or not self.background.accepting:
            return False
        job = _Job(replace(ctx, emit=_unkept, open_span=no_span, hints=dict(ctx.hints or {}), counted={},
                           extractors={}), key, ctx.thread_id, until)
        return self.background.submit(f"{JOB}:{key}", lambda: self._catch_up(job))

    async def _catch_up(self, job: _Job) -> None:
        """One batch of the backlog, then the next job, queued as this one ends."""
        if await self._one_batch(job) and self.background is not None:
            self.background.follow_up(f"{JOB}:{job.key}", lambda: self._catch_up(job))

    async def _one_batch(self, job: _Job) -> bool:
        """Observe the oldest batch of what is unobserved up to ``job.until``; True when
        another batch may follow."""
        engine = self.engine
        record = await engine.records.active(job.key)
        if record is None:
            return False
        stored, derived = await self.store.window_since(job.thread_id, record.last_observed_at)
        carried = Carried(derived, job.ctx.counted)
        budget = self.options.observation.max_tokens_per_batch
        batch = oldest_batch(_unobserved_until(stored, record, job.until), carried.count, budget)
        if not batch:
            log.info("thread %s: the backlog is caught up", job.thread_id)
            return False
        token = current_trigger.set("async-buffer")
        try:
            observed = await engine.observe(job.ctx, record, batch, carried.count_all(batch), by_cursor=True)
            if observed is None:
                return False
            await engine.maybe_reflect(job.ctx, observed)
        finally:
            current_trigger.reset(token)
        job.ctx.counted.clear()
        log.info("thread %s: a backlog batch observed in the background (%d messages)", job.thread_id, len(batch))
        return True


_SCAN = 500  # messages filtered at a time: a batch is found without filtering the whole backlog


def _unobserved_until(stored: Sequence[Message], record: OMRecord, until: str) -> Iterator[Message]:
    """The unobserved of ``stored`` (oldest first) up to ``until``, filtered ``_SCAN`` at a time
    as they are read (a batch takes the oldest few hundred of a backlog of thousands)."""
    for start in range(0, len(stored), _SCAN):
        for message in unobserved(stored[start:start + _SCAN], record):
            if message.created_at > until:
                return
            yield message


def _unkept(part: DataPart, *args: Any, **kwargs: Any) -> None:
    """A catch-up cycle's parts: no turn streams them, and none is kept (module docstring)."""

