"""Background work of one process: jobs that outlive the request that queued them.

A title to generate (``dev_server.memory.titles``), later buffered observations and embeddings:
work a turn asks for but must not wait for. The app's lifespan starts one ``BackgroundWork``
(a fixed set of workers in one ``asyncio.TaskGroup``) and drains it on shutdown, so a job is
never cancelled with its request (a client hanging up does not stop its title) and never
outlives the stores it writes to.

``submit(key, factory)`` never blocks and never raises: the job is queued, or dropped with
a log line when the queue is full (``max_queued``) or the group is not running, or skipped
when a job with the same key (one per thread and kind, e.g. ``title:<thread>``) is already
queued or running. ``factory`` is called only when a worker picks the job up, so nothing
runs on the caller's task. A job that raises is logged and counted, never retried.
A running job may ask to be followed by another of its key (``follow_up``): queued as it
ends, before its key is let go, so the key stays busy from one to the next (a catch-up
that works one piece per job, ``dev_server.om.backlog``). ``busy(key)`` says whether a job of
``key`` is queued or running. ``stats()`` is what ``/health`` shows, in total and by kind (the key's first part:
``title``, ``om-buffer``, ``om-reflect``).

The queue and its keys are this process's: each of the gateway's workers has its own, so
two workers may run a job of the same key at once. A job must therefore be safe to run
twice: a title is written only if the thread is still untitled (one conditional
statement), so the second answer is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_MAX_QUEUED = 256
DEFAULT_WORKERS = 2
DEFAULT_DRAIN_S = 10.0

JobFactory = Callable[[], Awaitable[Any]]


class BackgroundWork:
    def __init__(self, *, max_queued: int = DEFAULT_MAX_QUEUED, workers: int = DEFAULT_WORKERS,
                 drain_s: float = DEFAULT_DRAIN_S) -> None:
        self.max_queued = max_queued
        self.workers = workers
        self.drain_s = drain_s
        self._queue: asyncio.Queue[tuple[str, JobFactory] | None] | None = None
        self._keys: set[str] = set()  # queued or running
        self._follow: dict[str, JobFactory] = {}  # running key -> the job queued as it ends
        self._running = 0
        self._counts: Counter[str] = Counter()
        self._by_kind: dict[str, Counter[str]] = {}  # "om-buffer" of "om-buffer:thread:t" -> counts
        self._group_task: asyncio.Task | None = None
        self._accepting = False

    @property
    def accepting(self) -> bool:
        return self._accepting

    async def start(self) -> None:
        """Start the workers (the lifespan calls this once the stores are open)."""
        if self._group_task is not None:
            return
        self._queue = asyncio.Queue(self.max_queued)
        self._accepting = True
        self._group_task = asyncio.create_task(self._group(), name="background-work")

    def submit(self, key: str, factory: JobFactory) -> bool:
        """Queue ``factory()`` under ``key``; True if queued. Never blocks, never raises."""
        if not self._accepting or self._queue is None:
            self._count(key, "dropped")
            log.warning("background job %s dropped: background work is not running", key)
            return False
        if key in self._keys:
            self._count(key, "deduplicated")
            log.debug("background job %s skipped: one is already queued or running", key)
            return False
        if not self._enqueue(key, factory):
            return False
        self._keys.add(key)
        return True

    def _enqueue(self, key: str, factory: JobFactory) -> bool:
        """Put a job on the queue, counted submitted; dropped (counted, logged) when it is full."""
        assert self._queue is not None
        try:
            self._queue.put_nowait((key, factory))
        except asyncio.QueueFull:
            self._count(key, "dropped")
            log.warning("background job %s dropped: the queue is full (%d jobs)", key, self.max_queued)
            return False
        self._count(key, "submitted")
        return True

    def busy(self, key: str) -> bool:
        """A job of ``key`` is queued or running."""
        return key in self._keys

    def follow_up(self, key: str, factory: JobFactory) -> bool:
        """Queue ``factory()`` under ``key`` as the job of ``key`` now running ends (called
        from that job); False when it will not be. Never blocks, never raises."""
        if not self._accepting or key not in self._keys or key in self._follow:
            return False
        self._follow[key] = factory
        return True

    async def drain(self, timeout_s: float | None = None) -> None:
        """Stop accepting, let queued and running jobs finish (up to ``timeout_s``, default
        ``drain_s``), then cancel whatever is left."""
        if self._group_task is None or self._queue is None:
            return
        self._accepting = False
        try:
            async with asyncio.timeout(self.drain_s if timeout_s is None else timeout_s):
                for _ in range(self.workers):
                    await self._queue.put(None)  # one stop mark per worker, after every queued job
                await asyncio.shield(self._group_task)
        except TimeoutError:
            log.warning("background work: %d running and %d queued jobs cancelled at shutdown",
                        self._running, len(self._keys) - self._running)
            self._group_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._group_task
        self._group_task = None

    def stats(self) -> dict[str, int]:
        queued = len(self._keys) - self._running
        return {"queued": queued, "running": self._running, "done": self._counts["done"],
                "failed": self._counts["failed"], "dropped": self._counts["dropped"],
                "deduplicated": self._counts["deduplicated"], "maxQueued": self.max_queued,
                "byKind": {kind: dict(counts) for kind, counts in sorted(self._by_kind.items())}}

    def _count(self, key: str, outcome: str) -> None:
        self._counts[outcome] += 1
        self._by_kind.setdefault(key.split(":", 1)[0], Counter())[outcome] += 1

    async def _group(self) -> None:
        async with asyncio.TaskGroup() as group:
            for index in range(self.workers):
                group.create_task(self._worker(), name=f"background-worker-{index}")

    async def _worker(self) -> None:
        assert self._queue is not None
        while True:
            item = await self._queue.get()
            if item is None:
                return
            key, factory = item
            self._running += 1
            try:
                await factory()
                self._count(key, "done")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a job's fault is its own: logged, counted, forgotten
                self._count(key, "failed")
                log.warning("background job %s failed: %s: %s", key, type(exc).__name__, exc)
            finally:
                self._running -= 1
                self._next(key)

    def _next(self, key: str) -> None:
        """The job of ``key`` ended: its follow-up is queued under the same key, or the key is free."""
        follow = self._follow.pop(key, None)
        if follow is not None and self._accepting and self._queue is not None and self._enqueue(key, follow):
            return
        self._keys.discard(key)
