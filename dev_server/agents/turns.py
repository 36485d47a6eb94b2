"""The one way a turn starts, whichever route asks: gateway chat, Studio stream/generate/send-message.

A turn on a thread is serialised with every other turn on that thread, in this process and
in every other one (the studio, the gateway's other workers: all write the same database):
first a per-thread ``asyncio.Lock`` (FIFO, so messages sent back to back to one process
keep their order and only one waiter per process polls the database), then the thread's
lease row (``dev_server.storage.leases``), polled with backoff. Both waits share one bound
(``turn_wait_s``); past it the caller gets ``ThreadBusy`` (409). Between processes there is
no queue: of two turns waiting in different workers, whichever polls first after the
release goes next (each still sees every reply stored before it).

Only while holding both does the turn prepare: its input is stamped and stored and the
model's window read, so a second turn always sees the first one's reply. The lease is
renewed every third of ``turn_lease_s`` while the reply streams and released, after the
reply is saved, by ``LiveTurn.aclose``. A process killed mid-turn leaves its lease behind;
it expires and the next turn takes it over.

``start`` also awaits the model's first event, so a provider that fails at once is an
error before any response starts. A memoryless turn (no memory, or no thread named) has
nothing to serialise: it only sees what the client sent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio

from dev_server.agents.registry import RegisteredAgent
from dev_server.agents.runner import Turn, TurnFailed, TurnRunner
from dev_server.kernel import ids
from dev_server.kernel.clock import spaced_iso
from dev_server.kernel.convert import to_model_messages
from dev_server.kernel.errors import ApiError
from dev_server.kernel.events import LoopEvent
from dev_server.kernel.messages import Message
from dev_server.kernel.tools import Tool
from dev_server.memory.turn_rules import TurnIntent
from dev_server.storage.errors import StorageBusy
from dev_server.storage.hrana import StorageUnavailable
from dev_server.storage.leases import ThreadLeases

log = logging.getLogger(__name__)

_HOST = socket.gethostname()
_FIRST_POLL_S, _MAX_POLL_S = 0.01, 0.25


class ThreadBusy(ApiError):
    status = 409


class LiveTurn:
    """A started turn: ``first`` is its first model event; iterate for the rest.

    ``aclose`` (idempotent; also run when iteration ends or fails) closes the model stream,
    which saves the reply, and then lets the next turn on the thread in. It may come from
    another task than the one reading (the response's close after the client left, while the
    frame task still waits on the model): the stream is closed once that reader is out of it,
    at the model's next event (a generator cannot be closed while another task runs it, and
    cancelling the reader would put a second cancellation into the reply's shielded save).
    """

    def __init__(self, turn: Turn, first: LoopEvent, events: AsyncIterator[LoopEvent],
                 release: Callable[[], Awaitable[None]]) -> None:
        self.turn = turn
        self.first = first
        self._events = events
        self._release = release
        self._closed = False
        self._reader: asyncio.Task | None = None  # the task inside __anext__, if any
        self._reader_left = asyncio.Event()

    def __aiter__(self) -> LiveTurn:
        return self

    async def __anext__(self) -> LoopEvent:
        if self._closed:
            raise StopAsyncIteration
        self._reader = asyncio.current_task()
        self._reader_left.clear()
        try:
            return await anext(self._events)
        except BaseException:
            await self.aclose()  # returns at once when another task is closing
            raise
        finally:
            self._reader = None
            self._reader_left.set()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True  # no further reads
        reader = self._reader
        with anyio.CancelScope(shield=True):
            try:
                if reader is not None and reader is not asyncio.current_task():
                    await self._reader_left.wait()  # at the model's next event (or its deadline)
                await self._events.aclose()
            finally:
                await self._release()


class _ThreadLocks:
    """One FIFO lock per thread id, dropped when nobody holds or awaits it."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: Counter[str] = Counter()

    async def acquire(self, key: str, timeout_s: float, before_waiting: Callable[[], Awaitable[object]]) -> bool:
        """Take the lock; ``before_waiting`` runs first if someone holds it (it may raise)."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] += 1
        try:
            if lock.locked():
                await before_waiting()
            async with asyncio.timeout(timeout_s):
                await lock.acquire()
            return True
        except TimeoutError:
            self._forget(key)
            return False
        except BaseException:
            self._forget(key)
            raise

    def release(self, key: str) -> None:
        self._locks[key].release()
        self._forget(key)

    def _forget(self, key: str) -> None:
        self._users[key] -= 1
        if self._users[key] <= 0:
            del self._users[key], self._locks[key]


class TurnStarter:
    def __init__(self, runner: TurnRunner, leases: ThreadLeases, *, wait_s: float, lease_s: float,
                 checkpoint_every_s: float) -> None:
        self.runner = runner
        self.clock = runner.clock  # stamps the turn's input
        self.leases = leases
        self.wait_s = wait_s
        self.lease_s = lease_s
        self.checkpoint_every_s = checkpoint_every_s
        self._locks = _ThreadLocks()

    async def start(self, agent: RegisteredAgent, *, thread_id: str | None, resource_id: str,
                    incoming: list[Message], run_id: str | None = None,
                    client_tools: tuple[Tool, ...] = (), intent: TurnIntent = TurnIntent(),
                    when_busy: Callable[[], Awaitable[object]] | None = None) -> LiveTurn:
        """Start a turn of ``agent``: serialised, prepared, and its first event awaited.

        ``when_busy`` runs once, before waiting behind another turn on the thread (after the
        ownership check); it may raise to answer otherwise (the gateway resumes the running
        reply of a retried turn instead of waiting for it to end).

        Raises ``ThreadNotOwned`` (the thread is another resource's), ``ThreadBusy``, or
        the ``ModelProviderError`` of a model that failed before its first event.
        """
        memory = agent.memory if thread_id is not None else None
        if memory is None or thread_id is None:
            context = to_model_messages(incoming)
            turn = await self.runner.prepare(agent, thread_id=None, resource_id=resource_id, incoming=[],
                                             client_context=context, run_id=run_id, client_tools=client_tools)
            return await self._begin(turn, _nothing)

        # Before waiting behind another reply (in this process or another), a foreign
        # thread id is refused, rather than after queueing; uncontended, prepare's check
        # (inside the lease, where it is authoritative) is the only one.
        checked = False

        async def check_owner_once() -> None:
            nonlocal checked
            if not checked:
                checked = True
                await memory.open_thread(thread_id, resource_id)
                if when_busy is not None:
                    await when_busy()

        deadline = time.monotonic() + self.wait_s
        if not await self._locks.acquire(thread_id, self.wait_s, check_owner_once):
            raise _busy(thread_id)
        # The pid is read here, not at import: the gateway's workers are forked after it.
        holder = f"{_HOST}:{os.getpid()}:{ids.uuid4().hex}"
        renewal: asyncio.Task | None = None

        async def release() -> None:
            if renewal is not None:
                renewal.cancel()
            try:
                if renewal is not None:
                    await self.leases.release(thread_id, holder)
            except Exception as exc:  # it expires on its own
                log.warning("could not release the lease on thread %s: %s", thread_id, exc)
            finally:
                self._locks.release(thread_id)

        try:
            await self._take_lease(thread_id, holder, deadline, before_waiting=check_owner_once)
            renewal = asyncio.create_task(self._renew(thread_id, holder))
            for message, stamp in zip(incoming, spaced_iso(len(incoming), self.clock), strict=True):
                message.created_at = stamp  # stored after the previous reply, so stamped now
            turn = await self.runner.prepare(agent, thread_id=thread_id, resource_id=resource_id,
                                             incoming=incoming, client_context=[], run_id=run_id,
                                             client_tools=client_tools, intent=intent)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await release()
            raise
        return await self._begin(turn, release)

    async def _begin(self, turn: Turn, release: Callable[[], Awaitable[None]]) -> LiveTurn:
        events = self.runner.run(turn, checkpoint_every_s=self.checkpoint_every_s if turn.thread else None)
        try:
            first = await anext(events)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                try:
                    await events.aclose()
                finally:
                    await release()
            cause = exc.__cause__ if isinstance(exc, TurnFailed) else None
            if isinstance(cause, (StorageBusy, StorageUnavailable)):  # nothing streamed yet: the store's 503
                raise cause from exc
            raise
        return LiveTurn(turn, first, events, release)

    async def _take_lease(self, thread_id: str, holder: str, deadline: float,
                          before_waiting: Callable[[], Awaitable[object]]) -> None:
        pause = _FIRST_POLL_S
        waited = False
        while True:
            try:
                if await self.leases.try_acquire(thread_id, holder, self.lease_s):
                    return
            except StorageBusy:
                if time.monotonic() >= deadline:
                    raise
            if not waited:
                await before_waiting()
                waited = True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _busy(thread_id)
            await asyncio.sleep(min(pause, remaining))
            pause = min(pause * 2, _MAX_POLL_S)

    async def _renew(self, thread_id: str, holder: str) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                if not await self.leases.renew(thread_id, holder, self.lease_s):
                    log.warning("the lease on thread %s expired and was taken over", thread_id)
                    return
            except Exception as exc:  # the next renewal may succeed before it expires
                log.warning("could not renew the lease on thread %s: %s", thread_id, exc)


def _busy(thread_id: str) -> ThreadBusy:
    return ThreadBusy(f"Thread {thread_id} is busy with another reply; retry when it has finished",
                      code="THREAD_BUSY")


async def _nothing() -> None:
    return None
