"""Record a chat stream's frames in the database while it streams, so any process can resume it.

``StreamRecording.record`` takes the frames of one gateway chat stream and returns a
``RecordedStream``. A task owned by the process (not by the request; see ``Producers``)
drives the frames to the end, hands each to a ``StreamRecorder`` and to the live response
while there is one. A client that hangs up only stops listening: the turn runs to
completion and every frame is recorded, so a reload (on this replica or another) replays
the whole reply (``dev_server.api.resume``).

``StreamRecorder`` coalesces writes: the first frame is written at once (a resume right
after the POST finds the stream), then at most one write per ``flush_every_s`` (sooner when
``max_batch`` frames are waiting), whatever is pending in one transaction, and always one at
the end that marks the stream finished. The first text frame is written before the client
gets it: a process killed at any point after the client saw text leaves that text in the
log, and the reply is rebuilt from it (``dev_server.agents.salvage``); later frames trail the
client by at most one flush. While no frame comes (a slow model, a long tool
call) it still renews the heartbeat every ``heartbeat_s``, so a resuming client can tell a
quiet stream from a dead process. A failed write costs only resumability: logged, and its
frames go with the next write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Coroutine
from dataclasses import dataclass, field
from typing import Any

import anyio
from sse_starlette import ServerSentEvent

from dev_server.storage.stream_log import Chunk, StreamLog, StreamOwner

log = logging.getLogger(__name__)

FLUSH_EVERY_S = 0.05
MAX_BATCH = 64
HEARTBEAT_S = 2.0
_END = object()
_TEXT_DELTA = '{"type":"text-delta"'  # how dev_server.streaming.sse.encode starts a text delta


class StreamRecorder:
    def __init__(self, stream_log: StreamLog, owner: StreamOwner, *, flush_every_s: float = FLUSH_EVERY_S,
                 max_batch: int = MAX_BATCH, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.log = stream_log
        self.owner = owner
        self.stream_id = stream_log.new_id()
        self.flush_every_s = flush_every_s
        self.max_batch = max_batch
        self.heartbeat_s = heartbeat_s
        self.writes = 0
        self._pending: list[Chunk] = []
        self._created = False
        self._closing = False
        self._closed = asyncio.Event()  # set by close(): a coalescing pause ends at once
        self._wake = asyncio.Event()
        self._writing = asyncio.Lock()  # one write at a time: the loop's, a sync's, the last
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def add(self, seq: int, data: str) -> None:
        self._pending.append((seq, data))
        if len(self._pending) == 1 or len(self._pending) >= self.max_batch:
            self._wake.set()

    async def sync(self) -> None:
        """Write every frame added so far now (after a write in flight, which may hold them)."""
        await self._flush(only_pending=True)

    async def close(self) -> None:
        """Write what is pending and mark the stream finished (waits for a write in flight)."""
        self._closing = True
        self._closed.set()
        self._wake.set()
        if self._task is not None:
            await asyncio.wait([self._task])
        await self._flush(finished=True)

    async def _run(self) -> None:
        # Never cancelled: a write cancelled half-way would leave us not knowing whether its
        # frames landed. ``close`` asks it to stop instead.
        last_write = float("-inf")
        while not self._closing:
            idle = self.heartbeat_s - (time.monotonic() - last_write)
            try:
                async with asyncio.timeout(max(0.0, idle)):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            gap = self.flush_every_s - (time.monotonic() - last_write)
            if gap > 0 and len(self._pending) < self.max_batch and not self._closing:
                # coalesce: what arrives meanwhile joins this write. A stream that ends
                # meanwhile ends the pause (its last write is close()'s), or every reply's end
                # waited out the rest of it: 50 ms on each turn of an instant model.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(gap):
                        await self._closed.wait()
            if self._closing:
                return
            await self._flush()
            last_write = time.monotonic()

    async def _flush(self, *, finished: bool = False, only_pending: bool = False) -> None:
        """One write of what is pending (none: it renews the heartbeat), unless ``only_pending``."""
        async with self._writing:
            if only_pending and not self._pending:
                return
            batch, self._pending = self._pending, []
            try:
                await self.log.write(self.stream_id, None if self._created else self.owner, batch,
                                     finished=finished)
                self._created = True
                self.writes += 1
            except Exception as exc:
                self._pending = batch + self._pending
                log.warning("recording stream %s failed (%d frames wait for the next write): %s",
                            self.stream_id, len(self._pending), exc)


class Producers:
    """This process's recorded streams still running. They outlive their response (a client
    that hangs up) but not the process: the lifespan drains them before the stores close."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self, grace_s: float) -> None:
        """Let running streams finish for up to ``grace_s``, then cancel them (each still
        saves its reply, marked interrupted, and marks its stream finished)."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


class RecordedStream:
    def __init__(self, frames: AsyncGenerator[ServerSentEvent, None], recorder: StreamRecorder,
                 producers: Producers) -> None:
        self.recorder = recorder
        self._live: asyncio.Queue[Any] = asyncio.Queue()
        self._listening = True
        self.task = producers.spawn(self._produce(frames))

    async def _produce(self, frames: AsyncGenerator[ServerSentEvent, None]) -> None:
        self.recorder.start()
        text_recorded = False
        try:
            async for frame in frames:
                self.recorder.add(int(frame.id), frame.data)
                if not text_recorded and frame.data.startswith(_TEXT_DELTA):
                    text_recorded = True
                    await self.recorder.sync()  # durable before the client sees it
                if self._listening:
                    self._live.put_nowait(frame)
        except Exception as exc:  # handed to the live response, which fails as it would have
            self._live.put_nowait(exc)
        finally:
            with anyio.CancelScope(shield=True):
                await frames.aclose()  # the turn is closed (its reply saved) before the stream is finished
                await self.recorder.close()
            self._live.put_nowait(_END)

    async def frames(self) -> AsyncGenerator[ServerSentEvent, None]:
        """The frames for the live response; leaving early only stops listening."""
        try:
            while True:
                item = await self._live.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._listening = False
            while not self._live.empty():
                self._live.get_nowait()


@dataclass
class StreamRecording:
    """What the chat route needs to record its streams: the shared log and this process's producers."""

    log: StreamLog
    producers: Producers = field(default_factory=Producers)

    def record(self, frames: AsyncGenerator[ServerSentEvent, None], owner: StreamOwner) -> RecordedStream:
        heartbeat_s = min(HEARTBEAT_S, self.log.dead_after_ms / 4000)  # a live stream never looks dead
        return RecordedStream(frames, StreamRecorder(self.log, owner, heartbeat_s=heartbeat_s), self.producers)
