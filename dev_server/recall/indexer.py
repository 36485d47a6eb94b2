"""Embeds what the queue holds, in the background, never in a turn's way.

One task per process, started and stopped by the lifespan. It claims a batch of queued
messages (``VectorIndex.claim``: the database decides, so two processes never embed the
same batch; messages of agents without semantic recall are dropped there, unembedded),
embeds their text pieces in one call, writes the vectors if the text is still the claimed
version, and goes on until the queue is empty; then it sleeps until ``nudge``
(a turn or an edit of this process saved messages) or ``poll_s`` (the other process did).
A text already embedded elsewhere (a cloned thread, a repeated "thanks") reuses its vectors.

A failing embedder (provider down) puts the batch back with a growing delay (up to
``MAX_BACKOFF_S``) and counts the failure; nothing is dropped, and turns go on without
recall meanwhile. On start, ``repair`` rebuilds a missing index and queues every message
without a vector of the current embedder (first start, a new embedder, a backfill): the
backlog is logged as it shrinks and shown in ``/health``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import numpy as np

from dev_server.kernel.model import Embedder
from dev_server.recall.text import message_text, pieces
from dev_server.storage.message_vectors import Claimed, Embedded, VectorIndex, text_hash

log = logging.getLogger(__name__)

BATCH = 64
LEASE_S = 120.0
POLL_S = 2.0
MAX_BACKOFF_S = 60.0
PROGRESS_EVERY_S = 10.0


class Indexer:
    def __init__(self, index: VectorIndex, embedder: Embedder, *, batch: int = BATCH, poll_s: float = POLL_S) -> None:
        self.index = index
        self.embedder = embedder
        self.batch = batch
        self.poll_s = poll_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._idle = asyncio.Event()
        self.embedded = 0  # messages written by this process
        self.reused = 0
        self.skipped = 0  # messages of agents without semantic recall, dropped from the queue unembedded
        self.failures = 0
        self.last_error: str | None = None
        self.backfill: dict[str, Any] = {"queued": 0, "rebuilt": False, "corrupt": 0}
        self._failing_since: float | None = None

    async def start(self) -> None:
        if self._task is not None:
            return
        repaired = await self.index.repair(self.embedder.key, self.embedder.dimensions)
        self.backfill = {"queued": repaired["queued"], "rebuilt": bool(repaired["rebuilt"]),
                         "corrupt": repaired["corrupt"]}
        if repaired["rebuilt"]:
            log.warning("the vector index was missing: rebuilt, every message is embedded again")
        if repaired["corrupt"]:
            log.warning("%d corrupt vectors dropped: their messages are embedded again", repaired["corrupt"])
        if repaired["queued"]:
            log.info("semantic recall: %d messages to embed with %s", repaired["queued"], self.embedder.answered_by)
        self._task = asyncio.create_task(self._run(), name="recall-indexer")

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    def nudge(self) -> None:
        """Messages were saved here: look at the queue now rather than at the next poll."""
        self._idle.clear()
        self._wake.set()

    async def settled(self, timeout_s: float = 30.0) -> None:
        """Wait until the queue was found empty (tests, the benchmark)."""
        self.nudge()
        async with asyncio.timeout(timeout_s):
            await self._idle.wait()

    async def _run(self) -> None:
        last_report = time.monotonic()
        while True:
            try:
                done = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database is busy or gone for a moment: try later
                log.warning("semantic recall indexer: %s: %s", type(exc).__name__, exc)
                done = 0
            if done:
                if time.monotonic() - last_report > PROGRESS_EVERY_S:
                    last_report = time.monotonic()
                    log.info("semantic recall: %d embedded, %d to go", self.embedded, await self.index.backlog())
                continue
            due = await self.index.due_in()
            if due == 0:
                continue
            self._idle.set()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_s if due is None else min(self.poll_s, due))

    async def run_once(self) -> int:
        """One batch: claim, embed, write. Returns how many messages it took (0: none due)."""
        claimed, skipped = await self.index.claim(self.batch, LEASE_S)
        self.skipped += skipped
        if not claimed:
            return skipped
        texts = [message_text(c.content) for c in claimed]
        hashes = [text_hash(t) for t in texts]
        skip = await self.index.unchanged(self.embedder.key, claimed, hashes)
        todo = [(c, t, h) for c, t, h in zip(claimed, texts, hashes, strict=True) if c.seq not in skip]
        reuse = await self.index.reusable(self.embedder.key, [h for _, t, h in todo if t])
        wanted = [(c, t, h) for c, t, h in todo if t and h not in reuse]
        split = [pieces(t, self.embedder.chunk_chars) for _, t, _ in wanted]
        try:
            matrix = await self.embedder.embed([p for parts in split for p in parts])
        except Exception as exc:
            await self._failed(claimed, exc)
            return len(claimed)
        self._failing_since = None
        fresh: dict[str, list[bytes]] = {}
        row = 0
        for (_, _, digest), parts in zip(wanted, split, strict=True):
            fresh[digest] = [np.asarray(matrix[row + i], dtype="<f4").tobytes() for i in range(len(parts))]
            row += len(parts)
        results = [Embedded(c.seq, c.version, c.thread_id, h, (fresh.get(h) or reuse.get(h)) if t else None)
                   for c, t, h in todo]
        written = await self.index.store(self.embedder.key, results)
        self.embedded += written
        self.reused += sum(1 for _, t, h in todo if t and h in reuse)
        return len(claimed)

    async def _failed(self, claimed: list[Claimed], exc: Exception) -> None:
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"[:500]
        attempts = max(c.attempts for c in claimed) + 1
        delay = min(MAX_BACKOFF_S, 0.5 * 2 ** min(attempts, 10))
        await self.index.retry_later(claimed, delay)
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            log.warning("semantic recall: embedding failed (%s); %d messages retried in %.0f s",
                        self.last_error, len(claimed), delay)

    async def stats(self) -> dict[str, Any]:
        counts = await self.index.stats(self.embedder.key)
        return {"running": self._task is not None and not self._task.done(), "vectors": counts["vectors"],
                "backlog": counts["backlog"], "embedded": self.embedded, "reused": self.reused, "skipped": self.skipped,
                "failures": self.failures, "lastError": self.last_error, "backfill": self.backfill}
